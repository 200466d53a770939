"""Resource quantities (k8s.io/apimachinery/pkg/api/resource): "100m", "0.5", "128Mi", "1e3".

Values are exact `Decimal`s; conversions to integers round up like Quantity.Value. Errors are
`fields.FieldTypeError` (not a string or number) and `fields.InvalidValueError` (malformed).
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from nodelet.model import fields

_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{s: Decimal(1024**p) for p, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)},
}


def parse_quantity(value: Any, *, path: str = "") -> Decimal:
    """A Kubernetes quantity ("100m", "0.5", "128Mi", "1G", "1e3" or a plain number)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise fields.type_error(path, 'a quantity such as "100m", "0.5", "128Mi"', value)
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise fields.InvalidValueError(
            f'"{value}" is not a quantity: a number with an optional suffix '
            "(n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent like e3)",
            path=path,
        )
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E") and suffix not in _SUFFIXES:
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation as exc:
        raise fields.InvalidValueError(f'"{value}" is not a quantity', path=path) from exc


def ceil(value: Decimal) -> int:
    """`value` rounded up to an integer (how Quantity.Value rounds)."""
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def cpu_millis(value: Any, *, path: str = "") -> int:
    """A CPU quantity in millicores, rounded up like Quantity.MilliValue ("0.5" → 500)."""
    return ceil(parse_quantity(value, path=path) * 1000)


def memory_bytes(value: Any, *, path: str = "") -> int:
    """A memory quantity in bytes, rounded up like Quantity.Value ("128Mi" → 134217728)."""
    return ceil(parse_quantity(value, path=path))
