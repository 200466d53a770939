"""Reading fields of a parsed manifest with type checks, and the errors that name the field.

The exception tree is documented (and re-exported) by `nodelet.model.parsing.manifests`; it
is defined here because every manifest module raises it. `path` is the field path such as
`spec.containers[0].image`; helpers take the object, the key and the path of the object.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

# The widths of the v1 API's integer fields: a value outside them is a decoding error in the API
# server ("cannot unmarshal number ... of type int32"), and nothing that runs takes more.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_WIDTHS = {32: (INT32_MIN, INT32_MAX), 64: (INT64_MIN, INT64_MAX)}

# ---------------------------------------------------------------------------------------------
# Errors


class ManifestError(ValueError):
    """A manifest that cannot be run; `path` names the field, `message` says what to fix."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


class UnknownFieldError(ManifestError):
    """A field that the v1 API does not define (rejected with strict field validation)."""


class FieldTypeError(ManifestError):
    """A field whose value has the wrong type."""


class InvalidValueError(ManifestError):
    """A missing, malformed, out-of-range or duplicate value."""


class UnsupportedError(ManifestError):
    """Valid Kubernetes, but not something nodelet runs (other kinds, some volume types)."""


# ---------------------------------------------------------------------------------------------
# Field access with type checks


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int) and len(str(abs(value))) > 40:
        return f"a number of {len(str(abs(value)))} digits"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown)})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def key_path(path: str, key: str) -> str:
    """The path of a map entry, as the API server writes it: `metadata.labels[app]`."""
    return f"{path}[{key}]"


def type_error(path: str, expected: str, value: Any, *, redact: bool = False) -> FieldTypeError:
    """`redact` leaves the value out (a Secret's data must never reach a message or a log)."""
    hint = ""
    if expected == "a string" and isinstance(value, bool | int | float):
        hint = "; quote it (YAML reads yes/no/on/off/true/false and numbers as non-strings)"
    got = type(value).__name__ if redact and value is not None else describe(value)
    return FieldTypeError(f"expected {expected}, got {got}{hint}", path=path)


def string(obj: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise InvalidValueError("required: a non-empty string", path=join(path, key))
        return ""
    if not isinstance(value, str):
        raise type_error(join(path, key), "a string", value)
    return value


def integer(
    obj: Mapping[str, Any],
    key: str,
    path: str,
    *,
    low: int | None = None,
    high: int | None = None,
    bits: int = 64,
) -> int | None:
    """An int64 (or, with `bits=32`, an int32) field, within `low`..`high` when given."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise type_error(join(path, key), "an integer", value)
    width_low, width_high = _WIDTHS[bits]
    if not width_low <= value <= width_high:
        raise FieldTypeError(
            f"{describe(value)} does not fit in an int{bits}: the field takes "
            f"{width_low} to {width_high}",
            path=join(path, key),
        )
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidValueError(f"{value} is out of range: must be {bounds}", path=join(path, key))
    return value


def boolean(obj: Mapping[str, Any], key: str, path: str) -> bool:
    value = obj.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise type_error(join(path, key), "a boolean (true or false)", value)
    return value


def optional_boolean(obj: Mapping[str, Any], key: str, path: str) -> bool | None:
    """A boolean where "not set" means something else than false (security settings)."""
    return None if obj.get(key) is None else boolean(obj, key, path)


def mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise type_error(join(path, key), "a mapping", value)
    return value


def sequence(obj: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise type_error(join(path, key), "a list", value)
    return list(value)


def items(
    obj: Mapping[str, Any], key: str, path: str, parse: Callable[[Mapping[str, Any], str], T]
) -> tuple[T, ...]:
    """Parse a list of objects, each at `path.key[i]`."""
    out = []
    for i, item in enumerate(sequence(obj, key, path)):
        item_path = f"{join(path, key)}[{i}]"
        if not isinstance(item, Mapping):
            raise type_error(item_path, "a mapping", item)
        out.append(parse(item, item_path))
    return tuple(out)


def string_list(obj: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    values = obj.get(key)
    if values is None:
        return ()
    if not isinstance(values, list | tuple):
        raise type_error(join(path, key), "a list of strings", values)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise type_error(f"{join(path, key)}[{i}]", "a string", value)
    return tuple(values)


def string_map(
    obj: Mapping[str, Any], key: str, path: str, *, redact: bool = False
) -> dict[str, str]:
    """A map of strings; an entry's path is `path.key[name]`. `redact`: see `type_error`."""
    out = {}
    for name, value in mapping(obj, key, path).items():
        if not isinstance(value, str):
            raise type_error(key_path(join(path, key), str(name)), "a string", value, redact=redact)
        out[str(name)] = value
    return out


def one_of(value: str, allowed: Sequence[str], path: str) -> str:
    if value not in allowed:
        choices = ", ".join(allowed)
        raise InvalidValueError(f'unsupported value "{value}": must be one of {choices}', path=path)
    return value


def check_fields(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key in allowed:
            continue
        full = join(path, str(key))
        hint = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
        suggestion = f'; did you mean "{join(path, hint[0])}"?' if hint else ""
        raise UnknownFieldError(f'unknown field "{full}"{suggestion}', path=full)
