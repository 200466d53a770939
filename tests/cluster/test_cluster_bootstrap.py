"""TLS bootstrap and client certificate rotation against the HTTPS test API server in
Node-authorizer mode: a node with only a bootstrap token gets its certificate by CSR once it is
approved (as `kubectl certificate approve` does), registers its Node with it, and keeps
renewing its Lease and patching its status across rotations of a short-lived certificate; a
denied CSR fails the join with an error naming it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import kubeauth
import kubepki
from kubeapi import ClusterRig, KubeApiServer
from nodelet.adapters import certs, kube, kubeconfig
from nodelet.services import certificates, cluster
from polling import eventually

TOKEN_ID, TOKEN_SECRET = "abcdef", "0123456789abcdef"
CSRS = "certificatesigningrequests"


@pytest_asyncio.fixture(loop_scope="session")
async def https() -> AsyncIterator[KubeApiServer]:
    """The test API server over HTTPS with its own CA, certificates lasting 3 s, and the
    Secret of bootstrap token abcdef.0123456789abcdef (as `kubeadm token create` makes)."""
    api = KubeApiServer(tls=True, bookmark_interval=0.2, cert_duration=3.0)
    await api.start()
    api.create("secrets", kubeauth.bootstrap_token_secret(TOKEN_ID, TOKEN_SECRET))
    yield api
    await api.stop()


def bootstrap_rig(server: KubeApiServer, root: Path, **overrides: Any) -> ClusterRig:
    """A node (n1) that has only the bootstrap kubeconfig; its kubeconfig is to be written."""
    root.mkdir(parents=True, exist_ok=True)
    boot = server.write_kubeconfig(root / "bootstrap-kubelet.conf",
                                   token=f"{TOKEN_ID}.{TOKEN_SECRET}")
    return ClusterRig(server, root, kubeconfig=root / "kubelet.conf", bootstrap_kubeconfig=boot,
                      cert_dir=root / "pki", csr_timeout=20.0, csr_retry=0.05,
                      csr_retry_max=0.5, **overrides)


async def decide(server: KubeApiServer, admin: Path, verdict: str) -> dict[str, Any]:
    """Wait for the node's pending CSR and approve or deny it with the real
    `kubectl certificate approve|deny` as the cluster admin (a PUT of the CSR with the condition
    added to its `approval` subresource, in protobuf), run without blocking the event loop."""
    def pending() -> dict[str, Any] | None:
        return next((c for c in server.list_objects(CSRS) if not c.get("status")), None)

    name = (await eventually(pending, within=10, what="a CSR from the node"))["metadata"]["name"]
    command = "approve" if verdict == "Approved" else "deny"
    kubectl = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(admin), "certificate", command, name,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(kubectl.communicate(), 30)
    assert kubectl.returncode == 0, out.decode()
    assert f"{name} {command.replace('deny', 'denie')}d" in out.decode()
    return server.get(CSRS, "", name) or {}


def admin_kubeconfig(server: KubeApiServer, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return server.write_kubeconfig(root / "admin.conf", admin=True)


async def test_bootstrapped_node_joins_and_keeps_working_across_rotations(
        https: KubeApiServer, tmp_path: Path) -> None:
    server = https
    rig = bootstrap_rig(server, tmp_path / "node")
    admin = admin_kubeconfig(server, tmp_path)
    try:
        joining = asyncio.create_task(rig.mode.start(), name="test-join")
        csr = await decide(server, admin, "Approved")
        await asyncio.wait_for(joining, 20)
        server.auto_approve = True  # later CSRs: kube-controller-manager's csrapproving
        # The CSR, as the kubelet sends it and the API server completes it.
        spec = csr["spec"]
        assert spec["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
        assert spec["usages"] == ["digital signature", "client auth"]
        assert spec["username"] == f"system:bootstrap:{TOKEN_ID}"
        assert "system:bootstrappers" in spec["groups"]
        # Key and certificate in the store, the kubeconfig pointing at its -current link.
        current = tmp_path / "node" / "pki" / "kubelet-client-current.pem"
        assert current.is_symlink() and current.resolve().name.startswith("kubelet-client-2")
        assert stat.S_IMODE(os.stat(current).st_mode) == 0o600
        config = kubeconfig.load(tmp_path / "node" / "kubelet.conf")
        assert config.token is None and config.client_cert_pem is not None
        assert config.ca_pem == server.authority.ca_pem  # type: ignore[union-attr]
        first = certs.validity(config.client_cert_pem)
        # The node registered itself with its certificate.
        assert server.get("nodes", "", "n1") is not None
        # Rotations (3 s certificates, renewed at 70-90 %): the Lease is renewed and the node
        # status sent after the first certificate expired, so with a rotated one (the
        # server refuses an expired certificate, also on an open connection).
        await eventually(lambda: rig.mode.certificates and rig.mode.certificates.rotations,
                         within=20, until=lambda n: n >= 2, what="two rotations")

        def renewed_after_expiry() -> str | None:
            lease = server.get("leases", "kube-node-lease", "n1") or {}
            renew = lease.get("spec", {}).get("renewTime", "")
            if renew and datetime.fromisoformat(renew.replace("Z", "+00:00")) > \
                    first.not_after:
                return renew
            return None

        await eventually(renewed_after_expiry, within=20,
                         what="the Lease renewed after the first certificate expired")
        patched = server.count(verb="patch", resource="nodes", subresource="status")
        rig.runtime.network_ready = False  # a node status change to send
        await eventually(lambda: server.get("nodes", "", "n1"), within=10,
                         until=lambda n: _ready(n) == "False",
                         what="the node status patched with a rotated certificate")
        assert server.count(verb="patch", resource="nodes", subresource="status") > patched
        assert datetime.now(UTC) > first.not_after
        issued = [c for c in server.list_objects(CSRS) if c.get("status", {}).get("certificate")]
        users = sorted(c["spec"]["username"] for c in issued)
        assert users.count(f"system:bootstrap:{TOKEN_ID}") == 1  # renewed with its own cert
        assert users.count("system:node:n1") == len(users) - 1 >= 2
    finally:
        await rig.__aexit__()


def _ready(node: dict[str, Any] | None) -> str:
    conds = (node or {}).get("status", {}).get("conditions", [])
    return next((c["status"] for c in conds if c["type"] == "Ready"), "")


async def test_denied_csr_fails_the_join_naming_it(https: KubeApiServer, tmp_path: Path) -> None:
    rig = bootstrap_rig(https, tmp_path / "node")
    admin = admin_kubeconfig(https, tmp_path)
    try:
        joining = asyncio.create_task(rig.mode.start(), name="test-join")
        csr = await decide(https, admin, "Denied")
        name = csr["metadata"]["name"]
        with pytest.raises(cluster.ClusterError,
                           match=f"certificate signing request {name} was denied: KubectlDeny"):
            await asyncio.wait_for(joining, 20)
        assert not (tmp_path / "node" / "kubelet.conf").exists()
        assert https.get("nodes", "", "n1") is None
    finally:
        rig.checkpoint.close()


async def test_csr_is_sent_again_while_the_api_server_cannot_take_it(
        https: KubeApiServer, tmp_path: Path) -> None:
    """A node that starts before its control plane answers keeps trying, with a back-off,
    instead of failing its start."""
    https.cert_duration = 3600.0
    https.auto_approve = True
    refused = https.inject(method="POST", path=f"/{CSRS}$", status=503, times=3)
    async with bootstrap_rig(https, tmp_path / "a", rotate_certificates=False) as rig:
        assert rig.mode.certificates is not None and rig.mode.certificates.last_csr
    assert refused.hits == 3  # all three refusals were met
    assert len(https.list_objects(CSRS)) == 1
    assert https.get("nodes", "", "n1") is not None


async def test_valid_kubeconfig_is_used_without_a_new_csr(
        https: KubeApiServer, tmp_path: Path) -> None:
    """A restart: the written kubeconfig still holds a valid certificate, so no CSR is sent;
    one whose certificate expired is replaced by bootstrapping again."""
    https.cert_duration = 3600.0
    https.auto_approve = True
    async with bootstrap_rig(https, tmp_path / "a", rotate_certificates=False):
        pass
    assert len(https.list_objects(CSRS)) == 1
    async with bootstrap_rig(https, tmp_path / "a", rotate_certificates=False) as rig:
        assert rig.mode.certificates is not None and rig.mode.certificates.last_csr == ""
    assert len(https.list_objects(CSRS)) == 1
    # A day later (the certificate lasted an hour): the kubeconfig's and the store's
    # certificate are expired, so the node bootstraps again.
    root = tmp_path / "a"
    later = certificates.ClientCertificates(
        settings=cluster.ClusterSettings(
            kubeconfig=root / "kubelet.conf", cert_dir=root / "pki",
            bootstrap_kubeconfig=root / "bootstrap-kubelet.conf", csr_timeout=10.0),
        node_name="n1", client_settings=kube.ClientSettings(),
        clock=lambda: datetime.now(UTC) + timedelta(days=1))
    await later.bootstrap()
    assert later.last_csr and len(https.list_objects(CSRS)) == 2


async def test_a_restart_with_a_broken_pair_bootstraps_again(
        https: KubeApiServer, tmp_path: Path) -> None:
    """A stored certificate that is valid but does not match its key (or is no certificate)
    is not reused: a new CSR replaces it."""
    https.cert_duration = 3600.0
    https.auto_approve = True
    async with bootstrap_rig(https, tmp_path / "a", rotate_certificates=False):
        pass
    root = tmp_path / "a"
    current = root / "pki" / "kubelet-client-current.pem"
    cert, _ = certs.split_pem(current.read_bytes())
    for broken in (cert + certs.new_key(), b"not a pem file\n"):
        current.resolve().write_bytes(broken)
        again = certificates.ClientCertificates(
            settings=cluster.ClusterSettings(
                kubeconfig=root / "kubelet.conf", cert_dir=root / "pki",
                bootstrap_kubeconfig=root / "bootstrap-kubelet.conf", csr_timeout=10.0),
            node_name="n1", client_settings=kube.ClientSettings(),
            clock=lambda: datetime.now(UTC))
        await again.bootstrap()
        assert again.last_csr
        certs.check_pair(*certs.split_pem(current.read_bytes()))
    assert len(https.list_objects(CSRS)) == 3


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


# -- unusable certificates (the signer's `faulty` knob) ----------------------------------------


@pytest.mark.parametrize(("fault", "message"), [
    ("garbage", "not a PEM X.509 certificate"),
    ("mismatched", "private key does not match public key"),
])
async def test_an_unusable_issued_certificate_fails_the_bootstrap_clearly(
        https: KubeApiServer, tmp_path: Path, fault: str, message: str) -> None:
    """As the kubelet's store (tls.X509KeyPair before Update): nothing is stored or written,
    and the error names the CSR and what is wrong with its certificate."""
    https.cert_duration = 3600.0
    https.auto_approve = True
    assert https.authority is not None
    https.authority.faulty = [fault]
    rig = bootstrap_rig(https, tmp_path / "node", rotate_certificates=False)
    try:
        with pytest.raises(cluster.ClusterError) as caught:
            await asyncio.wait_for(rig.mode.start(), 20)
        assert isinstance(caught.value.__cause__, certificates.CertificateError)
        name = rig.mode.certificates.last_csr if rig.mode.certificates else ""
        assert f"certificate signing request {name}" in str(caught.value) and name
        assert message in str(caught.value)
        assert not (tmp_path / "node" / "kubelet.conf").exists()
        assert not (tmp_path / "node" / "pki" / "kubelet-client-current.pem").exists()
    finally:
        rig.checkpoint.close()


async def test_rotation_survives_unusable_certificates_and_renews_later(
        https: KubeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Renewals that get garbage, then a certificate for another key, are logged and retried;
    the loop lives on, the good pair stays in use, and the next good one is taken."""
    https.auto_approve = True
    assert https.authority is not None
    async with bootstrap_rig(https, tmp_path / "node") as rig:
        certs_ = rig.mode.certificates
        assert certs_ is not None
        current = tmp_path / "node" / "pki" / "kubelet-client-current.pem"
        https.authority.faulty = ["garbage", "mismatched"]
        await eventually(lambda: certs_.rotations, within=20, until=lambda n: n >= 1,
                         what="a renewal after two unusable certificates")
        assert https.authority.faulty == []  # both were issued and refused
        assert "cert-rotation" in rig.mode._group.names
        cert, key = certs.split_pem(current.read_bytes())
        certs.check_pair(cert, key)  # what is stored is a usable pair
        refused = [r.getMessage() for r in caplog.records
                   if "cannot renew the client certificate" in r.getMessage()]
        assert any("not a PEM X.509 certificate" in m for m in refused), refused
        assert any("private key does not match public key" in m for m in refused), refused
        await eventually(lambda: certs_.rotations, within=20, until=lambda n: n >= 2,
                         what="the next renewal")


async def test_a_failed_renewal_is_retried_without_a_new_deadline(tmp_path: Path) -> None:
    """client-go retries rotateCerts with a back-off: the jittered deadline is drawn once per
    certificate, not again (later) after each failure."""
    authority = kubepki.Authority.create()
    cert, key = authority.client_pem("system:node:n1", ("system:nodes",))
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
