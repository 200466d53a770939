"""Joining as a kubeadm node does, against a real control plane of its own whose signer issues
short certificates (`--cluster-signing-duration`): a bootstrap token, a CSR approved by the real
kube-controller-manager (kubeadm's auto-approval RBAC), the client certificate rotated with
renewals approved by the same controller, the node working past its first certificate's
expiry; a restart reuses the certificate; a CSR denied with the real kubectl fails the join.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio
from cryptography import x509

from conftest import Instance
from nodelet.adapters import kubeconfig
from nodelet.services.cluster import cluster
from support.clusterfixtures import joined
from support.controlplane import AdminClient, ControlPlane, conditions, node_path
from support.polling import eventually

pytestmark = pytest.mark.runtime

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
SIGNING = 30  # seconds: renewed at 70-90 %, so every 21-27 s


@pytest.fixture(scope="module")
def short_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    plane = ControlPlane.start(signing_duration=f"{SIGNING}s")
    yield plane
    plane.stop(keep=request.session.testsfailed > 0)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def short_admin(short_plane: ControlPlane) -> AsyncIterator[AdminClient]:
    async with short_plane.admin() as client:
        yield client


def _not_after(pem: bytes) -> datetime:
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc


async def test_join_by_bootstrap_token_and_rotate_past_the_first_expiry(
        short_plane: ControlPlane, short_admin: AdminClient, runtime: Instance) -> None:
    node = "join-node"
    async with joined(short_plane, short_admin, runtime, node=node) as harness:
        await eventually(lambda: short_admin.get(node_path(node)), within=30,
                         until=lambda n: conditions(n).get("Ready", {}).get("status") == "True",
                         what="the node Ready")
        pki = harness.settings.cluster.cert_dir  # type: ignore[union-attr]
        assert pki is not None
        current = pki / "kubelet-client-current.pem"
        first = _not_after(current.read_bytes())
        # The first CSR: sent with the bootstrap token, approved by csrapproving, issued by
        # the real signer for SIGNING seconds.
        issued = [c for c in await short_admin.items(CSRS)
                  if c["spec"]["username"].startswith("system:bootstrap:")]
        assert len(issued) == 1, issued
        spec, status = issued[0]["spec"], issued[0]["status"]
        assert spec["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
        assert spec["usages"] == ["digital signature", "client auth"]
        assert "system:bootstrappers" in spec["groups"]
        # Key and certificate in the store, the kubeconfig pointing at its -current link.
        assert current.is_symlink() and current.resolve().name.startswith("kubelet-client-2")
        assert stat.S_IMODE(os.stat(current).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(pki).st_mode) == 0o700
        config = kubeconfig.load(harness.root / "kubelet.conf")
        assert config.token is None and config.client_cert_pem is not None
        assert config.ca_pem == short_plane.ca.cert.read_bytes()
        assert [c["reason"] for c in status["conditions"]] == ["AutoApproved"]
        certs = harness.agent_or_fail().cluster
        assert certs is not None and certs.certificates is not None
        rotation = certs.certificates
        await eventually(lambda: rotation.rotations, within=3 * SIGNING, until=lambda n: n >= 2,
                         what="two rotations")

        async def renewed_after_expiry() -> str | None:
            lease = await short_admin.get(f"{LEASES}/{node}") or {}
            renew = lease.get("spec", {}).get("renewTime", "")
            if renew and datetime.fromisoformat(renew.replace("Z", "+00:00")) > first:
                return str(renew)
            return None

        await eventually(renewed_after_expiry, within=2 * SIGNING,
                         what="the Lease renewed after the first certificate expired")
        assert datetime.now(UTC) > first
        async def renewal_csrs() -> list[dict[str, Any]]:
            return [c for c in await short_admin.items(CSRS)
                    if c["spec"]["username"] == f"system:node:{node}"]

        # A renewal may be in flight (not approved yet) when listed: wait until each is.
        renewals = await eventually(
            renewal_csrs, within=SIGNING, what="the renewals, each approved",
            until=lambda cs: len(cs) >= 2 and all(c.get("status", {}).get("conditions")
                                                  for c in cs))
        # Renewed with its own certificate, each approved by kube-controller-manager.
        assert all(c["status"]["conditions"][0]["reason"] == "AutoApproved" for c in renewals)

        # A restart with a valid certificate sends no CSR.
        before = len(await short_admin.items(CSRS))
        await harness.stop(terminate_pods=False)
        await harness.start()
        assert rotation is not harness.agent_or_fail().cluster.certificates  # type: ignore[union-attr]
        restarted = harness.agent_or_fail().cluster
        assert restarted is not None and restarted.certificates is not None
        assert restarted.certificates.last_csr == ""
        assert len(await short_admin.items(CSRS)) - before <= 1  # at most a due renewal


async def test_a_denied_csr_fails_the_join_naming_it(
        short_plane: ControlPlane, short_admin: AdminClient, runtime: Instance) -> None:
    """Without kubeadm's auto-approval, an admin denies the CSR with the real kubectl."""
    binding = "clusterrolebinding/kubeadm:node-autoapprove-bootstrap"
    saved = short_plane.kubectl_sync("get", binding, "-o", "json")
    short_plane.kubectl_sync("delete", binding)
    node = "denied-node"
    try:
        async with joined(short_plane, short_admin, runtime, node=node, start=False) as harness:
            joining = asyncio.create_task(harness.start(), name="test-join")
            pending = await eventually(
                lambda: short_admin.items(CSRS), within=30,
                until=lambda cs: [c for c in cs if not c.get("status", {}).get("conditions")],
                what="a pending CSR")
            name = next(c["metadata"]["name"] for c in pending
                        if not c.get("status", {}).get("conditions"))
            code, out, err = await short_plane.kubectl("certificate", "deny", name)
            assert code == 0 and f"{name} denied".encode() in out, err
            with pytest.raises(cluster.ClusterError,
                               match=f"certificate signing request {name} was denied"):
                await asyncio.wait_for(joining, 30)
            harness.agent = None  # its failed start stopped what it had started
            assert not (harness.root / "kubelet.conf").exists()
            assert await short_admin.get(node_path(node)) is None
    finally:
        short_plane.kubectl_sync("apply", "-f", "-", stdin=saved)
