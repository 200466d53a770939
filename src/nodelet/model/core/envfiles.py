"""Env files (`env[].valueFrom.fileKeyRef`, the EnvFiles feature: beta and on by default since
Kubernetes 1.35): a variable's value read from a file in one of the pod's emptyDir volumes,
typically written there by an init container, when the container that names it is created.

The rules here are pure; reading the file is `services.podwork.fileenv`. As the kubelet
v1.37's makeEnvironmentVariables and its env file parser (pkg/kubelet/util/env):

- the file's path is taken inside the volume as if the volume were `/` (securejoin: symlinks
  are followed, but never out of it);
- the file is read line by line up to the first assignment to the key; a line longer than
  64 KiB (bufio.Scanner's buffer, its newline included) is an error, as is any line before the
  key's that is not blank, a `#` comment or `NAME='value'`; what follows the key's line is not
  read;
- the value is everything between single quotes, kept as written (no escapes, no expansion),
  across lines until the closing quote; after it only blanks and a `#` comment may follow;
  `NAME= 'x'` (a blank after `=`) assigns the empty string;
- an empty value is a key that is not there: with `optional` the variable is left out, without
  it the container is not created (`environment variable key "K" not found in file "P"`);
- a file that cannot be opened or parsed is an error whether or not the ref is `optional`;
  the kubelet says only `couldn't parse env file` (and logs why), and so does nodelet.

Beyond the kubelet, as a bound: a value longer than `MAX_VALUE_CHARS` is a parse error (one
larger than a CRI message could not be sent to the runtime anyway).

Exceptions::

    EnvFileError    the file cannot be parsed; `.message` is the parser's words (logged)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import downward, pods

# bufio.Scanner's default buffer (MaxScanTokenSize): a line and its "\n" must fit in it.
READ_LIMIT = 64 * 1024
# The value of one variable: the runtime's CRI messages are at most 16 MiB.
MAX_VALUE_CHARS = 16 * 1024 * 1024

# The kubelet's words: the one error a container shows for any file it cannot read or parse.
PARSE_FAILED = "couldn't parse env file"


class EnvFileError(errors.MessageError):
    """An env file that cannot be read or parsed; `message` is the parser's words."""


@dataclass(frozen=True)
class FileKeyRef:
    """One `fileKeyRef`: the key `key` of the env file at `path` in the emptyDir `volume`."""

    volume: str
    path: str
    key: str
    optional: bool = False


@dataclass(frozen=True)
class FileValue:
    """What reading one FileKeyRef gave: the value ("" when the key is not in the file or is
    empty), the file's host path as resolved, or the error the container shows."""

    value: str = ""
    file_path: str = ""
    error: str = ""


FileValues = Mapping[FileKeyRef, FileValue]


def file_key_ref(value_from: Mapping[str, Any]) -> FileKeyRef | None:
    """The `fileKeyRef` of a `valueFrom` (checked when the manifest was read), or None."""
    ref = value_from.get("fileKeyRef")
    if not isinstance(ref, Mapping):
        return None
    return FileKeyRef(volume=str(ref.get("volumeName") or ""), path=str(ref.get("path") or ""),
                      key=str(ref.get("key") or ""), optional=bool(ref.get("optional")))


def file_key_refs(container: pods.Container) -> tuple[FileKeyRef, ...]:
    """Every fileKeyRef of the container's `env`, in order, each once."""
    refs = (file_key_ref(var.value_from) for var in container.env if var.value_from)
    return tuple(dict.fromkeys(ref for ref in refs if ref is not None))


def not_found_message(key: str, file_path: str) -> str:
    """The kubelet's error for a key that is not in the file (or has an empty value)."""
    return f"environment variable key {downward.go_quote(key)} not found in file " \
        f"{downward.go_quote(file_path)}"


def missing_volume_message(volume: str) -> str:
    """The kubelet's error for a fileKeyRef whose volume the pod does not have set up."""
    return f"cannot find the volume {downward.go_quote(volume)} referenced by FileKeyRef"


# ---------------------------------------------------------------------------------------------
# Lines


def line_of(chunk: bytes) -> str:
    """One line as bufio.Scanner's ScanLines gives it, from a chunk read with
    `readline(READ_LIMIT)`: without its "\\n" and one "\\r" before it. A chunk that filled the
    limit without a newline is a line too long for the kubelet's scanner. Bytes that are not
    UTF-8 are replaced (CRI strings are UTF-8)."""
    if not chunk.endswith(b"\n") and len(chunk) >= READ_LIMIT:
        raise EnvFileError("bufio.Scanner: token too long")
    line = chunk.removesuffix(b"\n").removesuffix(b"\r")
    return line.decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# The parser


def _invalid(number: int, what: str) -> EnvFileError:
    return EnvFileError(f"invalid environment variable format at line {number}: {what}")


def _assignment(line: str, number: int) -> tuple[str, str] | None:
    """(name, what follows "=") of a line that is not blank or a comment; None for those."""
    line = line.lstrip(" \t")
    if not line or line.startswith("#"):
        return None
    name, equals, rest = line.partition("=")
    if not equals:
        raise _invalid(number, "missing '='")
    if not name.rstrip(" \t"):
        raise _invalid(number, "empty variable name")
    if name != name.rstrip(" \t"):
        raise _invalid(number, "whitespace before '=' is not allowed")
    return name, rest


def _check_after_quote(text: str, number: int) -> None:
    after = text.lstrip(" \t")
    if after and not after.startswith("#"):
        raise _invalid(number, "unexpected content after closing quote")


def _quoted(rest: str, lines: Iterator[str], number: int) -> tuple[str, int]:
    """The value of a quoted assignment starting after its opening quote, read across lines
    from `lines` when it spans several; and the number of the line it ended on."""
    parts: list[str] = []
    size, start = 0, number
    while True:
        value, quote, after = rest.partition("'")
        parts.append(value)
        size += len(value) + 1
        if size > MAX_VALUE_CHARS:
            raise EnvFileError(f"the value starting at line {start} is longer than "
                               f"{MAX_VALUE_CHARS} characters")
        if quote:
            _check_after_quote(after, number)
            return "".join(parts), number
        parts.append("\n")
        following = next(lines, None)
        if following is None:
            raise EnvFileError("invalid environment variable format starting at line "
                               f"{start}: unclosed single quote")
        rest, number = following, number + 1


def find(lines: Iterable[str], key: str) -> str:
    """The value of `key` in an env file given as its lines (`line_of`): the first assignment
    to it; "" when there is none. Raises EnvFileError for a malformed line before it."""
    stream = iter(lines)
    number = 0
    for line in stream:
        number += 1
        found = _assignment(line, number)
        if found is None:
            continue
        name, rest = found
        if rest != rest.lstrip(" \t"):
            # `NAME= 'x'` assigns "" (as sh does); what follows is not looked at.
            if name == key:
                return ""
            continue
        if not rest.startswith("'"):
            raise _invalid(number, "value must be enclosed in single quotes")
        value, number = _quoted(rest[1:], stream, number)
        if name == key:
            return value
    return ""


def resolve(ref: FileKeyRef, found: FileValue) -> str | None:
    """The variable's value from what reading the file gave; None when it is left out (an
    optional key that is missing or empty). Raises EnvFileError with the container's error."""
    if found.error:
        raise EnvFileError(found.error)
    if found.value:
        return found.value
    if ref.optional:
        return None
    raise EnvFileError(not_found_message(ref.key, found.file_path))
