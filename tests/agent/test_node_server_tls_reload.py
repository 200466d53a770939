"""The node server reads its serving pair and client CA files again when they change, as the
kubelet with ReloadKubeletServerCertificateFile and ReloadKubeletClientCAFile (both on by
default in 1.37): new connections get the new certificate and the new CA's clients;
connections already open keep their serving certificate, but their client certificate is
verified again at every request against the CA served then (the kubelet's x509
authenticator), so a client of a CA taken out of the file, or whose certificate expired, is
refused there (401); content that does not load (a certificate whose key is not written yet)
leaves the old pair served until it does; and a rewrite a stat cannot see is read at the
periodic resync.

Real TLS end to end: the server built by `nodeserving.server_config` from settings, as the
agent builds it, with a stub backend (only TLS and authentication are under test); files
rewritten in place, as the node e2e suite's specs (kubelet_tls_test.go,
kubelet_server_tls_test.go) rewrite them. The check period is shortened; every wait polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import http.client
import ipaddress
import logging
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from nodelet import settings
from nodelet.adapters import node_server, servingtls
from nodelet.model.core import servingfiles
from nodelet.services.serving import nodeserving
from support.nodebackend import EmptyBackend
from support.polling import eventually

CHECK = 0.05  # the check period of these tests, in seconds


_Backend = EmptyBackend


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass(frozen=True)
class Issued:
    """A CA (and its key), a serving pair for 127.0.0.1 and a client pair (CN alice), all
    signed by it."""

    ca: bytes
    cert: bytes
    key: bytes
    client_cert: bytes
    client_key: bytes
    ca_key: bytes

    @property
    def serving_der(self) -> bytes:
        return x509.load_pem_x509_certificate(self.cert).public_bytes(serialization.Encoding.DER)

    @classmethod
    def make(cls, name: str, *, client_for: datetime.timedelta | None = None) -> Issued:
        """`client_for`: the client certificate's lifetime from now (default: an hour)."""
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
        ca = cls._sign(_builder(ca_name, ca_name, ca_key)
                       .add_extension(x509.BasicConstraints(ca=True, path_length=None), True),
                       ca_key)
        key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
            ec.SECP256R1())
        serving = cls._sign(_leaf(ca_name, key, "localhost", ExtendedKeyUsageOID.SERVER_AUTH)
                            .add_extension(x509.SubjectAlternativeName([
                                x509.DNSName("localhost"),
                                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False),
                            ca_key)
        client = cls._sign(_leaf(ca_name, client_key, "alice", ExtendedKeyUsageOID.CLIENT_AUTH,
                                 lifetime=client_for or HOUR), ca_key)
        return cls(_pem(ca), _pem(serving), _key_pem(key), _pem(client), _key_pem(client_key),
                   _key_pem(ca_key))

    @staticmethod
    def _sign(builder: x509.CertificateBuilder, key: ec.EllipticCurvePrivateKey
              ) -> x509.Certificate:
        return builder.sign(key, hashes.SHA256())


HOUR = datetime.timedelta(hours=1)


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
             lifetime: datetime.timedelta = HOUR) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + lifetime))


def _leaf(issuer: x509.Name, key: ec.EllipticCurvePrivateKey, cn: str,
          usage: x509.ObjectIdentifier, lifetime: datetime.timedelta = HOUR
          ) -> x509.CertificateBuilder:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    return (_builder(subject, issuer, key, lifetime)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
            .add_extension(x509.ExtendedKeyUsage([usage]), False))


@dataclass
class Files:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "client-ca.crt"

    @property
    def cert(self) -> Path:
        return self.directory / "serving.crt"

    @property
    def key(self) -> Path:
        return self.directory / "serving.key"

    def client(self, issued: Issued, name: str) -> tuple[Path, Path]:
        cert, key = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        cert.write_bytes(issued.client_cert)
        key.write_bytes(issued.client_key)
        return cert, key

    def write(self, issued: Issued) -> None:
        """In place (same inodes, truncated and written), as the node e2e specs do."""
        self.ca.write_bytes(issued.ca)
        self.cert.write_bytes(issued.cert)
        self.key.write_bytes(issued.key)


def _replace(path: Path, data: bytes) -> None:
    """A new file renamed over `path` (another inode)."""
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_bytes(data)
    temporary.replace(path)


@contextlib.asynccontextmanager
async def _serving(tmp_path: Path, files: Files, gates: str = ""
                   ) -> AsyncIterator[node_server.NodeServer]:
    s = settings.Settings(
        data_dir=tmp_path / "data", node_name="n1", gates=settings.parse_feature_gates(gates),
        node_server=settings.NodeServerSettings(
            address="127.0.0.1", port=0, tls_cert_file=files.cert,
            tls_private_key_file=files.key, client_ca_file=files.ca,
            tls_files_check_period=CHECK))
    config = await asyncio.to_thread(nodeserving.server_config, s)
    server = node_server.NodeServer(_Backend(), config)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@dataclass(frozen=True)
class Seen:
    serving: bytes  # the server's certificate, DER
    status: int  # of GET /healthz


def _context(trust: bytes, client: tuple[Path, Path] | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=trust.decode())
    if client is not None:
        context.load_cert_chain(*client)
    return context


def _get(port: int, trust: bytes, client: tuple[Path, Path] | None = None) -> Seen:
    """A new connection: GET /healthz (the client certificate is checked by the server after
    a TLS 1.3 handshake, so a refused one shows as an error on reading the answer)."""
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                             context=_context(trust, client))
    with contextlib.closing(connection):
        return _ask(connection)


def _ask(connection: http.client.HTTPSConnection) -> Seen:
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    sock = connection.sock
    assert isinstance(sock, ssl.SSLSocket)
    serving = sock.getpeercert(binary_form=True)
    assert serving is not None
    return Seen(serving, response.status)


def _refused(port: int, trust: bytes, client: tuple[Path, Path]) -> None:
    """A new connection with `client` fails (the test fails if it does not)."""
    try:
        seen = _get(port, trust, client)
    except (ssl.SSLError, ConnectionError):
        return
    raise AssertionError(f"a client certificate of another CA was accepted: {seen.status}")


async def test_a_new_ca_and_pair_are_served_to_new_connections(tmp_path: Path) -> None:
    files = Files(tmp_path)
    old, new = Issued.make("old"), Issued.make("new")
    files.write(old)
    old_client, new_client = files.client(old, "old-client"), files.client(new, "new-client")
    async with _serving(tmp_path, files) as server:
        assert server.reloader is not None
        assert server.reloader.paths() == [files.cert, files.key, files.ca]
        port = server.port
        assert await asyncio.to_thread(_get, port, old.ca, old_client) == Seen(
            old.serving_der, 200)
        # A connection open across the reload keeps its serving certificate; its client's
        # certificate is verified again at each request, against the CA served then, as the
        # kubelet's x509 authenticator does: of a CA no longer in the file, it is refused.
        kept = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                           context=_context(old.ca, old_client))
        with contextlib.closing(kept):
            assert await asyncio.to_thread(_ask, kept) == Seen(old.serving_der, 200)
            files.write(new)
            seen = await eventually(
                lambda: asyncio.to_thread(_get, port, new.ca, new_client), within=30,
                what="the new pair served, a client of the new CA accepted",
                until=lambda s: s == Seen(new.serving_der, 200),
                ignoring=(ssl.SSLError, ConnectionError))
            assert seen.status == 200
            assert await asyncio.to_thread(_ask, kept) == Seen(old.serving_der, 401)
        # The CA set is replaced, not added to: the old CA's client fails its handshake.
        front = server.front
        assert front is not None
        failed = front.counters.handshakes_failed
        await asyncio.to_thread(_refused, port, new.ca, old_client)
        await eventually(lambda: front.counters.handshakes_failed, within=10,
                         until=lambda n: n == failed + 1, what="the handshake refused")
        assert (await asyncio.to_thread(_get, port, new.ca)).status == 401  # no credentials
        # Once or twice: a check may fall between the CA's write and the pair's.
        assert server.reloader.reloads in (1, 2) and server.reloader.failure is None


async def test_a_pair_that_does_not_load_leaves_the_old_one_served(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The certificate written before its key (the two do not match meanwhile): the old pair
    stays, the failure is logged once and tried again at each check until the key arrives.
    The client CA, changed meanwhile, is taken on its own (upstream reloads them apart)."""
    files = Files(tmp_path)
    old, new = Issued.make("old"), Issued.make("new")
    files.write(old)
    old_client, new_client = files.client(old, "old-client"), files.client(new, "new-client")
    caplog.set_level(logging.WARNING, logger="nodelet.adapters.servingtls")
    async with _serving(tmp_path, files) as server:
        reloader, port = server.reloader, server.port
        assert reloader is not None
        kept = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                           context=_context(old.ca, old_client))
        with contextlib.closing(kept):
            assert await asyncio.to_thread(_ask, kept) == Seen(old.serving_der, 200)
            # Renamed into place (no check sees them half-written: the only failure is the
            # mismatch); both CAs trusted while the clients move over.
            _replace(files.ca, old.ca + new.ca)
            _replace(files.cert, new.cert)
            await eventually(lambda: reloader.failure, within=30, what="the mismatch seen")
            assert reloader.failure is not None and "mismatch" in reloader.failure.lower()
            seen = await eventually(
                lambda: asyncio.to_thread(_get, port, old.ca, new_client), within=30,
                what="a client of the new CA accepted", until=lambda s: s.status == 200,
                ignoring=(ssl.SSLError, ConnectionError))
            assert seen.serving == old.serving_der
            # Its CA still in the file: the open connection's client is still accepted.
            assert await asyncio.to_thread(_ask, kept) == Seen(old.serving_der, 200)
        checks = reloader.checks
        await eventually(lambda: reloader.checks, until=lambda n: n >= checks + 3, within=30,
                         what="three more checks")
        assert (await asyncio.to_thread(_get, port, old.ca)).serving == old.serving_der
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert str(files.cert) in warnings[0].getMessage()
        files.key.write_bytes(new.key)
        await eventually(lambda: asyncio.to_thread(_get, port, new.ca), within=30,
                         what="the new pair served once its key is written",
                         until=lambda s: s.serving == new.serving_der,
                         ignoring=(ssl.SSLError, ConnectionError))
        assert (reloader.reloads, reloader.failure) == (2, None)  # the CA, then the pair


async def test_with_the_serving_gate_off_only_the_client_ca_is_reloaded(tmp_path: Path) -> None:
    """ReloadKubeletServerCertificateFile=false: the pair read at start is served, whatever
    the files hold later; the client CA (its own gate on) is still read again."""
    files = Files(tmp_path)
    old, new = Issued.make("old"), Issued.make("new")
    files.write(old)
    new_client = files.client(new, "new-client")
    async with _serving(tmp_path, files, "ReloadKubeletServerCertificateFile=false") as server:
        reloader = server.reloader
        assert reloader is not None and reloader.paths() == [files.ca]
        files.write(new)
        seen = await eventually(
            lambda: asyncio.to_thread(_get, server.port, old.ca, new_client), within=30,
            what="a client of the new CA accepted", until=lambda s: s.status == 200,
            ignoring=(ssl.SSLError, ConnectionError))
        assert seen.serving == old.serving_der
        # The CA may have been read before the pair's files were written: two more checks,
        # each after the writes, and the pair read at start is still the one served.
        checks = reloader.checks
        await eventually(lambda: reloader.checks, until=lambda n: n >= checks + 2, within=30,
                         what="two more checks")
        assert (await asyncio.to_thread(_get, server.port, old.ca, new_client)) == Seen(
            old.serving_der, 200)
        assert reloader.reloads == 1


async def test_a_client_certificate_for_server_use_passes_the_handshake_not_the_request(
        tmp_path: Path) -> None:
    """A certificate of the client CA whose extended key usage is serverAuth only (the node
    e2e suite's client CA spec connects with such a one): the kubelet's Go server takes it in
    the handshake and its x509 authenticator refuses the request for want of clientAuth; so
    here: the handshake succeeds, the server's certificate is seen, the request gets 401."""
    files = Files(tmp_path)
    issued = Issued.make("ca")
    files.write(issued)
    ca_key = serialization.load_pem_private_key(issued.ca_key, None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_name = x509.load_pem_x509_certificate(issued.ca).subject
    key = ec.generate_private_key(ec.SECP256R1())
    serving_only = _leaf(ca_name, key, "server-only", ExtendedKeyUsageOID.SERVER_AUTH).sign(
        ca_key, hashes.SHA256())
    cert, key_file = tmp_path / "server-only.crt", tmp_path / "server-only.key"
    cert.write_bytes(_pem(serving_only))
    key_file.write_bytes(_key_pem(key))
    async with _serving(tmp_path, files) as server:
        assert await asyncio.to_thread(_get, server.port, issued.ca, (cert, key_file)) == Seen(
            issued.serving_der, 401)
        assert await asyncio.to_thread(
            _get, server.port, issued.ca, files.client(issued, "client")) == Seen(
            issued.serving_der, 200)


async def test_an_expired_client_certificate_is_refused_on_an_open_connection(
        tmp_path: Path) -> None:
    """The kubelet verifies the client certificate at every request, its dates too: one that
    expires while its connection is open is refused there (401), with nothing reloaded."""
    files = Files(tmp_path)
    issued = Issued.make("ca", client_for=datetime.timedelta(seconds=5))
    files.write(issued)
    client = files.client(issued, "brief-client")
    async with _serving(tmp_path, files) as server:
        kept = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=10,
                                           context=_context(issued.ca, client))
        with contextlib.closing(kept):
            assert (await asyncio.to_thread(_ask, kept)).status == 200
            await eventually(lambda: asyncio.to_thread(_ask, kept), within=30,
                             what="the expired certificate refused on its connection",
                             until=lambda s: s.status == 401)
        assert server.reloader is not None and server.reloader.reloads == 0


async def test_a_client_of_an_intermediate_ca_is_verified_again_at_each_request(
        tmp_path: Path) -> None:
    """A client certificate signed by an intermediate CA that the client sends along (the
    file holds the root only): accepted at each request while the root is in the file,
    refused on its open connection once the file holds another CA."""
    files = Files(tmp_path)
    issued, other = Issued.make("root"), Issued.make("other")
    files.write(issued)
    root_key = serialization.load_pem_private_key(issued.ca_key, None)
    assert isinstance(root_key, ec.EllipticCurvePrivateKey)
    root_name = x509.load_pem_x509_certificate(issued.ca).subject
    middle_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    middle_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "intermediate")])
    middle = _builder(middle_name, root_name, middle_key).add_extension(
        x509.BasicConstraints(ca=True, path_length=0), True).sign(root_key, hashes.SHA256())
    leaf = _leaf(middle_name, leaf_key, "bob", ExtendedKeyUsageOID.CLIENT_AUTH).sign(
        middle_key, hashes.SHA256())
    cert, key = tmp_path / "bob.crt", tmp_path / "bob.key"
    cert.write_bytes(_pem(leaf) + _pem(middle))
    key.write_bytes(_key_pem(leaf_key))
    async with _serving(tmp_path, files) as server:
        kept = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=10,
                                           context=_context(issued.ca, (cert, key)))
        with contextlib.closing(kept):
            assert await asyncio.to_thread(_ask, kept) == Seen(issued.serving_der, 200)
            assert await asyncio.to_thread(_ask, kept) == Seen(issued.serving_der, 200)
            files.ca.write_bytes(other.ca)
            await eventually(lambda: asyncio.to_thread(_ask, kept), within=30,
                             what="the client refused once its root is out of the file",
                             until=lambda s: s.status == 401)


def test_a_rewrite_a_stat_cannot_see_is_read_at_the_periodic_resync(tmp_path: Path) -> None:
    """Same inode, same size, the mtime put back (as a rewrite within the filesystem's time
    granularity leaves it): no check sees it by its stat, the resync (about every minute, as
    upstream's) reads it. A period of 30 s makes the resync every second check."""
    files = Files(tmp_path)
    one, two = Issued.make("one"), Issued.make("two")
    files.write(one)
    files.ca.write_bytes(one.ca + two.ca)
    tls = servingtls.TlsFiles(files.cert, files.key, files.ca)
    used: list[servingtls.Served] = []
    reloader = servingtls.Reloader(
        files=tls, served=servingtls.load(tls), use=used.append, period=30.0,
        watch=servingfiles.Watch(pair=True, client_ca=True))
    reloader.check()  # the first check reads the files: unchanged
    assert (reloader.reloads, used) == (0, [])
    before = files.ca.stat()
    files.ca.write_bytes(two.ca + one.ca)  # same size, other content
    os.utime(files.ca, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = files.ca.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns)
    reloader.check()
    assert reloader.reloads == 0  # the stat says nothing changed
    reloader.check()
    assert reloader.reloads == 1 and used[0].content.client_ca == two.ca + one.ca


async def test_what_the_settings_have_reloaded(tmp_path: Path) -> None:
    """Both gates off: nothing watched. nodelet's own self-signed pair: never watched; a
    client CA file still is."""
    files = Files(tmp_path)
    files.write(Issued.make("old"))
    async with _serving(tmp_path, files, "ReloadKubeletServerCertificateFile=false,"
                                         "ReloadKubeletClientCAFile=false") as server:
        assert server.reloader is None
    self_signed = settings.Settings(
        data_dir=tmp_path / "data", node_name="n1",
        node_server=settings.NodeServerSettings(client_ca_file=files.ca))
    config = await asyncio.to_thread(nodeserving.server_config, self_signed)
    assert config.reload == servingfiles.Watch(pair=False, client_ca=True)
