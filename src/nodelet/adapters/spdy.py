"""SPDY/3.1 framing, as moby/spdystream writes it: what the CRI streaming servers (containerd's
exec, attach and port-forward) and the kubelet speak with client-go, and what
`node_client.RemoteCommand` uses for exec and attach (remote-command v4 over SPDY can close a
command's stdin; its WebSocket form cannot).

Control frames start with the version and a type, data frames with their stream ID; header
blocks are zlib-compressed, one stream each way per connection, primed with the protocol's
dictionary. Only what a client of those servers needs: SYN_STREAM out, SYN_REPLY, RST_STREAM,
HEADERS and PING in, data both ways.

Exceptions::

    FramingError    a header block that does not decompress
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import zlib
from collections.abc import Mapping


class FramingError(Exception):
    """The peer's SPDY frames cannot be read."""


VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, PING, HEADERS = 1, 2, 3, 6, 8
FIN = 0x01
_DICTIONARY_WORDS = (
    b"options", b"head", b"post", b"put", b"delete", b"trace", b"accept", b"accept-charset",
    b"accept-encoding", b"accept-language", b"accept-ranges", b"age", b"allow",
    b"authorization", b"cache-control", b"connection", b"content-base", b"content-encoding",
    b"content-language", b"content-length", b"content-location", b"content-md5",
    b"content-range", b"content-type", b"date", b"etag", b"expect", b"expires", b"from",
    b"host", b"if-match", b"if-modified-since", b"if-none-match", b"if-range",
    b"if-unmodified-since", b"last-modified", b"location", b"max-forwards", b"pragma",
    b"proxy-authenticate", b"proxy-authorization", b"range", b"referer", b"retry-after",
    b"server", b"te", b"trailer", b"transfer-encoding", b"upgrade", b"user-agent", b"vary",
    b"via", b"warning", b"www-authenticate", b"method", b"get", b"status", b"200 OK",
    b"version", b"HTTP/1.1", b"url", b"public", b"set-cookie", b"keep-alive", b"origin")
# The SPDY/3 draft's header dictionary: the words above, each after its length (4 bytes, big
# endian), then status codes and lines, dates and content types.
_DICTIONARY = b"".join(struct.pack(">I", len(w)) + w for w in _DICTIONARY_WORDS) + (
    b"100101201202205206300302303304305306307402405406407408409410411412413414415416417502504"
    b"505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    b"401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    b"503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, "
    b"Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    b"application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    b"gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.")


class Framer:
    """One connection's header compression: each way a zlib stream with the dictionary."""

    def __init__(self) -> None:
        self._compress = zlib.compressobj(zdict=_DICTIONARY)
        self._decompress = zlib.decompressobj(zdict=_DICTIONARY)

    def syn_stream(self, stream_id: int, headers: Mapping[str, str]) -> bytes:
        block = struct.pack(">I", len(headers)) + b"".join(
            struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
            for k, v in headers.items())
        packed = self._compress.compress(block) + self._compress.flush(zlib.Z_SYNC_FLUSH)
        # Then the associated stream (none), priority and slot (0).
        return control(SYN_STREAM, 0, struct.pack(">IIH", stream_id, 0, 0) + packed)

    def read_headers(self, block: bytes) -> None:
        try:
            self._decompress.decompress(block)
        except zlib.error as exc:
            raise FramingError(f"the server's SPDY headers are corrupt: {exc}") from exc


def control(kind: int, flags: int, body: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, flags << 24 | len(body)) + body


def data_frame(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
    return struct.pack(">II", stream_id, (FIN if fin else 0) << 24 | len(data)) + data


async def read_frame(reader: asyncio.StreamReader
                      ) -> tuple[int | None, int, int, bytes] | None:
    """The next frame: (control frame type, or None for data; stream ID, 0 for a control
    frame without one; flags; payload). None when the connection ended."""
    try:
        first, second = struct.unpack(">II", await reader.readexactly(8))
        payload = await reader.readexactly(second & 0xFFFFFF)
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        return None
    if not first & 0x80000000:
        return None, first, second >> 24, payload
    kind = first & 0xFFFF
    stream_id = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF \
        if kind in (SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS) and len(payload) >= 4 else 0
    return kind, stream_id, second >> 24, payload
