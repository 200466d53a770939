"""The node server's TLS context: made from its serving pair and client CA files, and made
again when they change (`model.core.servingfiles` says which files and when).

- `load(files)`: what is served (`Served`): the files' content (`Content`), the server's
  `ssl.SSLContext` made from it — TLS 1.2 and up, the serving pair, and with a client CA,
  client certificates verified when presented (one from another CA fails the handshake; its
  usage is checked per request, as the kubelet's: `_any_client_purpose`) —
  and the client CA set (`ClientCAs`). The bytes read are what OpenSSL loads (through memory
  files, memfd), so a reload compares and loads the same content, and a private key is never
  written anywhere;
- `ClientCAs`: the client CA file's certificates, against which every request's client
  certificate is verified again (`refusal`), as the kubelet's x509 authenticator verifies
  `req.TLS.PeerCertificates` at every request against the CA bundle loaded at that moment:
  a connection opened with a CA since taken out of the file, or with a certificate that
  expired since, is refused (401) at its next request. Its signatures are checked here, the
  rest by `model.core.nodeauth.chain_refusal`;
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
import datetime
import logging
import os
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import Encoding

from nodelet.model.core import nodeauth, servingfiles

log = logging.getLogger(__name__)

_E = TypeVar("_E", bound=x509.ExtensionType)


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
    try:
        with _memory_file("client-ca", client_ca) as ca:
            context.load_verify_locations(cafile=ca)
        return ClientCAs(client_ca)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise TlsFilesError(f"cannot load the client CA {files.client_ca}: {exc}") from exc


# Signatures checked to verify one client chain, at most (Go's x509 gives up after 100);
# and how many chains' paths to a CA are remembered (per CA set: a reload starts afresh).
_MAX_SIGNATURE_CHECKS = 100
_REMEMBERED = 256


class ClientCAs:
    """The client CA file's certificates (every PEM certificate in it), and the verification
    of a client's chain against them at every request (on the agent's loop)."""

    def __init__(self, bundle: bytes) -> None:
        """Raises ValueError when `bundle` holds no certificate or one that does not parse."""
        self._roots: dict[x509.Name, list[x509.Certificate]] = {}
        self._root_ders: set[bytes] = set()
        for cert in x509.load_pem_x509_certificates(bundle):
            self._roots.setdefault(cert.subject, []).append(cert)
            self._root_ders.add(_der(cert))
        # By chain: the paths from its first certificate to a CA of the set, signatures
        # checked, as plain facts (`nodeauth.chain_refusal` decides on them at each request).
        self._paths: dict[tuple[bytes, ...], tuple[tuple[nodeauth.ChainCertificate, ...], ...]] \
            = {}

    def refusal(self, chain: tuple[bytes, ...], now: datetime.datetime) -> str | None:
        """Why the client's `chain` (DER, its certificate first, then what may lead to a CA:
        the chain its handshake verified) does not authenticate it at `now`, None when it
        does: a path to a CA of this set, each certificate signed by the next, that
        `nodeauth.chain_refusal` accepts (dates, CA constraints, clientAuth usage)."""
        paths = self._paths.get(chain)
        if paths is None:
            paths = self._paths[chain] = self._find_paths(chain)
            if len(self._paths) > _REMEMBERED:
                del self._paths[next(iter(self._paths))]
        if not paths:
            return "the client certificate is not signed by a CA of the client CA file"
        refusals = [nodeauth.chain_refusal(path, now) for path in paths]
        return None if None in refusals else refusals[0]

    def _find_paths(self, chain: tuple[bytes, ...]
                    ) -> tuple[tuple[nodeauth.ChainCertificate, ...], ...]:
        certs = [_parsed(der) for der in chain]
        leaf, others = certs[0] if certs else None, [c for c in certs[1:] if c is not None]
        if leaf is None:
            return ()
        if _der(leaf) in self._root_ders:  # itself a CA of the set (as Go: a chain of one)
            found = [[leaf]]
        else:
            found, budget = [], [_MAX_SIGNATURE_CHECKS]
            self._climb([leaf], others, found, budget)
        facts = []
        for path in found:
            try:
                facts.append(tuple(_facts(cert) for cert in path))
            except ValueError:  # an extension that does not parse: not a usable path
                continue
        return tuple(facts)

    def _climb(self, path: list[x509.Certificate], others: list[x509.Certificate],
               found: list[list[x509.Certificate]], budget: list[int]) -> None:
        """Every path from `path` up to a CA of the set: its issuers among the set first
        (a path ends there), then among `others` (the chain's intermediates, each once)."""
        child = path[-1]
        for issuer in self._roots.get(child.issuer, ()):
            if _signed_by(child, issuer, budget):
                found.append([*path, issuer])
        for issuer in others:
            if issuer.subject == child.issuer and all(issuer is not p for p in path) \
                    and _signed_by(child, issuer, budget):
                self._climb([*path, issuer], others, found, budget)


def _parsed(der: bytes) -> x509.Certificate | None:
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError:
        return None


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(Encoding.DER)


def _signed_by(child: x509.Certificate, issuer: x509.Certificate, budget: list[int]) -> bool:
    """Whether `issuer`'s key signed `child` (its issuer name `issuer`'s subject); each call
    spends one of `budget`, none left: False."""
    if budget[0] <= 0:
        return False
    budget[0] -= 1
    try:
        child.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True


def _facts(cert: x509.Certificate) -> nodeauth.ChainCertificate:
    """What `nodeauth.chain_refusal` reads of `cert`. Raises ValueError for an extension that
    does not parse."""
    extensions = cert.extensions
    constraints = _extension(extensions, x509.BasicConstraints)
    usage = _extension(extensions, x509.KeyUsage)
    extended = _extension(extensions, x509.ExtendedKeyUsage)
    return nodeauth.ChainCertificate(
        not_before=cert.not_valid_before_utc, not_after=cert.not_valid_after_utc,
        version=1 if cert.version == x509.Version.v1 else 3,
        ca=None if constraints is None else constraints.ca,
        path_length=None if constraints is None else constraints.path_length,
        cert_sign=None if usage is None else usage.key_cert_sign,
        usages=None if extended is None else frozenset(oid.dotted_string for oid in extended))


def _extension(extensions: x509.Extensions, kind: type[_E]) -> _E | None:
    try:
        return extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


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
