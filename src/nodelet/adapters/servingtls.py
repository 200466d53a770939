"""The node server's TLS context: made from its serving pair and client CA files, and made
again when they change (`model.core.servingfiles` says which files and when).

- `load(files)`: what is served (`Served`): the files' content (`Content`), the server's
  `ssl.SSLContext` made from it — TLS 1.2 and up, the serving pair, and with a client CA,
  client certificates verified when presented (one from another CA fails the handshake; its
  usage is checked per request, as the kubelet's: `_any_client_purpose`) —
  and the client CA set (`ClientCAs`). The bytes read are what OpenSSL loads (through memory
  files, memfd), so a reload compares and loads the same content, and a private key is never
  written anywhere;
- `ClientCAs` (`adapters.clientcas`, loaded with a client CA file only): the client CA
  file's certificates, against which every request's client certificate is verified again:
  a connection opened with a CA since taken out of the file, or with a certificate that
  expired since, is refused (401) at its next request;
- `Reloader`: `run()` checks the watched files every `period` seconds (a stat each: a new
  inode, mtime or size), and when one changed, or the last content did not load, or every
  `servingfiles.RESYNC_PERIOD` whatever the stats say, reads them; content that differs from
  what is served and loads becomes a fresh `Served`, handed to `use` (the node server: new
  handshakes get its context, connections open or in their handshake keep theirs; every
  request from then on is verified against its client CA set). A fresh context, never
  `load_verify_locations` on the old one, which would only add CA certificates: a CA taken
  out of the file is no longer trusted. Content that does not load (a certificate whose key
  is not written yet, an empty or half-written file, a missing one) leaves what is served, is
  logged once, and is tried again at every check. The kubelet watches with fsnotify and a
  resync; a stat every few seconds costs next to nothing.

Exceptions: `TlsFilesError` (a ValueError): a file that cannot be read, or content that does
not load; the message names the files.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nodelet.model.core import servingfiles

if TYPE_CHECKING:
    from nodelet.adapters.clientcas import ClientCAs

log = logging.getLogger(__name__)


class TlsFilesError(ValueError):
    """The node server's TLS files cannot be read, or do not load; names them."""


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    client_ca: Path | None = None


@dataclass(frozen=True)
class Content:
    """What the files held when they were read."""

    cert: bytes
    key: bytes
    client_ca: bytes | None = None


@dataclass(frozen=True, eq=False)
class Served:
    """What the node server serves: the files' content, the TLS context made from it, and its
    client CA set (None without a client CA file)."""

    content: Content
    context: ssl.SSLContext
    client_cas: ClientCAs | None = None


def load(files: TlsFiles) -> Served:
    """Read the files and make what is served. Blocking. Raises TlsFilesError."""
    content = Content(_read(files.cert), _read(files.key),
                      None if files.client_ca is None else _read(files.client_ca))
    return served_of(content, files)


def served_of(content: Content, files: TlsFiles) -> Served:
    """The server's context and client CA set from `content` (`files` only name it in
    errors). Raises TlsFilesError."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_pair(context, content, files)
    client_cas = None
    if content.client_ca is not None:
        client_cas = _load_client_ca(context, content.client_ca, files)
        context.verify_mode = ssl.CERT_OPTIONAL
        _any_client_purpose(context)
    return Served(content, context, client_cas)


# OpenSSL's X509_PURPOSE_ANY, and what SSL_CTX_get_verify_mode reads for CERT_OPTIONAL.
_PURPOSE_ANY = 7
_VERIFY_PEER = 1
_purpose_warned = False


def _any_client_purpose(context: ssl.SSLContext) -> bool:
    """Let the handshake take a client certificate from a client CA whatever its extended key
    usage, as the kubelet's Go server does: it asks for a certificate and verifies nothing in
    the handshake (tls.RequestClientCert), and its x509 authenticator checks every request's
    certificate, clientAuth usage included — as `ClientCAs.refusal` and
    `nodeauth.chain_refusal` check every request here. Without this, OpenSSL's handshake
    refuses a certificate made for server use (`unsuitable certificate purpose`) where the
    kubelet's handshake takes it and its request is refused (401). Python's ssl has no
    setting for the purpose: SSL_CTX_set_purpose of the process's libssl, through ctypes, on
    the SSL_CTX that the SSLContext object holds first, after checking that the pointer reads
    back this context's verify mode from the same libssl. False (the handshake stays
    strict: the purpose checked there too) when any of that cannot be done."""
    global _purpose_warned
    try:
        libssl = ctypes.CDLL(f"libssl.so.{ssl.OPENSSL_VERSION_INFO[0]}")
        version = libssl.OpenSSL_version_num
        version.restype = ctypes.c_ulong
        get_mode = libssl.SSL_CTX_get_verify_mode
        get_mode.argtypes, get_mode.restype = [ctypes.c_void_p], ctypes.c_int
        set_purpose = libssl.SSL_CTX_set_purpose
        set_purpose.argtypes, set_purpose.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
        # The C object begins with PyObject_HEAD (a reference count and a type pointer), then
        # the SSL_CTX pointer (CPython's Modules/_ssl.c, PySSLContext).
        handle = ctypes.c_void_p.from_address(id(context) + 2 * ctypes.sizeof(ctypes.c_void_p))
        if version() != ssl.OPENSSL_VERSION_NUMBER or not handle.value \
                or get_mode(handle.value) != _VERIFY_PEER:
            raise OSError("the SSLContext's SSL_CTX could not be found")
        if set_purpose(handle.value, _PURPOSE_ANY) != 1:
            raise OSError("SSL_CTX_set_purpose failed")
    except (OSError, AttributeError) as exc:
        if not _purpose_warned:
            _purpose_warned = True
            log.warning("client certificates are checked for clientAuth in the TLS handshake "
                        "too (the kubelet checks them per request only): %s", exc)
        return False
    return True


def _load_pair(context: ssl.SSLContext, content: Content, files: TlsFiles) -> None:
    try:
        with _memory_file("cert", content.cert) as cert, _memory_file("key", content.key) as key:
            context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsFilesError(
            f"cannot load the serving pair {files.cert}, {files.key}: {exc}") from exc


def _load_client_ca(context: ssl.SSLContext, client_ca: bytes, files: TlsFiles) -> ClientCAs:
    """The CA set from `client_ca`, loaded into `context` too (what the handshake checks and
    what each request is verified against again come from the same bytes)."""
    # Imported here, with a client CA only: `cryptography` and its OpenSSL state cost the
    # agent ~11 MiB of memory, which a node server without one never needs.
    from nodelet.adapters.clientcas import ClientCAs
    try:
        with _memory_file("client-ca", client_ca) as ca:
            context.load_verify_locations(cafile=ca)
        return ClientCAs(client_ca)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise TlsFilesError(f"cannot load the client CA {files.client_ca}: {exc}") from exc


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsFilesError(f"cannot read {path}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _memory_file(name: str, data: bytes) -> Iterator[str]:
    """`data` in a file of memory, by a path OpenSSL can open (for the duration)."""
    fd = os.memfd_create(f"nodelet-tls-{name}", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _stamp(path: Path) -> servingfiles.Stamp | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return servingfiles.Stamp(stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


class Reloader:
    """Makes what is served again when the watched files change (see the module doc).
    `checks`, `reloads` and `failure` (why the files on disk are not served, None when they
    are) say what it did."""

    def __init__(self, *, files: TlsFiles, served: Served, watch: servingfiles.Watch,
                 use: Callable[[Served], None], period: float) -> None:
        self._files = files
        self._served = served.content
        self._watch = watch
        self._use = use
        self._period = period
        self._resync = servingfiles.resync_checks(period)
        self._seen: servingfiles.Stamps | None = None
        self._since_read = 0
        self.checks = 0
        self.reloads = 0
        self.failure: str | None = None

    async def run(self) -> None:
        """Check every `period` seconds until cancelled; the checks run on a thread."""
        while True:
            await asyncio.sleep(self._period)
            try:
                await asyncio.to_thread(self.check)
            except Exception:  # a bug must not end the watch: logged, checked again
                log.exception("checking the node server's TLS files failed")

    def paths(self) -> list[Path]:
        """The files watched."""
        f = self._files
        pair = [f.cert, f.key] if self._watch.pair else []
        return pair + ([f.client_ca] if self._watch.client_ca and f.client_ca else [])

    def check(self) -> None:
        """One check (blocking)."""
        self.checks += 1
        self._since_read += 1
        now = {str(path): _stamp(path) for path in self.paths()}
        failing = self.failure is not None
        if not servingfiles.due(self._seen, now, failing=failing, since_read=self._since_read,
                                resync=self._resync):
            return
        changed = servingfiles.changed(self._seen, now)
        self._seen, self._since_read = now, 0  # before reading: a change meanwhile is seen next
        fresh, problems = self._fresh()
        served = None
        if fresh != self._served:
            try:
                served = served_of(fresh, self._files)
            except TlsFilesError as exc:  # each part loaded alone: not expected
                problems.append(str(exc))
        self._failed("; ".join(problems) or None)
        if served is None:  # unchanged (touched, or put back), or nothing loads
            return
        self._served = fresh
        self._use(served)
        self.reloads += 1
        why = ", ".join(changed) or ("none since the last try" if failing
                                     else "none by their stat, found by the periodic read")
        log.info("the node server serves its TLS files anew (changed: %s); new connections "
                 "get them", why)

    def _fresh(self) -> tuple[Content, list[str]]:
        """What is served, with each watched part that changed and loads read anew (the pair
        and the client CA apart, as upstream's two controllers), and why the others do not
        load."""
        fresh, f, problems = self._served, self._files, []
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            if self._watch.pair:
                pair = replace(fresh, cert=_read(f.cert), key=_read(f.key))
                if pair != fresh:
                    _load_pair(probe, pair, f)
                fresh = pair
        except TlsFilesError as exc:
            problems.append(str(exc))
        try:
            if self._watch.client_ca and f.client_ca is not None:
                ca = _read(f.client_ca)
                if ca != fresh.client_ca:
                    _load_client_ca(probe, ca, f)
                fresh = replace(fresh, client_ca=ca)
        except TlsFilesError as exc:
            problems.append(str(exc))
        return fresh, problems

    def _failed(self, failure: str | None) -> None:
        """Log a new failure once, and the end of one."""
        if failure is not None and failure != self.failure:
            log.warning("the node server keeps serving what it has of its TLS files; tried "
                        "again at each check: %s", failure)
        elif failure is None and self.failure is not None:
            log.info("the node server's TLS files load again")
        self.failure = failure
