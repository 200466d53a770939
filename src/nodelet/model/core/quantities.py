"""Resource quantities (k8s.io/apimachinery/pkg/api/resource): "100m", "0.5", "128Mi", "1e3".

Values are exact `Decimal`s, parsed as resource.ParseQuantity does: no spaces, a decimal number
with an optional suffix or exponent, non-zero values rounded up (away from zero) to a multiple of
1n, binary-suffixed values capped at the largest int64 (`1Ei * 1000` is 9223372036854775807).
Like the API server, a decimal value is not capped (`1e30` is valid): the conversions to integers
round up like Quantity.Value and saturate at the int64 bounds instead of overflowing as Go does,
so no accepted quantity makes a huge (or endless) integer. Errors are `fields.FieldTypeError`
(not a string or number) and `fields.InvalidValueError` (malformed).
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, ROUND_UP, Decimal, InvalidOperation, localcontext
from typing import Any

from nodelet.model.core import fields

_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?\Z"
)
# Decimal suffixes as powers of ten, binary ones as powers of 1024.
_DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_NANO = Decimal("1e-9")
_INT64_MAX = Decimal(fields.INT64_MAX)
_INT64_MIN = Decimal(fields.INT64_MIN)


def _invalid(value: Any, path: str, why: str = "") -> fields.InvalidValueError:
    text = str(value)
    shown = text if len(text) <= 40 else text[:37] + "..."
    return fields.InvalidValueError(
        f'"{shown}" is not a quantity: {why or "a number with an optional suffix"} '
        "(n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent like e3)",
        path=path,
    )


def _exact(number: str, suffix: str, value: Any, path: str) -> Decimal:
    """The amount, exactly: built from its digits, never rounded by the decimal context."""
    if suffix in _BINARY:
        with localcontext() as context:
            context.prec = len(number) + 20  # enough: never rounds
            amount = Decimal(number) * Decimal(1024 ** _BINARY[suffix])
        # ParseQuantity caps BinarySI amounts at the largest int64.
        return max(min(amount, _INT64_MAX), _INT64_MIN)
    if suffix in _DECIMAL:
        return Decimal(f"{number}e{_DECIMAL[suffix]}")
    # The API server reads the exponent as an int32; a larger one cannot mean anything.
    digits = suffix[1:].lstrip("+-").lstrip("0")
    if len(digits) > 10 or int(digits or "0") > fields.INT32_MAX:
        raise _invalid(value, path, "the exponent is out of range")
    return Decimal(number + suffix)


def _round_to_nano(amount: Decimal) -> Decimal:
    """Non-zero amounts rounded up to whole nano units, as ParseQuantity does."""
    exponent = amount.as_tuple().exponent
    if amount == 0 or not isinstance(exponent, int) or exponent >= -9:
        return amount
    with localcontext() as context:
        context.prec = len(amount.as_tuple().digits) + 10  # enough: never rounds
        return amount.quantize(_NANO, rounding=ROUND_UP)


def parse_quantity(value: Any, *, path: str = "") -> Decimal:
    """A Kubernetes quantity ("100m", "0.5", "128Mi", "1G", "1e3" or a plain number)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise fields.type_error(path, 'a quantity such as "100m", "0.5", "128Mi"', value)
    match = _QUANTITY.match(str(value))
    if match is None:
        raise _invalid(value, path)
    try:
        return _round_to_nano(_exact(match.group(1), match.group(2) or "", value, path))
    except InvalidOperation as exc:
        raise _invalid(value, path) from exc


def _saturated(value: Decimal) -> Decimal:
    return max(min(value, _INT64_MAX), _INT64_MIN)


def ceil(value: Decimal) -> int:
    """`value` rounded up to an integer (how Quantity.Value rounds), within the int64 range."""
    return int(_saturated(value).to_integral_value(rounding=ROUND_CEILING))


def cpu_millis(value: Any, *, path: str = "") -> int:
    """A CPU quantity in millicores, rounded up like Quantity.MilliValue ("0.5" → 500)."""
    return ceil(_saturated(parse_quantity(value, path=path)) * 1000)


def memory_bytes(value: Any, *, path: str = "") -> int:
    """A memory quantity in bytes, rounded up like Quantity.Value ("128Mi" → 134217728)."""
    return ceil(parse_quantity(value, path=path))


def format_millis(value: int) -> str:
    """Millicores as Quantity.String writes a cpu quantity: whole cores, else millicores
    ("2", "250m")."""
    return str(value // 1000) if value % 1000 == 0 else f"{value}m"


def format_binary(value: int) -> str:
    """An amount of bytes as Quantity.String writes a binary-SI quantity: the largest of Ki,
    Mi, Gi, Ti, Pi, Ei that divides it exactly, else the plain number ("100Mi", "1234")."""
    for suffix, power in sorted(_BINARY.items(), key=lambda item: -item[1]):
        unit = 1024**power
        if value and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


_SI_BY_EXPONENT = {power: suffix for suffix, power in _DECIMAL.items()}


def canonical(value: Any) -> str:
    """The quantity as the API server and the kubelet write it back (Quantity.String's
    canonical form): a binary-suffixed whole amount of 1024 or more as the largest power of
    1024 that divides it ("1536Mi"); anything else as an integer times a power of 1000, the
    largest that keeps it whole ("1000" → "1k", "0.5" → "500m", "1500" → "1500"), with an SI
    suffix, or an exponent when written with one ("1e3" → "1e3"). A value that is not a
    quantity is returned as written (it is refused where it is read)."""
    match = _QUANTITY.match(str(value)) if isinstance(value, str | int | float) else None
    if match is None or isinstance(value, bool):
        return str(value)
    amount = parse_quantity(value)
    if amount == 0:
        return "0"
    suffix = match.group(2) or ""
    whole = amount == amount.to_integral_value()
    if suffix in _BINARY and abs(amount) >= 1024 and whole:
        return _base_1024(int(amount))
    mantissa, exponent = _base_1000(amount)
    exponent_written = len(suffix) > 1 and suffix[0] in "eE"  # "1E" alone is an exa
    if not exponent_written and exponent in _SI_BY_EXPONENT:
        return f"{mantissa}{_SI_BY_EXPONENT[exponent]}"
    return f"{mantissa}e{exponent}" if exponent else str(mantissa)


def _base_1024(value: int) -> str:
    power = 0
    while value % 1024 == 0 and power < len(_BINARY):
        value //= 1024
        power += 1
    names = {p: s for s, p in _BINARY.items()}
    return f"{value}{names.get(power, '')}"


def _base_1000(amount: Decimal) -> tuple[int, int]:
    """`amount` as mantissa * 10**exponent: the mantissa whole, the exponent a multiple of 3,
    as large as it can be (AsCanonicalBytes)."""
    sign, digits, exponent = amount.as_tuple()  # no arithmetic: 1e2147483647 is a quantity
    assert isinstance(exponent, int)  # a finite quantity
    text = "".join(map(str, digits))
    stripped = text.rstrip("0") or "0"
    exponent += len(text) - len(stripped)
    mantissa = int(stripped)
    shift = exponent % 3  # Python's modulo is never negative: lower to a multiple of 3
    return (-1 if sign else 1) * mantissa * 10**shift, exponent - shift
