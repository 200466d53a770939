"""Reading fields of a parsed manifest with type checks, and the errors that name the field.

The exception tree is documented (and re-exported) by `nodelet.model.manifests`; it is defined
here because every manifest module raises it. `path` is the field path such as
`spec.containers[0].image`; helpers take the object, the key and the path of the object.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

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


def type_error(path: str, expected: str, value: Any) -> FieldTypeError:
    hint = ""
    if expected == "a string" and isinstance(value, bool | int | float):
        hint = "; quote it (YAML reads yes/no/on/off/true/false and numbers as non-strings)"
    return FieldTypeError(f"expected {expected}, got {describe(value)}{hint}", path=path)


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
) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise type_error(join(path, key), "an integer", value)
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


def string_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    out = {}
    for name, value in mapping(obj, key, path).items():
        if not isinstance(value, str):
            raise type_error(f"{join(path, key)}.{name}", "a string", value)
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
