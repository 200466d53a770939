"""Reading the documents of a cluster dump (pure: bytes in, plain JSON-like values out).

What `kubectl` and friends write, in any of these shapes:

- JSON: one document, or several written one after another (`kubectl cluster-info dump` to
  stdout, a shell loop appending `kubectl get -o json`); the log sections that
  `cluster-info dump` puts between them (`==== START logs for …` … `==== END logs for …`) are
  skipped;
- YAML: one or more documents (`-o yaml`, with or without `---`). Unquoted timestamps, which
  YAML loaders turn into datetimes (a dump re-written by a YAML tool), come back as
  `datetime` values: the reader of the documents accepts them as times;
- either of them gzip-compressed.

Errors raise `DumpError` (a `ValueError`) with one line naming the source and the position.
Large dumps: JSON is parsed by the standard library's C decoder in one call, YAML by libyaml
(`CSafeLoader`) when available.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from typing import Any

import yaml


class DumpError(ValueError):
    """A dump that cannot be read; the message names the source and the position."""


_GZIP_MAGIC = b"\x1f\x8b"
_LOG_START = re.compile(r"==== START logs for [^\n]*\n")
_LOG_END = re.compile(r"==== END logs for [^\n]*(?:\n|$)")
_LOADER: type[yaml.SafeLoader | yaml.CSafeLoader] = (
    yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)


def documents(data: bytes, source: str) -> list[Any]:
    """The documents in `data` (JSON or YAML, maybe gzip); DumpError naming `source`."""
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise DumpError(f"{source}: not a readable gzip file ({exc})") from exc
    start = data.lstrip()[:1]
    if not start:
        raise DumpError(f"{source}: empty input; expected Kubernetes objects in JSON or YAML")
    try:
        if start in (b"{", b"["):
            return _json_documents(data, source)
        return _yaml_documents(data, source)
    except RecursionError as exc:
        raise DumpError(f"{source}: nested too deeply to be a Kubernetes object") from exc


def _json_documents(data: bytes, source: str) -> list[Any]:
    try:
        return [json.loads(data)]  # the common case: one document, parsed in C in one call
    except UnicodeDecodeError as exc:
        raise DumpError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise _json_error(source, exc) from exc
    return _concatenated(data.decode("utf-8-sig"), source)


def _concatenated(text: str, source: str) -> list[Any]:
    """Several JSON documents one after another, with cluster-info dump's log sections."""
    decoder, pos, end = json.JSONDecoder(), 0, len(text)
    out: list[Any] = []
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos == end:
            return out
        if (log := _LOG_START.match(text, pos)) is not None:
            stop = _LOG_END.search(text, log.end())
            pos = end if stop is None else stop.end()
            continue
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _json_error(source, exc) from exc
        out.append(value)


def _json_error(source: str, exc: json.JSONDecodeError) -> DumpError:
    return DumpError(f"{source}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
                     "; expected Kubernetes objects, e.g. from `kubectl get pods -A -o json`")


def _yaml_documents(data: bytes, source: str) -> list[Any]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DumpError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        docs = [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        raise DumpError(f"{source}: neither JSON nor YAML ({_yaml_problem(exc)}); expected "
                        "Kubernetes objects, e.g. from `kubectl get pods -A -o yaml`") from exc
    if not docs:
        raise DumpError(f"{source}: no documents; expected Kubernetes objects in JSON or YAML")
    if all(not isinstance(d, dict | list) for d in docs):
        raise DumpError(f"{source}: plain text, neither JSON nor YAML objects (kubectl's table "
                        "output is not a dump); expected Kubernetes objects, e.g. from "
                        "`kubectl get pods -A -o json`")
    return docs


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} at line {mark.line + 1} column {mark.column + 1}"
    return str(exc).splitlines()[0]
