"""The node server's authentication and authorization seams with a plugged-in authorizer (as
cluster mode's SubjectAccessReview will be): 403 with the kubelet's message, the attributes the
authorizer is asked about, anonymous requests when allowed. The backend is a stub: only the
server's own decisions are under test here (tests/agent/test_node_server.py runs real pods)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nodelet import settings
from nodelet.adapters import node_server, servingcerts
from nodelet.model.core import health as hm
from nodelet.model.core import nodeauth
from nodelet.model.core import noderequests as nr
from nodelet.services.serving import nodeserving, preflight


class _Backend:
    def pods(self) -> list[Any]:
        return []

    def health(self) -> list[hm.HealthCheck]:
        return [hm.HealthCheck("stub", True, "")]

    def metrics_text(self) -> tuple[bytes, str]:
        return b"", "text/plain"

    async def summary(self, *, only_cpu_and_memory: bool) -> dict[str, Any]:
        return {"node": {"nodeName": "n1"}, "pods": []}

    async def resource_metrics(self) -> bytes:
        return b""

    async def probe_metrics(self) -> bytes:
        return b""

    async def stream_url(self, request: nr.StreamRequest) -> str:
        raise nr.NotFoundError("no pods here")

    async def run(self, pod: nr.PodRef, container: str, command: Sequence[str]) -> bytes:
        raise nr.NotFoundError("no pods here")

    async def open_logs(self, pod: nr.PodRef, container: str,
                        options: nr.LogOptions) -> AsyncIterator[bytes]:
        raise nr.NotFoundError("no pods here")


class _NoProxy:
    """Allows everything but the `proxy` subresource; remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[nodeauth.Attributes] = []

    async def authorize(self, attributes: nodeauth.Attributes) -> nodeauth.Decision:
        self.asked.append(attributes)
        return nodeauth.Decision(attributes.subresource != "proxy", "no proxy")


@pytest_asyncio.fixture(loop_scope="session")
async def server(tmp_path: Path) -> AsyncIterator[tuple[str, _NoProxy, Path]]:
    pair = servingcerts.ensure_self_signed(servingcerts.self_signed_paths(tmp_path),
                                           hostname="n1", ips=[])
    authorizer = _NoProxy()
    config = node_server.NodeServerConfig(
        address="127.0.0.1", port=0, node_name="n1", tls=node_server.TlsFiles(pair.cert, pair.key),
        authenticators=[nodeauth.TokenFile.parse("t1,bob,uid-1,devs\n")],
        authorizer=authorizer, anonymous=True)
    running = node_server.NodeServer(_Backend(), config)
    await running.start()
    try:
        yield f"https://127.0.0.1:{running.port}", authorizer, pair.cert
    finally:
        await running.stop()


async def _get(url: str, ca: Path, token: str | None = None) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(ca))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session, \
            session.get(url, headers=headers) as response:
        return response.status, await response.text()


async def test_plugged_in_authorizer_decides_with_the_kubelet_attributes(
        server: tuple[str, _NoProxy, Path]) -> None:
    url, authorizer, ca = server
    status, text = await _get(f"{url}/exec/default/web/main?command=sh&output=1", ca, "t1")
    assert status == 403
    # A session asks `create` even over GET (stricter than the kubelet).
    assert text == "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[proxy])\n"
    asked = authorizer.asked[-1]
    assert (asked.user.name, asked.user.groups, asked.name, asked.resource, asked.api_group) \
        == ("bob", ("devs", nodeauth.AUTHENTICATED), "n1", "nodes", "")
    assert (await _get(f"{url}/stats/summary", ca, "t1"))[0] == 200
    # Anonymous (allowed here): the authorizer is asked about system:anonymous.
    assert (await _get(f"{url}/healthz", ca))[0] == 200
    assert authorizer.asked[-1].user == nodeauth.ANONYMOUS_USER
    assert authorizer.asked[-1].subresource == "healthz"
    # A token that is not accepted is never anonymous.
    assert (await _get(f"{url}/healthz", ca, "wrong"))[0] == 401


async def test_fine_grained_attributes_any_one_allowed_is_enough(
        server: tuple[str, _NoProxy, Path]) -> None:
    """KubeletFineGrainedAuthz: `/pods` asks `nodes/pods` first, then `nodes/proxy`; a user
    without `nodes/proxy` but with `nodes/pods` reads the pods."""
    url, authorizer, ca = server
    authorizer.asked.clear()
    assert (await _get(f"{url}/pods", ca, "t1"))[0] == 200
    assert [a.subresource for a in authorizer.asked] == ["pods"]
    # HEAD: an empty verb, as the kubelet's (then 405: the route has GET only).
    context = ssl.create_default_context(cafile=str(ca))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session, \
            session.head(f"{url}/healthz", headers={"Authorization": "Bearer t1"}):
        pass
    assert authorizer.asked[-1].verb == ""


async def test_log_parameters_out_of_range_are_a_400(tmp_path: Path) -> None:
    pair = servingcerts.ensure_self_signed(servingcerts.self_signed_paths(tmp_path),
                                           hostname="n1", ips=[])
    running = node_server.NodeServer(_Backend(), node_server.NodeServerConfig(
        address="127.0.0.1", port=0, node_name="n1", tls=node_server.TlsFiles(pair.cert, pair.key),
        authenticators=[nodeauth.TokenFile.parse("t1,bob,uid-1,devs\n")]))
    await running.start()
    url = f"https://127.0.0.1:{running.port}/containerLogs/default/web/main"
    try:
        for query in ("sinceSeconds=100000000000", "sinceSeconds=1e11", "tailLines=1e30",
                      f"tailLines={10**30}", f"limitBytes={2**64}"):
            status, text = await _get(f"{url}?{query}", pair.cert, "t1")
            assert status == 400, (query, text)
            assert "Traceback" not in text and "Internal" not in text
        assert (await _get(f"{url}?tailLines=5", pair.cert, "t1"))[0] == 404  # the stub's
    finally:
        await running.stop()


class _Capture:
    """A stand-in for the runtime's streaming server: keeps the head and body of one request,
    framed as its Content-Length says, and answers 400."""

    def __init__(self) -> None:
        self.head = b""
        self.body = b""
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in self.head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        self.body = await reader.readexactly(length)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: 3\r\nConnection: close\r\n\r\nno\n")
        await writer.drain()
        writer.close()


class _Relaying(_Backend):
    def __init__(self, port: int) -> None:
        self._port = port

    async def stream_url(self, request: nr.StreamRequest) -> str:
        return f"http://127.0.0.1:{self._port}/exec/session-token"


async def test_the_exec_relay_sends_the_body_with_its_own_length(tmp_path: Path) -> None:
    """A chunked body reaches the runtime de-chunked, with a Content-Length and without the
    client's Transfer-Encoding (which would make the runtime read the bytes as chunks)."""
    capture = _Capture()
    upstream = await asyncio.start_server(capture.handle, "127.0.0.1", 0)
    pair = servingcerts.ensure_self_signed(servingcerts.self_signed_paths(tmp_path),
                                           hostname="n1", ips=[])
    running = node_server.NodeServer(
        _Relaying(upstream.sockets[0].getsockname()[1]), node_server.NodeServerConfig(
            address="127.0.0.1", port=0, node_name="n1",
            tls=node_server.TlsFiles(pair.cert, pair.key),
            authenticators=[nodeauth.TokenFile.parse("t1,bob,uid-1,devs\n")]))
    await running.start()
    # A body that is itself a chunk stream holding a second request: smuggled if forwarded
    # under the client's Transfer-Encoding.
    smuggled = b"0\r\n\r\nGET /exec/other HTTP/1.1\r\nHost: x\r\n\r\n"

    async def chunks() -> AsyncIterator[bytes]:
        yield smuggled[:10]
        yield smuggled[10:]

    context = ssl.create_default_context(cafile=str(pair.cert))
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as s, \
                s.post(f"https://127.0.0.1:{running.port}/exec/default/web/main?command=sh"
                       "&input=1", data=chunks(), headers={"Authorization": "Bearer t1"}) as r:
            assert (r.status, await r.text()) == (400, "no\n")
    finally:
        await running.stop()
        upstream.close()
        await upstream.wait_closed()
    headers = capture.head.decode().lower()
    assert "transfer-encoding" not in headers and "authorization" not in headers
    assert f"content-length: {len(smuggled)}\r\n" in headers
    assert capture.body == smuggled


class _GetOnly:
    """`get nodes/proxy` and nothing else: what a read-only monitoring role holds."""

    async def authorize(self, attributes: nodeauth.Attributes) -> nodeauth.Decision:
        return nodeauth.Decision(attributes.verb == "get", "get only")


async def test_get_on_nodes_proxy_alone_opens_no_session(tmp_path: Path) -> None:
    """exec, attach and portForward over a GET (a WebSocket upgrade) need `create
    nodes/proxy`; `get` still reads logs and pods."""
    pair = servingcerts.ensure_self_signed(servingcerts.self_signed_paths(tmp_path),
                                           hostname="n1", ips=[])
    running = node_server.NodeServer(_Backend(), node_server.NodeServerConfig(
        address="127.0.0.1", port=0, node_name="n1", tls=node_server.TlsFiles(pair.cert, pair.key),
        authenticators=[nodeauth.TokenFile.parse("t1,mon,uid-1,monitoring\n")],
        authorizer=_GetOnly()))
    await running.start()
    url = f"https://127.0.0.1:{running.port}"
    try:
        for path in ("/exec/default/web/main?command=sh&output=1&input=1",
                     "/exec/default/web/uid-1/main?command=sh&output=1",
                     "/attach/default/web/main?output=1", "/portForward/default/web?port=80"):
            status, text = await _get(url + path, pair.cert, "t1")
            assert (status, text) == (403, "Forbidden (user=mon, verb=create, resource=nodes, "
                                           "subresource(s)=[proxy])\n"), path
        # What `get` is for still works (the stub backend has no such pod: 404, not 403).
        assert (await _get(f"{url}/containerLogs/default/web/main", pair.cert, "t1"))[0] == 404
        assert (await _get(f"{url}/pods", pair.cert, "t1"))[0] == 200
    finally:
        await running.stop()


class _Busy:
    async def authenticate(self, credentials: nodeauth.Credentials) -> nodeauth.User | None:
        raise nodeauth.Overloaded("too many reviews in flight", retry_after=2)


async def test_an_overloaded_authenticator_is_a_429_with_retry_after(tmp_path: Path) -> None:
    pair = servingcerts.ensure_self_signed(servingcerts.self_signed_paths(tmp_path),
                                           hostname="n1", ips=[])
    running = node_server.NodeServer(_Backend(), node_server.NodeServerConfig(
        address="127.0.0.1", port=0, node_name="n1", tls=node_server.TlsFiles(pair.cert, pair.key),
        authenticators=[_Busy()]))
    await running.start()
    try:
        context = ssl.create_default_context(cafile=str(pair.cert))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as s, \
                s.get(f"https://127.0.0.1:{running.port}/pods",
                      headers={"Authorization": "Bearer x"}) as response:
            assert response.status == 429
            assert response.headers["Retry-After"] == "2"
    finally:
        await running.stop()


def test_a_node_without_an_ip_gets_a_certificate_without_one(tmp_path: Path) -> None:
    base = settings.Settings(data_dir=tmp_path, node_name="n1")
    config = nodeserving.server_config(base, host_ips=[""])  # host.host_ip() found none
    names = x509.load_pem_x509_certificate(config.tls.cert.read_bytes()).extensions \
        .get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(a) for a in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    config.tls.cert.unlink()
    with pytest.raises(preflight.StartupError, match="'not-an-ip' is not an IP address"):
        nodeserving.server_config(base, host_ips=["not-an-ip"])


def test_self_signed_pair_is_made_once_with_the_node_as_names(tmp_path: Path) -> None:
    paths = servingcerts.self_signed_paths(tmp_path)
    servingcerts.ensure_self_signed(paths, hostname="n1", ips=["10.1.2.3"])
    first = paths.cert.read_bytes()
    servingcerts.ensure_self_signed(paths, hostname="other", ips=[])
    assert paths.cert.read_bytes() == first  # reused, as the kubelet reuses kubelet.crt
    assert paths.key.stat().st_mode & 0o777 == 0o600
    names = x509.load_pem_x509_certificate(first).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["n1", "localhost"]
    assert {str(a) for a in names.get_values_for_type(x509.IPAddress)} == {
        "10.1.2.3", "127.0.0.1", "::1"}


def test_self_signed_serving_certificate_is_no_ca(tmp_path: Path) -> None:
    """As the kubelet's: a serving certificate (CA:FALSE, no keyCertSign, a year) signed by a
    throwaway CA whose certificate follows it in the file, so clients can pin the file."""
    paths = servingcerts.self_signed_paths(tmp_path)
    servingcerts.ensure_self_signed(paths, hostname="n1", ips=["10.1.2.3"])
    serving, ca = x509.load_pem_x509_certificates(paths.cert.read_bytes())
    constraints = serving.extensions.get_extension_for_class(x509.BasicConstraints).value
    usage = serving.extensions.get_extension_for_class(x509.KeyUsage).value
    assert not constraints.ca and not usage.key_cert_sign and usage.digital_signature
    lifetime = serving.not_valid_after_utc - serving.not_valid_before_utc
    assert datetime.timedelta(days=364) < lifetime <= datetime.timedelta(days=366)
    assert serving.issuer == ca.subject != serving.subject
    serving.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # The file pins the server: a client trusting only it completes a verified handshake.
    context = ssl.create_default_context(cafile=str(paths.cert))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(paths.cert, paths.key)
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client = context.wrap_bio(client_in, client_out, server_hostname="n1")
    served = server.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):
        for end, outgoing, peer_in in ((client, client_out, server_in),
                                       (served, server_out, client_in)):
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
            peer_in.write(outgoing.read())
    assert client.getpeercert()["subject"] == ((("commonName", serving.subject.rfc4514_string()
                                                 .removeprefix("CN=")),),)


def _old_style_pair(paths: servingcerts.CertPair) -> bytes:
    """What nodelet made before: a self-signed CA certificate valid ten years."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "n1@nodelet")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    paths.cert.parent.mkdir(parents=True)
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return paths.cert.read_bytes()


def test_an_old_self_signed_ca_certificate_is_replaced(tmp_path: Path) -> None:
    paths = servingcerts.self_signed_paths(tmp_path)
    old = _old_style_pair(paths)
    servingcerts.ensure_self_signed(paths, hostname="n1", ips=[])
    assert paths.cert.read_bytes() != old
    serving = x509.load_pem_x509_certificate(paths.cert.read_bytes())
    assert not serving.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert paths.key.stat().st_mode & 0o777 == 0o600


def test_server_settings_that_cannot_work_are_refused(tmp_path: Path) -> None:
    base = settings.Settings(data_dir=tmp_path, node_name="n1")
    half = replace(base, node_server=settings.NodeServerSettings(tls_cert_file=tmp_path / "c"))
    with pytest.raises(preflight.StartupError, match="give both or neither"):
        nodeserving.server_config(half)
    (tmp_path / "tokens.csv").write_text("just-a-token\n")
    bad = replace(base, node_server=settings.NodeServerSettings(
        token_auth_file=tmp_path / "tokens.csv"))
    with pytest.raises(preflight.StartupError, match="line 1"):
        nodeserving.server_config(bad)
