"""Just enough of Kubernetes' protobuf encoding for the test API server to read what kubectl
writes in it: kubectl's typed clients (`kubectl certificate approve|deny`) PUT the
CertificateSigningRequest as `application/vnd.kubernetes.protobuf` and do not fall back to JSON.

The body is the magic `k8s\\x00` and a `runtime.Unknown` (1: typeMeta {1: apiVersion, 2: kind},
2: raw); `raw` is the object in the generated.proto field numbers of k8s.io/api. Only a CSR's
name, uid and resourceVersion and its status conditions are read — all the `approval`
subresource may change; the spec is the stored one. Anything else: `None` (the server answers
415).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, value) of one message: varints as int, length-delimited as bytes."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(data, i)
            yield number, data[i:i + size]
            i += size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _text(fields: list[tuple[int, bytes | int]], number: int) -> str:
    return next((v.decode() for n, v in fields if n == number and isinstance(v, bytes)), "")


def _message(fields: list[tuple[int, bytes | int]], number: int) -> list[tuple[int, bytes | int]]:
    raw = next((v for n, v in fields if n == number and isinstance(v, bytes)), b"")
    return list(_fields(raw))


def _time(fields: list[tuple[int, bytes | int]]) -> str | None:
    seconds = next((v for n, v in fields if n == 1 and isinstance(v, int)), None)
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decode_csr(body: bytes) -> dict[str, Any] | None:
    """The CSR of a protobuf body (metadata and status conditions), None if it is not one."""
    if not body.startswith(MAGIC):
        return None
    unknown = list(_fields(body[len(MAGIC):]))
    type_meta = _message(unknown, 1)
    if _text(type_meta, 2) != "CertificateSigningRequest":
        return None
    raw = next((v for n, v in unknown if n == 2 and isinstance(v, bytes)), b"")
    csr = list(_fields(raw))
    meta = _message(csr, 1)
    conditions = []
    for number, value in _message(csr, 3):
        if number != 1 or not isinstance(value, bytes):
            continue
        cond = list(_fields(value))
        decoded = {
            "type": _text(cond, 1), "status": _text(cond, 6), "reason": _text(cond, 2),
            "message": _text(cond, 3), "lastUpdateTime": _time(_message(cond, 4)),
            "lastTransitionTime": _time(_message(cond, 5))}
        conditions.append({k: v for k, v in decoded.items() if v is not None})
    return {"apiVersion": _text(type_meta, 1), "kind": "CertificateSigningRequest",
            "metadata": {"name": _text(meta, 1), "uid": _text(meta, 5),
                         "resourceVersion": _text(meta, 6)},
            "status": {"conditions": conditions}}
