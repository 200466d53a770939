"""A real local image registry for tests that pull: Debian's `docker-registry`, and a slow proxy.

- `Registry.started()` runs `/usr/bin/docker-registry serve CONFIG` on 127.0.0.1 (a free port,
  plain HTTP, no auth) with its storage in a fresh temp dir, waits until `GET /v2/` answers, and
  at the end stops that process by its PID and removes the dir. Debian's systemd unit for the
  package plays no part. `Registry.started(auth=(USER, PASSWORD))` asks for HTTP basic auth
  (the registry's `htpasswd` backend, with a bcrypt htpasswd file written here); the registry
  and containerd 1.6 both accept basic auth over plain HTTP on loopback, so no TLS is needed.
  Without credentials the registry answers `401 Unauthorized`.
- `push_oci_archive(url, archive, repo, tag)` uploads an OCI image layout tar (as built by
  images/build.py) with the registry v2 API: each blob as a monolithic POST + PUT upload, then
  the manifest with its media type as Content-Type.
- `unique_variant(archive, out, marker)` writes a copy of a one-layer image whose layer has one
  more file (`/etc/nodelet-image`), so its layer, config and manifest digests are new. containerd
  skips blobs its content store already has — and the plain busybox image is always there — so
  only a variant's pull really transfers blobs (and can be slowed down).
- `SlowProxy`: an asyncio TCP proxy in front of the registry that holds every blob GET for
  `delay_s` seconds before forwarding it; manifests and everything else pass at once.
  containerd 1.6 fetches an image's config blob and then its layer, one after the other
  (measured), so pulling a one-layer variant through it takes ≈ 2 * `delay_s`:
  `slow_proxy(PULL_15S_DELAY)` gives the ≈15 s pull of the KEP-3085 node e2e case.

containerd 1.6's CRI plugin pulls plain HTTP from `localhost` / `127.0.0.1` registries with no
configuration (its default scheme for a loopback host is http).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt

REGISTRY_BINARY = "/usr/bin/docker-registry"
BUSYBOX_ARCHIVE = Path(__file__).resolve().parents[2] / "images" / "out" / "busybox.tar"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
START_TIMEOUT = 15.0
HTTP_TIMEOUT = 30.0
MARKER_PATH = "etc/nodelet-image"
# Held blob GETs in a pull of a one-layer image (config, then layer), and the per-blob delay
# that makes such a pull take about 15 s.
BLOB_GETS_PER_PULL = 2
PULL_15S_DELAY = 15.0 / BLOB_GETS_PER_PULL

_CONFIG = """\
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""
_AUTH_CONFIG = """\
auth:
  htpasswd:
    realm: nodelet-test
    path: {htpasswd}
"""
# bcrypt cost of the test htpasswd file: the registry checks it on every request.
_BCRYPT_ROUNDS = 5

Auth = tuple[str, str]  # (username, password)


class RegistryError(RuntimeError):
    """The registry did not start, or refused an upload."""


# -- OCI image layouts ----------------------------------------------------------------------------


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob_path(digest: str) -> str:
    algorithm, hex_ = digest.split(":", 1)
    return f"blobs/{algorithm}/{hex_}"


def read_layout(archive: Path) -> dict[str, bytes]:
    """Every regular file of an OCI image layout tar, by path (`index.json`, `blobs/sha256/…`)."""
    files: dict[str, bytes] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None
                files[member.name.removeprefix("./")] = extracted.read()
    return files


def write_layout(files: dict[str, bytes], out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(files[path]), 0o644
            tar.addfile(info, io.BytesIO(files[path]))
    return out


def _with_files(layer_gz: bytes, extra: Mapping[str, bytes]) -> bytes:
    """The uncompressed layer tar with the `extra` files (path → content) in place of any it
    had at those paths."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer_gz))) as src, \
            tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for member in src.getmembers():
            if member.name.lstrip("./") in extra:
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for path, data in sorted(extra.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            dst.addfile(info, io.BytesIO(data))
    return out.getvalue()


def unique_variant(archive: Path, out: Path, marker: str,
                   extra: Mapping[str, bytes] | None = None) -> Path:
    """Write a copy of the one-layer image in `archive` whose layer also holds `marker` (and
    `extra` files, path → content, in place of the image's own at those paths)."""
    files = read_layout(archive)
    index = json.loads(files["index.json"])
    [entry] = index["manifests"]
    manifest = json.loads(files[_blob_path(entry["digest"])])
    [layer] = manifest["layers"]
    raw = _with_files(files[_blob_path(layer["digest"])],
                      {**(extra or {}), MARKER_PATH: marker.encode() + b"\n"})
    layer_gz = gzip.compress(raw, compresslevel=1, mtime=0)
    config = json.loads(files[_blob_path(manifest["config"]["digest"])])
    config["rootfs"]["diff_ids"] = [_digest(raw)]
    config_blob = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    layer.update(digest=_digest(layer_gz), size=len(layer_gz))
    manifest["config"].update(digest=_digest(config_blob), size=len(config_blob))
    manifest_blob = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    entry.update(digest=_digest(manifest_blob), size=len(manifest_blob))
    entry.pop("annotations", None)  # the base image's name; the variant is named by its push
    new = {"oci-layout": files["oci-layout"], "index.json": json.dumps(index).encode()}
    new |= {_blob_path(_digest(b)): b for b in (layer_gz, config_blob, manifest_blob)}
    return write_layout(new, out)


# -- registry v2 API uploads ------------------------------------------------------------------


# No proxy from the environment: the registry is on loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def basic_auth(auth: Auth) -> str:
    return base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()


def _request(method: str, url: str, *, data: bytes | None = None,
             headers: dict[str, str] | None = None,
             auth: Auth | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = dict(headers or {})
    if auth is not None:
        headers["Authorization"] = f"Basic {basic_auth(auth)}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _OPENER.open(req, timeout=HTTP_TIMEOUT) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _upload_blob(base: str, repo: str, blob: bytes, auth: Auth | None) -> None:
    digest = _digest(blob)
    status, _, _ = _request("HEAD", f"{base}/v2/{repo}/blobs/{digest}", auth=auth)
    if status == 200:
        return
    status, headers, body = _request("POST", f"{base}/v2/{repo}/blobs/uploads/", auth=auth)
    if status != 202:
        raise RegistryError(f"starting an upload to {repo}: HTTP {status}: {body[:300]!r}")
    location = urllib.parse.urljoin(base + "/", headers["Location"])
    separator = "&" if "?" in location else "?"
    put = f"{location}{separator}digest={urllib.parse.quote(digest)}"
    status, _, body = _request("PUT", put, data=blob, headers={
        "Content-Type": "application/octet-stream", "Content-Length": str(len(blob))},
        auth=auth)
    if status != 201:
        raise RegistryError(f"uploading {digest} to {repo}: HTTP {status}: {body[:300]!r}")


def _put_manifest(base: str, repo: str, reference: str, blob: bytes, media_type: str,
                  auth: Auth | None) -> None:
    status, _, body = _request("PUT", f"{base}/v2/{repo}/manifests/{reference}", data=blob,
                               headers={"Content-Type": media_type}, auth=auth)
    if status != 201:
        raise RegistryError(f"pushing manifest {repo}:{reference}: HTTP {status}: {body[:300]!r}")


def push_oci_archive(registry_url: str, archive: Path, repo: str, tag: str, *,
                     auth: Auth | None = None) -> str:
    """Push the image(s) of an OCI layout tar as `repo:tag`; returns the tagged manifest digest.

    One manifest in index.json is tagged itself; several are pushed by digest and tagged through
    an image index. `registry_url` is like `http://127.0.0.1:5000`; `auth` for a registry that
    asks for basic auth.
    """
    base = registry_url.rstrip("/")
    files = read_layout(archive)
    index = json.loads(files["index.json"])
    for descriptor in index["manifests"]:
        manifest_blob = files[_blob_path(descriptor["digest"])]
        manifest = json.loads(manifest_blob)
        for blob in (manifest["config"], *manifest["layers"]):
            _upload_blob(base, repo, files[_blob_path(blob["digest"])], auth)
        if len(index["manifests"]) > 1:
            _put_manifest(base, repo, descriptor["digest"], manifest_blob,
                          descriptor["mediaType"], auth)
    if len(index["manifests"]) == 1:
        [descriptor] = index["manifests"]
        _put_manifest(base, repo, tag, files[_blob_path(descriptor["digest"])],
                      descriptor["mediaType"], auth)
        return str(descriptor["digest"])
    index_blob = json.dumps({"schemaVersion": 2, "mediaType": MEDIA_INDEX,
                             "manifests": index["manifests"]}).encode()
    _put_manifest(base, repo, tag, index_blob, MEDIA_INDEX, auth)
    return _digest(index_blob)


# -- the slow proxy -------------------------------------------------------------------------------


def delays_blob_gets(method: str, path: str) -> bool:
    """The default `SlowProxy` rule: hold `GET /v2/<repo>/blobs/<digest>`."""
    return method == "GET" and "/blobs/sha256:" in path


@dataclass(frozen=True)
class SeenRequest:
    at: float  # time.monotonic() when the request head arrived
    method: str
    path: str
    delayed: bool


@dataclass
class SlowProxy:
    """A TCP proxy to `upstream` that holds matching HTTP requests for `delay_s` s.

    Holding the request holds the response: its first byte cannot come earlier. containerd 1.6
    resolves the tag (HEAD + GET manifest, not held), then GETs the config blob and only then
    the layer blob, so a pull of a one-layer image takes ≈ 2 * `delay_s` (measured 6.1 s for
    3 s). `requests` lists what was seen, to check a pull went through. Requests are parsed
    only to find where each one starts (HTTP/1.1, Content-Length bodies; a chunked request
    body switches the connection to plain copying); responses are copied untouched.
    """

    upstream: tuple[str, int]
    delay_s: float
    delayed: Callable[[str, str], bool] = delays_blob_gets
    requests: list[SeenRequest] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def host(self) -> str:
        assert self._server is not None, "proxy not started"
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        # close() cancels the handlers. When a handler's task is done, Python 3.11's
        # start_server calls `task.exception()`, which raises for a cancelled task: the loop
        # reports "Exception in callback StreamReaderProtocol..." (3.12 checks `cancelled()`
        # first). So a cancelled handler ends normally: its connection is closed either way.
        with contextlib.suppress(asyncio.CancelledError):
            await self._proxy(client_r, client_w)

    async def _proxy(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            self._handlers.discard(task)
            return
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._requests(client_r, up_w), name="slow-proxy-requests")
                group.create_task(_copy(up_r, client_w), name="slow-proxy-responses")
        except* (OSError, asyncio.IncompleteReadError):
            # Either side went away: nothing to forward any more (containerd 2.x's puller may
            # be gone before the half-close, which then fails with ENOTCONN).
            pass
        finally:
            for writer in (client_w, up_w):
                writer.close()
            self._handlers.discard(task)

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward request after request, holding the matching ones; EOF ends the direction."""
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    writer.write(exc.partial)
                break
            method, path, length, chunked = _parse_head(head)
            delayed = self.delayed(method, path)
            self.requests.append(SeenRequest(time.monotonic(), method, path, delayed))
            if delayed:
                await asyncio.sleep(self.delay_s)
            writer.write(head)
            if chunked:
                await _copy(reader, writer)
                return
            if length:
                writer.write(await reader.readexactly(length))
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


def _parse_head(head: bytes) -> tuple[str, str, int, bool]:
    """(method, path, Content-Length, chunked) of an HTTP/1.1 request head."""
    lines = head.decode("latin-1").split("\r\n")
    method, path = [*lines[0].split(" "), "", ""][:2]
    length, chunked = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
        elif name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    return method, path, length, chunked


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


# -- the registry process -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_htpasswd(path: Path, auth: Auth) -> Path:
    """An htpasswd file with one bcrypt entry (the registry accepts bcrypt only)."""
    hashed = bcrypt.hashpw(auth[1].encode(), bcrypt.gensalt(rounds=_BCRYPT_ROUNDS)).decode()
    path.write_text(f"{auth[0]}:{hashed}\n")
    return path


@dataclass
class Registry:
    """A running `docker-registry` serving http://127.0.0.1:PORT with storage under `root`."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]
    # The (username, password) the registry asks for; None: no auth.
    auth: Auth | None = None
    _pushes: int = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    @classmethod
    @contextlib.contextmanager
    def started(cls, *, auth: Auth | None = None) -> Iterator[Registry]:
        if not os.access(REGISTRY_BINARY, os.X_OK):
            raise RegistryError(f"{REGISTRY_BINARY} is missing: apt-get install docker-registry "
                                "(make setup installs it)")
        root = Path(tempfile.mkdtemp(prefix="nl-registry-", dir="/tmp"))
        registry: Registry | None = None
        try:
            registry = cls._start(root, auth)
            yield registry
        finally:
            if registry is not None:
                registry.stop()
            shutil.rmtree(root, ignore_errors=True)

    @classmethod
    def _start(cls, root: Path, auth: Auth | None) -> Registry:
        # The port is free when chosen; another process could take it before the registry
        # binds it, so a registry that exits at once is retried on a new port.
        text = _CONFIG
        if auth is not None:
            text += _AUTH_CONFIG.format(htpasswd=_write_htpasswd(root / "htpasswd", auth))
        for _ in range(3):
            port = _free_port()
            config = root / "config.yml"
            config.write_text(text.format(storage=root / "storage", port=port))
            log = (root / "registry.log").open("ab")
            process = subprocess.Popen([REGISTRY_BINARY, "serve", str(config)],
                                       stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
            log.close()
            registry = cls(root, port, process, auth)
            if registry._wait_ready():
                return registry
            registry.stop()
        log_text = (root / "registry.log").read_text(errors="replace")[-2000:]
        raise RegistryError(f"docker-registry did not answer GET /v2/ within {START_TIMEOUT}s; "
                            f"its log:\n{log_text}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if _request("GET", f"{self.url}/v2/", auth=self.auth)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        """Stop the registry process by its PID (SIGTERM, then SIGKILL after 5 s)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)

    def ref(self, repo: str, tag: str, *, host: str | None = None) -> str:
        return f"{host or self.host}/{repo}:{tag}"

    def push_archive(self, archive: Path, repo: str, tag: str) -> str:
        """Push an OCI layout tar as `repo:tag`; returns the reference on this registry."""
        push_oci_archive(self.url, archive, repo, tag, auth=self.auth)
        return self.ref(repo, tag)

    def push(self, repo: str, tag: str, *, base: Path = BUSYBOX_ARCHIVE,
             files: Mapping[str, bytes] | None = None) -> str:
        """Push a fresh variant of `base` (busybox) as `repo:tag`, with `files` (path →
        content) in place of the image's own; returns its reference.

        Every push has its own layer, so containerd has none of its blobs yet and a pull of it
        transfers them — through a slow proxy, too — even after other tests pulled other tags.
        """
        self._pushes += 1
        marker = f"{repo}:{tag} #{self._pushes} {os.getpid()} {time.time_ns()}"
        archive = unique_variant(base, self.root / "variants" / f"{self._pushes}.tar", marker,
                                 files)
        return self.push_archive(archive, repo, tag)

    @contextlib.asynccontextmanager
    async def slow_proxy(self, delay_s: float, *,
                         delayed: Callable[[str, str], bool] = delays_blob_gets
                         ) -> AsyncIterator[SlowProxy]:
        """A `SlowProxy` to this registry in the running loop; `.host` is its host:port."""
        proxy = SlowProxy(("127.0.0.1", self.port), delay_s, delayed)
        await proxy.start()
        try:
            yield proxy
        finally:
            await proxy.close()
