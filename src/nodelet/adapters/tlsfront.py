"""The node server's front door: TLS on an event loop of its own, on a thread of its own.

`TlsFront` owns the node server's listening socket. Its loop accepts connections, admits
them against the connection caps (below), does each TLS handshake (within
`Limits.handshake_timeout`), and then hands the connection to the agent's loop as a plain
socket — one end of a socketpair — with the client's address, verified certificate and
verified chain (`Peer`, to `deliver`); from then on it carries the bytes between the TLS
connection and the socketpair, encrypting and decrypting them, with flow control both ways
(a side whose buffer is full stops the other side's reading). So the handshakes — what a
flood of new connections costs — and the TLS of every stream never run on the agent's event
loop, which renews the Lease and drives CRI; OpenSSL releases the GIL while it works, so
they use the machine's other core. The agent's loop only ever sees connections that
finished a handshake.

Admission, before a byte of TLS is read:
- at most `max_per_source` connections from one address (in a handshake or handed over):
  a new one beyond is closed at once;
- at most `max_total` in all: a new one beyond takes the place of the oldest connection
  still in its handshake from the address that holds the most connections, when that
  address holds more than the newcomer's; otherwise the new one is closed. So the
  addresses' shares even out, a client with few connections and a prompt handshake always
  gets in, and a flood's own newcomers are refused instead of churning through its old
  ones. Connections in a handshake are cut after `handshake_timeout` anyway (idle or
  half-open ones: a ClientHello begun and never finished).

The front accepts on the raw listening socket itself (`ACCEPTS_PER_TURN` a turn): a refused
connection costs an accept and a close — no transport, protocol, task or TLS object.

`counters` says what happened (accepted, refused, evicted, failed handshakes, handed over).
No exceptions of its own: `start` raises the OSError of binding.
"""

from __future__ import annotations

import _ssl
import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# The listen backlog asked for (the kernel caps it at net.core.somaxconn).
BACKLOG = 4096
# Connections accepted per turn of the front's loop before its other work runs again.
ACCEPTS_PER_TURN = 64
# Bytes read from a TLS connection before its socketpair is connected are held, at most this
# many (then the connection is paused until it is connected).
_EARLY_LIMIT = 256 * 1024


@dataclass(frozen=True)
class Limits:
    """Connection caps (see the module doc) and the handshake's deadline in seconds."""

    max_total: int = 1024
    max_per_source: int = 256
    handshake_timeout: float = 10.0


@dataclass(frozen=True)
class Peer:
    """Who is on the other end of a handed-over connection."""

    address: str
    port: int
    # `ssl.SSLSocket.getpeercert()` of the client certificate the handshake verified, or None.
    certificate: dict[str, Any] | None = None
    # The chain the handshake verified, DER: the client's certificate first, the CA it chained
    # to last (empty without a client certificate). The node server verifies it again at every
    # request against the client CA served then, as the kubelet does.
    chain: tuple[bytes, ...] = ()


@dataclass
class Counters:
    accepted: int = 0
    refused_per_source: int = 0
    refused_total: int = 0
    evicted: int = 0
    handshakes_failed: int = 0
    handed: int = 0


# Called on the front's thread with the agent's end of the socketpair; must not block.
Deliver = Callable[[socket.socket, Peer], None]


class _Conn:
    """One admitted connection: its socket until its handshake starts, then its transport."""

    def __init__(self, source: str, sock: socket.socket) -> None:
        self.source = source
        self.sock: socket.socket | None = sock
        self.transport: asyncio.Transport | None = None
        self.gone = False

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        elif self.sock is not None:
            self.sock.close()
            self.sock = None


class TlsFront:
    def __init__(self, *, context: ssl.SSLContext, limits: Limits, deliver: Deliver) -> None:
        self._context = context
        self.limits = limits
        self._deliver = deliver
        self.counters = Counters()
        self._by_source: dict[str, dict[_Conn, None]] = {}
        self._in_handshake: dict[str, dict[_Conn, None]] = {}
        self._total = 0
        self._handshaking = 0  # plain counts: read from the agent's thread too
        self._tasks: set[asyncio.Task[None]] = set()
        # The front's ends of the socketpairs, open (closed when their connection ends).
        self.inner: set[asyncio.BaseTransport] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._failure: BaseException | None = None

    # -- life cycle (called from the agent's thread) -------------------------------------------

    def start(self, host: str, port: int) -> int:
        """Bind `host:port` (0: any free port), start the thread; the bound port. Blocking
        for as long as the thread takes to listen. Raises OSError."""
        listener = _bind(host, port)
        bound = int(listener.getsockname()[1])
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(listener, ready),
                                        name=f"node-server-tls:{bound}", daemon=True)
        self._thread.start()
        ready.wait()
        if self._failure is not None:
            raise OSError(f"the TLS front did not start: {self._failure}") from self._failure
        return bound

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listener and every connection, and end the thread. Blocking."""
        loop, stopping, thread = self._loop, self._stopping, self._thread
        if loop is None or stopping is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # its loop already closed
            loop.call_soon_threadsafe(stopping.set)
        thread.join(timeout)
        self._thread = None

    def use_context(self, context: ssl.SSLContext) -> None:
        """Handshakes that start from now on use `context` (a reloaded serving pair or client
        CA); connections open or in their handshake keep the one they started with. From any
        thread: a handshake reads the context once, as it starts."""
        self._context = context

    def held(self) -> int:
        """Connections held now (in a handshake or handed over)."""
        return self._total

    def in_handshake(self) -> int:
        """Connections held now that are still in their handshake."""
        return self._handshaking

    # -- the thread ------------------------------------------------------------------------------

    def _run(self, listener: socket.socket, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(listener, ready))
        except BaseException as exc:  # anything that ends the loop is reported and logged
            self._failure = exc
            log.exception("the node server's TLS front stopped")
        finally:
            ready.set()
            listener.close()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self, listener: socket.socket, ready: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        # Its own accept loop on the raw socket: a connection refused by the caps costs an
        # accept and a close, no transport, protocol, task or TLS object.
        loop.add_reader(listener.fileno(), self._accept, listener)
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            loop.remove_reader(listener.fileno())
            for conns in list(self._by_source.values()):
                for conn in list(conns):
                    self.forget(conn)
                    conn.abort()
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=5.0)
            # Aborted transports tell their protocols on the next turns: wait for every
            # connection to be gone, so none is left for the garbage collector to close.
            for _ in range(200):
                if not self._total and not self.inner:
                    break
                await asyncio.sleep(0.01)

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: try again on the next turn
                log.warning("the node server cannot accept a connection: %s", exc)
                return
            self.admit(sock, str(address[0]) if address else "")

    # -- admission (on the front's loop) -----------------------------------------------------------

    def admit(self, sock: socket.socket, source: str) -> None:
        """A new connection from `source`: held (its handshake started), or closed."""
        held = len(self._by_source.get(source, ()))
        if held >= self.limits.max_per_source:
            self.counters.refused_per_source += 1
            sock.close()
            return
        if self._total >= self.limits.max_total:
            victim = self._victim(held)
            if victim is None:
                self.counters.refused_total += 1
                sock.close()
                return
            self.counters.evicted += 1
            self.forget(victim)
            victim.abort()
        conn = _Conn(source, sock)
        self._by_source.setdefault(source, {})[conn] = None
        self._in_handshake.setdefault(source, {})[conn] = None
        self._total += 1
        self._handshaking += 1
        self.counters.accepted += 1
        task = asyncio.get_running_loop().create_task(self._handshake(conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _victim(self, newcomer_holds: int) -> _Conn | None:
        """The connection a newcomer from an address holding `newcomer_holds` takes the place
        of: the oldest one in a handshake of the address holding the most connections, when
        that is more than the newcomer's. So the addresses' shares even out, and a flood's
        own newcomers are refused (cheaply) rather than churning through its old ones."""
        if not self._in_handshake:
            return None
        source = max(self._in_handshake, key=lambda s: len(self._by_source.get(s, ())))
        if len(self._by_source.get(source, ())) <= newcomer_holds + 1:
            return None
        return next(iter(self._in_handshake[source]))

    def forget(self, conn: _Conn) -> None:
        if conn.gone:
            return
        conn.gone = True
        self._total -= 1
        if conn in self._in_handshake.get(conn.source, ()):
            self._handshaking -= 1
        for table in (self._by_source, self._in_handshake):
            held = table.get(conn.source)
            if held is not None:
                held.pop(conn, None)
                if not held:
                    del table[conn.source]

    def _handed(self, conn: _Conn) -> None:
        held = self._in_handshake.get(conn.source)
        if held is not None and conn in held:
            self._handshaking -= 1
            held.pop(conn)
            if not held:
                del self._in_handshake[conn.source]

    async def _handshake(self, conn: _Conn) -> None:
        loop = asyncio.get_running_loop()
        outer = _Outer(self, conn)
        sock, conn.sock = conn.sock, None
        if conn.gone or sock is None:  # evicted before its turn came
            if sock is not None:
                sock.close()
            return
        try:
            # Paused from the start: no byte may be read before TLS takes the connection.
            conn.transport, _ = await loop.connect_accepted_socket(_Paused, sock=sock)
            tls = await loop.start_tls(conn.transport, outer, self._context, server_side=True,
                                       ssl_handshake_timeout=self.limits.handshake_timeout)
        except (OSError, EOFError, TimeoutError) as exc:
            # A failed, cut or timed-out handshake (start_tls closed the transport); an
            # evicted connection is counted as evicted only.
            if conn.transport is None:
                sock.close()
            if not conn.gone:
                self.counters.handshakes_failed += 1
                log.debug("TLS handshake from %s failed: %r", conn.source, exc)
                self.forget(conn)
            return
        if conn.gone or outer.lost or tls is None:
            if tls is not None:
                tls.abort()
            return
        self._handed(conn)
        outer.tls = tls
        await self._hand_over(conn, outer, tls)

    async def _hand_over(self, conn: _Conn, outer: _Outer, tls: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        try:
            ours.setblocking(False)
            theirs.setblocking(False)
            inner, _ = await loop.connect_accepted_socket(lambda: _Inner(outer, self),
                                                          sock=ours)
            address = tls.get_extra_info("peername") or (conn.source, 0)
            peer = Peer(conn.source, int(address[1]), tls.get_extra_info("peercert") or None,
                        _verified_chain(tls.get_extra_info("ssl_object")))
            self._deliver(theirs, peer)
        except (OSError, RuntimeError) as exc:  # the agent's loop is gone: shutting down
            log.debug("cannot hand a connection from %s over: %r", conn.source, exc)
            theirs.close()
            ours.close()
            tls.abort()
            return
        self.counters.handed += 1
        outer.attach(inner)


def _verified_chain(ssl_object: ssl.SSLObject | None) -> tuple[bytes, ...]:
    """The peer's verified chain, DER (empty without a peer certificate). Python 3.13 has
    `SSLObject.get_verified_chain`; before, the same method of its `_sslobj` (public there
    from 3.13, as `ssl.py` calls it) returns certificate objects. Without either, the
    certificate alone (a chain whose CA signed it directly still verifies)."""
    if ssl_object is None:
        return ()
    method = getattr(ssl_object, "get_verified_chain", None)
    if method is not None:
        return tuple(bytes(der) for der in method() or ())
    inner = getattr(getattr(ssl_object, "_sslobj", None), "get_verified_chain", None)
    if inner is not None:
        return tuple(bytes(cert.public_bytes(_ssl.ENCODING_DER)) for cert in inner() or ())
    leaf = ssl_object.getpeercert(binary_form=True)
    return (leaf,) if leaf else ()


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(BACKLOG)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    return listener


class _Paused(asyncio.Protocol):
    """A connection before TLS: reading paused at once, until start_tls replaces it."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()


class _Outer(asyncio.Protocol):
    """The TLS side once the handshake is done: decrypted bytes go to the socketpair."""

    def __init__(self, front: TlsFront, conn: _Conn) -> None:
        self._front = front
        self._conn = conn
        self.tls: asyncio.Transport | None = None
        self.inner: asyncio.Transport | None = None
        self._early: list[bytes] = []
        self._early_size = 0
        self._eof = False
        self.lost = False

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.write(data)
            return
        self._early.append(data)
        self._early_size += len(data)
        if self._early_size > _EARLY_LIMIT and self.tls is not None:
            self.tls.pause_reading()

    def eof_received(self) -> bool | None:
        # TLS has no half-close: the transport closes after this (and connection_lost closes
        # the socketpair); the agent side is told the client has finished sending.
        if self.inner is not None and self.inner.can_write_eof():
            self.inner.write_eof()
        self._eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._front.forget(self._conn)
        if self.inner is not None:
            self.inner.close()

    def pause_writing(self) -> None:  # the client reads slower than the agent answers
        if self.inner is not None:
            self.inner.pause_reading()

    def resume_writing(self) -> None:
        if self.inner is not None and not self.inner.is_closing():
            self.inner.resume_reading()

    def attach(self, inner: asyncio.Transport) -> None:
        self.inner = inner
        for data in self._early:
            inner.write(data)
        self._early.clear()
        if self.lost:
            inner.close()
            return
        if self._eof and inner.can_write_eof():
            inner.write_eof()
        if self.tls is not None and not self.tls.is_reading() and not self.tls.is_closing():
            self.tls.resume_reading()


class _Inner(asyncio.Protocol):
    """The front's end of the socketpair: the agent's bytes go out encrypted."""

    def __init__(self, outer: _Outer, front: TlsFront) -> None:
        self._outer = outer
        self._front = front

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._front.inner.add(transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        tls = self._outer.tls
        if tls is not None and not tls.is_closing():
            tls.write(data)

    def eof_received(self) -> bool | None:
        self._close_tls()  # the agent closed the connection: close_notify after the data
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._front.inner.discard(self._transport)
        self._close_tls()

    def pause_writing(self) -> None:  # the agent reads slower than the client sends
        tls = self._outer.tls
        if tls is not None and not tls.is_closing():
            tls.pause_reading()

    def resume_writing(self) -> None:
        tls = self._outer.tls
        if tls is not None and not tls.is_closing():
            tls.resume_reading()

    def _close_tls(self) -> None:
        tls = self._outer.tls
        if tls is not None and not tls.is_closing():
            tls.close()
