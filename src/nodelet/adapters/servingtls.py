"""The node server's TLS context: made from its serving pair and client CA files, and made
again when they change (`model.core.servingfiles` says which files and when).

- `load(files)`: the files' content (`Content`) and the server's `ssl.SSLContext` made from it:
  TLS 1.2 and up, the serving pair, and with a client CA, client certificates verified when
  presented (one from another CA fails the handshake). The bytes read are what OpenSSL loads
  (through memory files, memfd), so a reload compares and loads the same content, and a
  private key is never written anywhere;
- `Reloader`: `run(period)` checks the watched files every `period` seconds (a stat each: a
  new inode, mtime or size), and when one changed, or the last content did not load, reads
  them; content that differs from what is served and loads becomes a fresh context, handed to
  `use` (the TLS front: new handshakes get it; connections open or in their handshake keep
  theirs). A fresh context, never `load_verify_locations` on the old one, which would only add
  CA certificates: a CA taken out of the file is no longer trusted. Content that does not load
  (a certificate whose key is not written yet, an empty or half-written file, a missing one)
  leaves the context in use, is logged once, and is tried again at every check. The kubelet
  watches with fsnotify and a resync; a stat every few seconds costs next to nothing.

Exceptions: `TlsFilesError` (a ValueError): a file that cannot be read, or content that does
not load; the message names the files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from nodelet.model.core import servingfiles

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


def load(files: TlsFiles) -> tuple[Content, ssl.SSLContext]:
    """Read the files and make the context. Blocking. Raises TlsFilesError."""
    content = Content(_read(files.cert), _read(files.key),
                      None if files.client_ca is None else _read(files.client_ca))
    return content, context_of(content, files)


def context_of(content: Content, files: TlsFiles) -> ssl.SSLContext:
    """The server's context from `content` (`files` only name it in errors). Raises
    TlsFilesError."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_pair(context, content, files)
    if content.client_ca is not None:
        _load_client_ca(context, content.client_ca, files)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _load_pair(context: ssl.SSLContext, content: Content, files: TlsFiles) -> None:
    try:
        with _memory_file("cert", content.cert) as cert, _memory_file("key", content.key) as key:
            context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsFilesError(
            f"cannot load the serving pair {files.cert}, {files.key}: {exc}") from exc


def _load_client_ca(context: ssl.SSLContext, client_ca: bytes, files: TlsFiles) -> None:
    try:
        with _memory_file("client-ca", client_ca) as ca:
            context.load_verify_locations(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
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
    """Makes the context again when the watched files change (see the module doc).
    `checks`, `reloads` and `failure` (why the files on disk are not served, None when they
    are) say what it did."""

    def __init__(self, *, files: TlsFiles, served: Content, watch: servingfiles.Watch,
                 use: Callable[[ssl.SSLContext], None]) -> None:
        self._files = files
        self._served = served
        self._watch = watch
        self._use = use
        self._seen: servingfiles.Stamps | None = None
        self.checks = 0
        self.reloads = 0
        self.failure: str | None = None

    async def run(self, period: float) -> None:
        """Check every `period` seconds until cancelled; the checks run on a thread."""
        while True:
            await asyncio.sleep(period)
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
        now = {str(path): _stamp(path) for path in self.paths()}
        if not servingfiles.due(self._seen, now, failing=self.failure is not None):
            return
        changed = servingfiles.changed(self._seen, now)
        self._seen = now  # stamped before reading: a change while reading is seen next time
        fresh, problems = self._fresh()
        context = None
        if fresh != self._served:
            try:
                context = context_of(fresh, self._files)
            except TlsFilesError as exc:  # each part loaded alone: not expected
                problems.append(str(exc))
        self._failed("; ".join(problems) or None)
        if context is None:  # unchanged (touched, or put back), or nothing loads
            return
        self._served = fresh
        self._use(context)
        self.reloads += 1
        log.info("the node server serves its TLS files anew (changed: %s); new connections "
                 "get them", ", ".join(changed) or "none since the last try")

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
