"""TLS bootstrap edge cases against the real kube-apiserver and kube-controller-manager's CSR
approver (the join itself, a rotation past the first expiry and a denied CSR are in
test_cluster_join.py): a CSR POST answered 503 is sent again with a back-off; a restart with a
valid certificate sends no CSR, one with an expired or broken pair bootstraps again; a
certificate the signer issued for another key fails the bootstrap clearly, and rotation lives
through it.

For the last two the test is the signer: a control plane of the module's own runs without
kube-controller-manager's signing controller, and `Signer` writes each approved CSR's
certificate through the `status` subresource as a signer does (kube-apiserver validates what
it writes: a certificate that is no PEM X.509 certificate cannot be written at all, so a node
never gets one; the store's own check of it is in tests/agent/test_private_files.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from nodelet.adapters import certs, kube, kubeconfig
from nodelet.services.cluster import certificates, cluster
from support.clusterfixtures import Rig
from support.controlplane import (
    CONTROLLERS,
    AdminClient,
    Authority,
    ControlPlane,
    Pair,
    node_path,
)
from support.faultproxy import FaultProxy
from support.polling import eventually

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
FAST = {"csr_timeout": 20.0, "csr_retry": 0.05, "csr_retry_max": 0.5}


def csrs_posted(proxy: FaultProxy) -> int:
    """The CSRs the node created (kube-apiserver answered 201)."""
    return proxy.count(method="POST", path="/certificatesigningrequests$", status=201)


async def test_csr_is_sent_again_while_the_api_server_cannot_take_it(
        make_rig: Any, proxied: FaultProxy, admin: AdminClient) -> None:
    """A node that starts before its control plane answers keeps trying, with a back-off,
    instead of failing its start."""
    refused = proxied.inject(method="POST", path="/certificatesigningrequests$", status=503,
                             times=3)
    async with make_rig(rotate_certificates=False, **FAST) as rig:
        assert rig.mode.certificates is not None and rig.mode.certificates.last_csr
    assert refused.hits == 3  # all three refusals were met
    assert csrs_posted(proxied) == 1
    assert await admin.get(node_path(rig.node)) is not None


async def test_valid_kubeconfig_is_used_without_a_new_csr(
        make_rig: Any, proxied: FaultProxy, tmp_path: Path) -> None:
    """A restart: the written kubeconfig still holds a valid certificate, so no CSR is sent;
    one whose certificate expired is replaced by bootstrapping again."""
    async with make_rig(rotate_certificates=False, **FAST):
        pass
    assert csrs_posted(proxied) == 1
    async with make_rig(rotate_certificates=False, **FAST) as rig:
        assert rig.mode.certificates is not None and rig.mode.certificates.last_csr == ""
    assert csrs_posted(proxied) == 1
    # Two days later (the signer's certificates last a day): the kubeconfig's and the
    # store's certificate are expired, so the node bootstraps again.
    later = certificates.ClientCertificates(
        settings=_settings(tmp_path / "node"), node_name=rig.node,
        client_settings=kube.ClientSettings(),
        clock=lambda: datetime.now(UTC) + timedelta(days=2))
    await later.bootstrap()
    assert later.last_csr and csrs_posted(proxied) == 2


def _settings(root: Path) -> cluster.ClusterSettings:
    return cluster.ClusterSettings(
        kubeconfig=root / "kubelet.conf", cert_dir=root / "pki",
        bootstrap_kubeconfig=root / "bootstrap.conf", csr_timeout=20.0)


async def test_a_restart_with_a_broken_pair_bootstraps_again(
        make_rig: Any, proxied: FaultProxy, tmp_path: Path) -> None:
    """A stored certificate that is valid but does not match its key (or is no certificate)
    is not reused: a new CSR replaces it."""
    async with make_rig(rotate_certificates=False, **FAST) as rig:
        pass
    root = tmp_path / "node"
    current = root / "pki" / "kubelet-client-current.pem"
    cert, _ = certs.split_pem(current.read_bytes())
    for broken in (cert + certs.new_key(), b"not a pem file\n"):
        current.resolve().write_bytes(broken)
        again = certificates.ClientCertificates(
            settings=_settings(root), node_name=rig.node,
            client_settings=kube.ClientSettings(), clock=lambda: datetime.now(UTC))
        await again.bootstrap()
        assert again.last_csr
        certs.check_pair(*certs.split_pem(current.read_bytes()))
    assert csrs_posted(proxied) == 3


def test_csr_verdicts_name_the_request() -> None:
    base = {"metadata": {"name": "csr-x"}}
    assert certificates._issued({**base, "status": {}}) is None
    pem = b"-----BEGIN CERTIFICATE-----\n"
    issued = {**base, "status": {"certificate": base64.b64encode(pem).decode(), "conditions": [
        {"type": "Approved", "status": "True"}]}}
    assert certificates._issued(issued) == pem
    failed = {**base, "status": {"conditions": [
        {"type": "Approved", "status": "True"},
        {"type": "Failed", "status": "True", "reason": "SignerValidationFailure",
         "message": "bad usages"}]}}
    with pytest.raises(certificates.CertificateError,
                       match="csr-x failed: SignerValidationFailure bad usages"):
        certificates._issued(failed)


def test_cli_flags_map_onto_the_cluster_settings(tmp_path: Path) -> None:
    from nodelet import cli, settings

    args = cli.build_parser().parse_args([
        "run", "--data-dir", str(tmp_path), "--kubeconfig", str(tmp_path / "kubelet.conf"),
        "--bootstrap-kubeconfig", str(tmp_path / "bootstrap.conf")])
    s = cli.settings_from_args(args).cluster
    assert s is not None and s.bootstrap_kubeconfig == tmp_path / "bootstrap.conf"
    assert s.cert_dir == tmp_path / "pki" and s.rotate_certificates  # the data dir's, renewed
    args = cli.build_parser().parse_args(["run", "--bootstrap-kubeconfig", "b.conf"])
    with pytest.raises(settings.SettingsError, match="needs --kubeconfig"):
        cli.settings_from_args(args)


# -- the test as the signer: a certificate for another key -------------------------------------


class Signer:
    """Signs each approved CSR of `plane` with its CA for `seconds`, as
    kube-controller-manager's signer would (PUT of the CSR's `status`); `faulty`: what to
    issue instead for the next CSRs ("mismatched": a certificate for another key)."""

    def __init__(self, plane: ControlPlane, admin: AdminClient) -> None:
        self.admin = admin
        self.ca_cert = x509.load_pem_x509_certificate(plane.ca.cert.read_bytes())
        key = serialization.load_pem_private_key(plane.ca.key.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        self.ca_key = key
        self.seconds = 3600.0
        self.faulty: list[str] = []
        self.signed: list[str] = []

    def certificate(self, request_pem: bytes, *, mismatched: bool) -> bytes:
        request = x509.load_pem_x509_csr(request_pem)
        public = ec.generate_private_key(ec.SECP256R1()).public_key() if mismatched else \
            request.public_key()
        now = datetime.now(UTC)
        cert = (x509.CertificateBuilder().subject_name(request.subject)
                .issuer_name(self.ca_cert.subject).public_key(public)  # type: ignore[arg-type]
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(seconds=5))
                .not_valid_after(now + dt.timedelta(seconds=self.seconds))
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .sign(self.ca_key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM)

    async def write(self, csr: dict[str, Any], certificate: bytes) -> dict[str, Any]:
        csr = dict(csr)
        csr["status"] = {**csr.get("status", {}),
                         "certificate": base64.b64encode(certificate).decode()}
        return await self.admin.client.request(
            "PUT", f"{CSRS}/{csr['metadata']['name']}/status", body=csr)

    async def run(self) -> None:
        while True:
            for csr in await self.admin.items(CSRS):
                status = csr.get("status", {})
                approved = any(c["type"] == "Approved" for c in status.get("conditions", []))
                if approved and not status.get("certificate"):
                    fault = self.faulty.pop(0) if self.faulty else ""
                    request = base64.b64decode(csr["spec"]["request"])
                    certificate = self.certificate(request, mismatched=fault == "mismatched")
                    # Noted before the write: the node may see the certificate (and the test
                    # look at `signed`) before the write's answer reaches this task.
                    self.signed.append(f"{csr['metadata']['name']} {fault or 'good'}")
                    await self.write(csr, certificate)
            await asyncio.sleep(0.05)  # the signer's own polling period


@pytest.fixture(scope="module")
def unsigned_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane whose kube-controller-manager approves CSRs but signs none."""
    plane = ControlPlane.start(controllers=[
        c for c in CONTROLLERS if c != "certificatesigningrequest-signing-controller"])
    failures = request.session.testsfailed
    yield plane
    plane.stop(keep=request.session.testsfailed > failures)


@pytest_asyncio.fixture(loop_scope="session")
async def signer(unsigned_plane: ControlPlane) -> AsyncIterator[Signer]:
    async with unsigned_plane.admin() as admin:
        running = Signer(unsigned_plane, admin)
        task = asyncio.get_running_loop().create_task(running.run(), name="test-signer")
        try:
            yield running
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest_asyncio.fixture(loop_scope="session")
async def unsigned_proxy(unsigned_plane: ControlPlane,
                         tmp_path: Path) -> AsyncIterator[FaultProxy]:
    current = tmp_path / "node" / "pki" / "kubelet-client-current.pem"
    (tmp_path / "node").mkdir()
    async with FaultProxy(unsigned_plane, tmp_path,
                          credentials=lambda: Pair(current, current)) as proxy:
        yield proxy


async def test_an_unusable_issued_certificate_fails_the_bootstrap_clearly(
        signer: Signer, unsigned_proxy: FaultProxy, tmp_path: Path) -> None:
    """As the kubelet's store (tls.X509KeyPair before Update): nothing is stored or written,
    and the error names the CSR and what is wrong with its certificate."""
    signer.faulty = ["mismatched"]
    rig = Rig(unsigned_proxy, tmp_path / "node", "unusable-node", rotate_certificates=False,
              **FAST)
    try:
        with pytest.raises(cluster.ClusterError) as caught:
            await asyncio.wait_for(rig.mode.start(), 30)
        assert isinstance(caught.value.__cause__, certificates.CertificateError)
        name = rig.mode.certificates.last_csr if rig.mode.certificates else ""
        assert f"certificate signing request {name}" in str(caught.value) and name
        assert "private key does not match public key" in str(caught.value)
        assert signer.signed == [f"{name} mismatched"]
        assert not (tmp_path / "node" / "kubelet.conf").exists()
        assert not (tmp_path / "node" / "pki" / "kubelet-client-current.pem").exists()
    finally:
        rig.checkpoint.close()


async def test_kube_apiserver_takes_no_garbage_as_a_certificate(signer: Signer) -> None:
    """Why no node meets one: the signer's write of bytes that are no certificate is
    refused."""
    key = ec.generate_private_key(ec.SECP256R1())
    request = (x509.CertificateSigningRequestBuilder()
               .subject_name(x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME,
                                                           "system:node:garbage")]))
               .sign(key, hashes.SHA256()))
    csr = await signer.admin.create(CSRS, {
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"generateName": "garbage-"},
        "spec": {"request": base64.b64encode(request.public_bytes(
            serialization.Encoding.PEM)).decode(),
            "signerName": "example.com/test", "usages": ["client auth"]}})
    try:
        with pytest.raises(kube.KubeError) as caught:
            await signer.write(csr, b"garbage")
        assert caught.value.status == 422, caught.value
        assert "status.certificate" in str(caught.value), caught.value
    finally:
        await signer.admin.delete(f"{CSRS}/{csr['metadata']['name']}")


async def test_rotation_survives_a_certificate_for_another_key_and_renews_later(
        signer: Signer, unsigned_proxy: FaultProxy, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A renewal that gets a certificate for another key is logged and retried; the loop
    lives on, the good pair stays in use, and the next good one is taken."""
    signer.seconds = 8.0  # renewed at 70-90 %
    rig = Rig(unsigned_proxy, tmp_path / "node", "rotating-node", **FAST)
    await rig.mode.start()
    try:
        certs_ = rig.mode.certificates
        assert certs_ is not None
        current = tmp_path / "node" / "pki" / "kubelet-client-current.pem"
        signer.faulty = ["mismatched"]
        with caplog.at_level(logging.WARNING):
            await eventually(lambda: certs_.rotations, within=30, until=lambda n: n >= 1,
                             what="a renewal after an unusable certificate")
        assert signer.faulty == []  # it was issued and refused
        assert [s.split()[1] for s in signer.signed] == ["good", "mismatched", "good"]
        assert "cert-rotation" in rig.mode._group.names
        cert, key = certs.split_pem(current.read_bytes())
        certs.check_pair(cert, key)  # what is stored is a usable pair
        refused = [r.getMessage() for r in caplog.records
                   if "cannot renew the client certificate" in r.getMessage()]
        assert any("private key does not match public key" in m for m in refused), refused
        await eventually(lambda: certs_.rotations, within=30, until=lambda n: n >= 2,
                         what="the next renewal")
    finally:
        await rig.mode.stop()
        rig.checkpoint.close()
        async with unsigned_proxy.plane.admin() as admin:
            await admin.delete(node_path("rotating-node"))


async def test_a_failed_renewal_is_retried_without_a_new_deadline(tmp_path: Path) -> None:
    """client-go retries rotateCerts with a back-off: the jittered deadline is drawn once per
    certificate, not again (later) after each failure."""
    (tmp_path / "ca").mkdir()
    pair = Authority(tmp_path / "ca", "ca").issue("n1", "system:node:n1", orgs=("system:nodes",))
    cert, key = pair.cert.read_bytes(), pair.key.read_bytes()
    draws: list[float] = []
    attempts: list[int] = []

    def rng() -> float:
        draws.append(0.5)
        return 0.5

    manager = certificates.ClientCertificates(
        settings=cluster.ClusterSettings(
            kubeconfig=tmp_path / "kubelet.conf", cert_dir=tmp_path / "pki",
            bootstrap_kubeconfig=tmp_path / "boot.conf", csr_retry=0.01, csr_retry_max=0.02),
        node_name="n1", client_settings=kube.ClientSettings(),
        clock=lambda: datetime.now(UTC) + timedelta(days=1), rng=rng)
    manager.store.write(cert, key)

    async def failing(_: Any) -> None:
        attempts.append(1)
        raise kube.Unavailable("the API server is down")

    manager._rotate = failing  # type: ignore[method-assign,assignment]

    async def rotated(_: kubeconfig.KubeConfig) -> None:
        raise AssertionError("not rotated")

    task = asyncio.create_task(manager.run(rotated), name="test-rotation")
    try:
        await eventually(lambda: len(attempts), within=10, until=lambda n: n >= 4,
                         what="four renewal attempts")
        assert len(draws) == 1, draws
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_a_certificate_that_is_not_base64_names_the_request() -> None:
    bad = {"metadata": {"name": "csr-y"}, "status": {"certificate": "!!not base64!!"}}
    with pytest.raises(certificates.CertificateError,
                       match=r"certificate signing request csr-y: status\.certificate is "
                             r"not base64"):
        certificates._issued(bad)
