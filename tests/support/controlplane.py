"""A real Kubernetes control plane for the cluster tests, from the binaries `make kube` built.

    plane = ControlPlane.start()          # PKI, etcd, kube-apiserver, controller-manager, scheduler
    plane.bootstrap_kubeconfig(path)      # what a kubeadm node gets to join with
    await plane.kubectl("get", "nodes")   # the real kubectl of the same release, as the admin
    async with plane.admin() as api: ...  # an admin client for polling state (AdminClient)
    plane.stop()                          # by PID; the directory goes unless kept

Everything is explicit: the PKI is made at start (one CA for the cluster, one for the front
proxy), etcd and every component listen on loopback ports picked free at start, each has its
own log file under `<root>/logs`, and each is stopped by its PID. `stop(keep=True)` leaves the
logs (and only them) for a failed run to read.

What runs is what kubeadm sets up, minus what one host does not need: kube-apiserver with
`--authorization-mode=Node,RBAC`, NodeRestriction besides the default admission plugins
(ServiceAccount adds the `kube-api-access-*` volume), bootstrap tokens, a client certificate
for its connections to the nodes' servers, a service-account signing key and an audit log at
Metadata level (JSON lines, `audit_events()`); kube-controller-manager with the CSR signer
(`signing_duration`) and approver, service-account tokens, the root-CA publisher, namespace,
garbage-collector, node-lifecycle, deployment and replica-set controllers; kube-scheduler; and
kubeadm's RBAC for node bootstrap (`bootstrap.yaml` below: a bootstrap token in kube-system,
auto-approval of client CSRs from `system:bootstrappers`, of renewals from `system:nodes`).

On the node, next to nodelet, `ControlPlane.kube_proxy(node, cluster_cidrs)` runs kube-proxy of
the same build in iptables mode (`KubeProxy`: Service IPs, `kubernetes.default` above all, work
from pods); stopped by PID, its rules removed with `kube-proxy --cleanup`.

Run as a script it starts a control plane for a person (`make cluster`): see `main()`.

Exceptions: `ControlPlaneError` when a binary is missing (run `make kube`) or a component does
not come up (its log's tail is in the message).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

REPO = Path(__file__).resolve().parents[2]
VERSIONS = REPO / "kube" / "versions.env"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
# Outside nodelet's pod CIDRs (10.100.0.0-10.199.255.0, cni.default_pod_cidr); kubeadm's default.
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: the range's first address
# The node-lifecycle controller: how long a node may go without a Lease renewal or status
# before it is NotReady (Unknown) and tainted unreachable (kube-controller-manager's default is
# 50 s; the tests stop a node and wait for it), and how often it looks.
NODE_GRACE = "15s"
NODE_MONITOR = "1s"
# How long one component may take to answer after its start (measured: all in ~8 s on 2 cores).
START_WITHIN = 90.0
STOP_WITHIN = 15.0
# The controllers the tests rely on (kube-controller-manager --controllers), explicitly.
CONTROLLERS = (
    "certificatesigningrequest-signing-controller",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller", "serviceaccount-controller",
    "serviceaccount-token-controller", "root-ca-certificate-publisher-controller",
    "namespace-controller", "garbage-collector-controller", "node-lifecycle-controller",
    "taint-eviction-controller", "pod-garbage-collector-controller", "deployment-controller",
    "replicaset-controller", "endpoints-controller", "endpointslice-controller",
    "service-cidr-controller", "ttl-controller", "bootstrap-signer-controller",
    "token-cleaner-controller", "clusterrole-aggregation-controller", "job-controller",
    # Storage, as a kind cluster runs it: PVs bound to claims (and provisioned through a
    # StorageClass), the protection finalizers, generic ephemeral volumes' claims,
    # StatefulSets' claim templates, attachment for drivers that need it, expansion.
    "persistentvolume-binder-controller", "persistentvolume-attach-detach-controller",
    "persistentvolume-expander-controller", "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller", "ephemeral-volume-controller",
    "statefulset-controller",
    # DRA: the ResourceClaims of pods' templates made (and their reservations cleared).
    "resourceclaim-controller",
)
TOKEN_GROUP = "system:bootstrappers:nodelet:default-node-token"
# `make cluster`: where the default StorageClass's volumes go, under the cluster's directory.
LOCAL_PATH = "local-path"
# kube-proxy owns fixed chain names (KUBE-SERVICES...) in the host's network namespace: one may
# run per host at a time, whatever control plane it serves. Held (flock) while one runs; a
# second waits for it, up to PROXY_LOCK_WITHIN seconds.
PROXY_LOCK = Path("/run/lock/nodelet-tests-kube-proxy.lock")
PROXY_LOCK_WITHIN = 600.0



def stop_process(process: subprocess.Popen[bytes] | None, within: float) -> None:
    """SIGTERM, then SIGKILL after `within` s, by PID; nothing if it is gone already."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(within)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ControlPlaneError(Exception):
    """The control plane cannot start; the message says what to do or shows the log."""


def versions() -> dict[str, str]:
    """kube/versions.env as a dict (KUBE_VERSION, ETCD_VERSION)."""
    pairs = (line.split("=", 1) for line in VERSIONS.read_text().splitlines()
             if line and not line.startswith("#") and "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def bin_dir() -> Path:
    return REPO / "build" / "kube" / versions()["KUBE_VERSION"]


def binary(name: str) -> Path:
    """The built program `name`; ControlPlaneError naming `make kube` when it is missing."""
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        raise ControlPlaneError(
            f"{path} is missing: run `make kube` (builds Kubernetes {versions()['KUBE_VERSION']} "
            "and etcd from their Go modules, about 10 minutes the first time)")
    return path


def tool(name: str) -> Path:
    """A program built beside Kubernetes with a version of its own (kube/versions.env:
    METRICS_SERVER_VERSION for metrics-server), in build/kube/<name>-<version>/; a
    ControlPlaneError naming `make kube` when it is missing."""
    version = versions()[f"{name.upper().replace('-', '_')}_VERSION"]
    path = REPO / "build" / "kube" / f"{name}-{version}" / name
    if not os.access(path, os.X_OK):
        raise ControlPlaneError(f"{path} is missing: run `make kube` (builds {name} {version})")
    return path


# -- PKI -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _name(cn: str, orgs: Sequence[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class Authority:
    """A CA on disk (`<dir>/<name>.crt/.key`) that issues leaf pairs next to it."""

    def __init__(self, directory: Path, name: str) -> None:
        self.dir = directory
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(f"{name}-ca")
        self._cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False,
                                         False), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
        self.pair.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self._key, self.pair.key)

    @classmethod
    def load(cls, pair: Pair, directory: Path) -> Authority:
        """The CA of `pair` (its files), issuing into `directory`."""
        authority = cls.__new__(cls)
        authority.dir, authority.pair = directory, pair
        key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        authority._key = key
        authority._cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
        return authority

    def issue(self, name: str, cn: str, *, orgs: Sequence[str] = (), server: bool = False,
              hosts: Sequence[str] = ()) -> Pair:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder().subject_name(_name(cn, orgs))
            .issuer_name(self._cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = Pair(self.dir / f"{name}.crt", self.dir / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, pair.key)
        return pair


def kubeconfig_text(server: str, ca: Path, *, user: str, cert: Pair | None = None,
                    token: str | None = None) -> str:
    creds: dict[str, str] = {"token": token} if token else {
        "client-certificate": str(cert.cert), "client-key": str(cert.key)} if cert else {}
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "local",
        "clusters": [{"name": "local", "cluster": {"server": server,
                                                    "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
    }
    return json.dumps(doc, indent=2) + "\n"


def host_address() -> str:
    """The address nodelet reports as its node's InternalIP (the same function)."""
    from nodelet.adapters import host

    return host.host_ip()


# -- processes -------------------------------------------------------------------------------------


def free_ports(count: int, *, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free TCP ports on `host` (held together while picked)."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


@dataclass
class Component:
    name: str
    args: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_WITHIN s; by PID."""
        stop_process(self.process, STOP_WITHIN)


class KubeProxy:
    """kube-proxy for one node, in iptables mode, with the host-wide PROXY_LOCK held while it
    runs. `start()` waits until it has synced its rules (`/livez`: `/healthz` also wants the
    Node to exist; kube-proxy waits 30 s for it at start, so start it once the node
    registered); `stop()` stops it by
    PID, removes its rules and chains (`kube-proxy --cleanup`) and releases the lock."""

    def __init__(self, component: Component, healthz: int) -> None:
        self.component = component
        self.healthz = healthz
        self._lock: Any = None

    def start(self) -> None:
        self._lock = PROXY_LOCK.open("a")
        deadline = time.monotonic() + PROXY_LOCK_WITHIN
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self._lock.close()
                    raise ControlPlaneError(
                        f"another kube-proxy held {PROXY_LOCK} for {PROXY_LOCK_WITHIN:.0f}s"
                    ) from None
                time.sleep(0.5)
        try:
            self.component.start()
            self._wait_synced()
        except BaseException:
            self.stop()
            raise

    def _wait_synced(self) -> None:
        deadline = time.monotonic() + START_WITHIN
        url = f"http://127.0.0.1:{self.healthz}/livez"
        while time.monotonic() < deadline:
            if not self.component.alive():
                raise ControlPlaneError(f"kube-proxy exited:\n{self.component.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"kube-proxy not synced within {START_WITHIN}s:\n"
                                f"{self.component.tail()}")

    def stop(self) -> None:
        self.component.stop()
        if self._lock is None:
            return
        try:
            with self.component.log.open("ab") as out:
                subprocess.run([self.component.args[0], "--cleanup", "--v=1"],
                               stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                               timeout=60, check=False)
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


def kube_proxy_leftovers() -> list[str] | None:
    """kube-proxy's chains left in the host's iptables (nat and filter, both families), or None
    when another kube-proxy runs now (PROXY_LOCK held: its chains are its own)."""
    with PROXY_LOCK.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        try:
            chains = ("KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-SVC-",
                      "KUBE-SEP-", "KUBE-PROXY-FIREWALL", "KUBE-FORWARD", "KUBE-PROXY-CANARY")
            left = []
            for save in ("iptables-save", "ip6tables-save"):
                done = subprocess.run([save], capture_output=True, text=True, timeout=30,
                                      check=False)
                left += [f"{save}: {line}" for line in done.stdout.splitlines()
                         if line.startswith(":") and line[1:].startswith(chains)]
            return left
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""

BOOTSTRAP_RBAC = """\
# kubeadm's RBAC for node bootstrap (kubeadm init phase bootstrap-token), for any bootstrap token.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubeadm:kubelet-bootstrap"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:node-bootstrapper"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:bootstrappers"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubeadm:node-autoapprove-bootstrap"}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:bootstrappers"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubeadm:node-autoapprove-certificate-rotation"}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:nodes"}]
"""


def token_secret(token_id: str, token_secret_: str, *, ttl_hours: int = 24) -> str:
    expires = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=ttl_hours))
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Secret
        metadata: {{name: bootstrap-token-{token_id}, namespace: kube-system}}
        type: bootstrap.kubernetes.io/token
        stringData:
          token-id: "{token_id}"
          token-secret: "{token_secret_}"
          expiration: "{expires.strftime('%Y-%m-%dT%H:%M:%SZ')}"
          usage-bootstrap-authentication: "true"
          usage-bootstrap-signing: "true"
          auth-extra-groups: "{TOKEN_GROUP}"
        """)


@dataclass
class ControlPlane:
    root: Path
    server: str  # https://127.0.0.1:PORT
    ca: Pair
    admin_kubeconfig: Path
    kubelet_client: Pair  # the API server's client certificate towards the nodes
    audit_log: Path
    components: list[Component] = field(default_factory=list)
    token: str = ""  # the bootstrap token, <id>.<secret>

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    # -- start -----------------------------------------------------------------------------------

    @classmethod
    def start(cls, *, root: Path | None = None, signing_duration: str = "24h",
              extra_apiserver_args: Sequence[str] = (),
              controllers: Sequence[str] = CONTROLLERS) -> ControlPlane:
        """Start and wait until the API serves, the controllers have made the default
        ServiceAccount and CA ConfigMap, and the bootstrap RBAC and token exist.
        `controllers`: kube-controller-manager's (a test may leave one out and do its job)."""
        for name in BINARIES:
            binary(name)
        root = root or Path(tempfile.mkdtemp(prefix="nlcp-", dir="/tmp"))
        for sub in ("pki", "logs", "etcd", "conf"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "etcd").chmod(0o700)
        etcd_client, etcd_peer, kcm, sched = free_ports(4)
        # The API server on the host's address, not loopback: it is the endpoint of the
        # `kubernetes` Service, which pods reach (kube-apiserver refuses a loopback one).
        address = host_address()
        (api,) = free_ports(1, host=address)
        pki = root / "pki"
        ca = Authority(pki, "ca")
        proxy_ca = Authority(pki, "front-proxy-ca")
        server = f"https://{address}:{api}"
        plane = cls(root=root, server=server, ca=ca.pair,
                    admin_kubeconfig=root / "admin.conf",
                    kubelet_client=ca.issue("apiserver-kubelet-client",
                                            "kube-apiserver-kubelet-client",
                                            orgs=("system:masters",)),
                    audit_log=root / "logs" / "audit.log")
        conf = root / "conf"
        plane.admin_kubeconfig.write_text(kubeconfig_text(
            server, ca.pair.cert, user="kubernetes-admin",
            cert=ca.issue("admin", "kubernetes-admin", orgs=("system:masters",))))
        for user, file in (("system:kube-controller-manager", "controller-manager"),
                           ("system:kube-scheduler", "scheduler")):
            (conf / f"{file}.conf").write_text(kubeconfig_text(
                server, ca.pair.cert, user=user, cert=ca.issue(file, user)))
        sa_key = _key()
        _write_key(sa_key, pki / "sa.key")
        (pki / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        (conf / "audit-policy.yaml").write_text(AUDIT_POLICY)
        plane.components = [
            plane._etcd(etcd_client, etcd_peer),
            plane._apiserver(address, api, etcd_client, ca, proxy_ca, extra_apiserver_args),
            plane._controller_manager(kcm, signing_duration, controllers),
            plane._scheduler(sched),
        ]
        try:
            plane._start_all()
        except BaseException:
            plane.stop(keep=True)
            raise
        return plane

    def _component(self, name: str, args: list[str]) -> Component:
        return Component(name, [str(binary(name)), *args], self.logs / f"{name}.log")

    def _etcd(self, client: int, peer: int) -> Component:
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        return self._component("etcd", [
            "--name=default", f"--data-dir={self.root / 'etcd'}",
            f"--listen-client-urls={client_url}", f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}", "--initial-cluster-state=new",
            "--listen-metrics-urls=", "--log-level=warn",
            # A test cluster's data dies with it: no fsync (the disk is shared with the
            # tests' containerd; etcd's fsyncs made writes wait behind them).
            "--unsafe-no-fsync",
        ])

    def _apiserver(self, address: str, port: int, etcd: int, ca: Authority,
                   proxy_ca: Authority, extra: Sequence[str]) -> Component:
        pki = self.root / "pki"
        serving = ca.issue("apiserver", "kube-apiserver", server=True, hosts=(
            address, "127.0.0.1", "localhost", SERVICE_IP, "kubernetes", "kubernetes.default",
            "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
        proxy = proxy_ca.issue("front-proxy-client", "front-proxy-client")
        return self._component("kube-apiserver", [
            f"--bind-address={address}", f"--advertise-address={address}",
            f"--secure-port={port}", f"--etcd-servers=http://127.0.0.1:{etcd}",
            f"--tls-cert-file={serving.cert}", f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={ca.pair.cert}",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            "--enable-bootstrap-token-auth", "--allow-privileged=true", "--anonymous-auth=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Its connections to the nodes' servers (logs, exec, port-forward, stats). Not
            # --kubelet-certificate-authority: node serving certificates are self-signed (as
            # kubeadm's default, serverTLSBootstrap off).
            f"--kubelet-client-certificate={self.kubelet_client.cert}",
            f"--kubelet-client-key={self.kubelet_client.key}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            # The aggregation layer (metrics-server's APIService).
            f"--requestheader-client-ca-file={proxy_ca.pair.cert}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={proxy.cert}", f"--proxy-client-key-file={proxy.key}",
            "--enable-aggregator-routing=true",
            f"--audit-policy-file={self.root / 'conf' / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
            "--audit-log-maxsize=0", "--audit-log-mode=batch",
            "--audit-log-batch-max-wait=1s", "--audit-log-batch-buffer-size=10000",
            "--profiling=false", "--event-ttl=1h",
            *extra,
        ])

    def _controller_manager(self, port: int, signing_duration: str,
                            controllers: Sequence[str]) -> Component:
        pki, conf = self.root / "pki", self.root / "conf" / "controller-manager.conf"
        return self._component("kube-controller-manager", [
            f"--kubeconfig={conf}", f"--authentication-kubeconfig={conf}",
            f"--authorization-kubeconfig={conf}", "--bind-address=127.0.0.1",
            f"--secure-port={port}", "--leader-elect=false",
            f"--controllers={','.join(controllers)}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={self.ca.cert}",
            f"--cluster-signing-cert-file={self.ca.cert}",
            f"--cluster-signing-key-file={self.ca.key}",
            f"--cluster-signing-duration={signing_duration}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allocate-node-cidrs=false",
            f"--node-monitor-grace-period={NODE_GRACE}",
            f"--node-monitor-period={NODE_MONITOR}",
            "--profiling=false",
        ])

    def _scheduler(self, port: int) -> Component:
        conf = self.root / "conf" / "scheduler.conf"
        return self._component("kube-scheduler", [
            f"--kubeconfig={conf}", f"--authentication-kubeconfig={conf}",
            f"--authorization-kubeconfig={conf}", "--bind-address=127.0.0.1",
            f"--secure-port={port}", "--leader-elect=false", "--profiling=false",
        ])

    def _start_all(self) -> None:
        etcd, apiserver, *controllers = self.components
        etcd.start()
        apiserver.start()
        self._wait(apiserver, "/readyz")
        for component in controllers:
            component.start()
        self._seed()
        self._wait(self.components[2], "default ServiceAccount and kube-root-ca.crt",
                   check=self._controllers_ready)

    def _wait(self, component: Component, what: str, *,
              check: Any = None) -> None:
        check = check or (lambda: self._get(what) is not None)
        deadline = time.monotonic() + START_WITHIN
        while time.monotonic() < deadline:
            for c in self.components:
                if c.process is not None and not c.alive():
                    raise ControlPlaneError(f"{c.name} exited ({c.process.returncode}):\n"
                                            f"{c.tail()}")
            if check():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"{component.name}: {what} not ready within {START_WITHIN}s:\n"
                                f"{component.tail()}")

    def _controllers_ready(self) -> bool:
        return (self._get("/api/v1/namespaces/default/serviceaccounts/default") is not None
                and self._get("/api/v1/namespaces/default/configmaps/kube-root-ca.crt")
                is not None)

    def admin_ssl(self) -> ssl.SSLContext:
        """A client context of the cluster admin (its certificate, the cluster CA)."""
        context = ssl.create_default_context(cafile=str(self.ca.cert))
        admin = self.root / "pki" / "admin"
        context.load_cert_chain(f"{admin}.crt", f"{admin}.key")
        return context

    def _get(self, path: str) -> Any:
        """GET as the admin; the decoded answer, or None when it fails."""
        try:
            with urllib.request.urlopen(self.server + path, context=self.admin_ssl(),
                                        timeout=5) as answer:
                body = answer.read()
        except (urllib.error.URLError, OSError):
            return None
        try:
            return json.loads(body)
        except ValueError:
            return body.decode()

    def _seed(self) -> None:
        """The bootstrap RBAC and one bootstrap token (self.token)."""
        token_id, secret = secrets.token_hex(3), secrets.token_hex(8)
        self.token = f"{token_id}.{secret}"
        self.kubectl_sync("apply", "-f", "-", stdin=BOOTSTRAP_RBAC)
        self.kubectl_sync("apply", "-f", "-", stdin=token_secret(token_id, secret))

    # -- use ----------------------------------------------------------------------------------

    def bootstrap_kubeconfig(self, path: Path) -> Path:
        """A bootstrap kubeconfig with the plane's token (kubeadm's bootstrap-kubelet.conf)."""
        path.write_text(kubeconfig_text(self.server, self.ca.cert,
                                        user="tls-bootstrap-token-user", token=self.token))
        path.chmod(0o600)
        return path

    def kube_proxy(self, node: str, cluster_cidrs: Sequence[str]) -> KubeProxy:
        """kube-proxy (not started) for node `node` whose pods have `cluster_cidrs`, as the
        user `system:kube-proxy` (bound to system:node-proxier by default)."""
        conf = self.root / "conf" / f"kube-proxy-{node}.conf"
        pair = Authority.load(self.ca, self.root / "pki").issue(
            f"kube-proxy-{node}", "system:kube-proxy")
        conf.write_text(kubeconfig_text(self.server, self.ca.cert, user="system:kube-proxy",
                                        cert=pair))
        healthz, metrics = free_ports(2)
        return KubeProxy(self._component("kube-proxy", [
            f"--kubeconfig={conf}", "--proxy-mode=iptables", f"--hostname-override={node}",
            f"--cluster-cidr={','.join(cluster_cidrs)}",
            f"--healthz-bind-address=127.0.0.1:{healthz}",
            f"--metrics-bind-address=127.0.0.1:{metrics}",
            # Leave the host's conntrack sysctls and route_localnet as they are: NodePorts on
            # localhost are not needed here.
            "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
            "--conntrack-tcp-timeout-close-wait=0", "--iptables-localhost-nodeports=false",
            "--profiling=false",
        ]), healthz)

    def kubectl_args(self, *args: str) -> list[str]:
        return [str(binary("kubectl")), "--kubeconfig", str(self.admin_kubeconfig), *args]

    def kubectl_sync(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(self.kubectl_args(*args), input=stdin, capture_output=True,
                              text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    async def kubectl(self, *args: str, stdin: bytes | None = None,
                      env: dict[str, str] | None = None,
                      timeout: float = 60.0) -> tuple[int, bytes, bytes]:
        """kubectl as the admin, in a subprocess; (exit code, stdout, stderr)."""
        process = await asyncio.create_subprocess_exec(
            *self.kubectl_args(*args),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})})
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin), timeout)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert process.returncode is not None
        return process.returncode, out, err

    async def apply(self, manifest: str) -> None:
        code, _, err = await self.kubectl("apply", "-f", "-", stdin=manifest.encode())
        assert code == 0, err.decode()

    @contextlib.asynccontextmanager
    async def admin(self) -> AsyncIterator[AdminClient]:
        client = AdminClient(self)
        try:
            yield client
        finally:
            await client.close()

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log so far (JSON lines; batched: up to a second behind)."""
        if not self.audit_log.exists():
            return []
        events = []
        for line in self.audit_log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    # -- stop ----------------------------------------------------------------------------------

    def stop(self, *, keep: bool = False) -> None:
        """Stop every component by PID, newest first; remove the directory, or with `keep`
        everything but the logs (and the PKI and kubeconfigs, to read them with)."""
        for component in reversed(self.components):
            component.stop()
        if keep:
            shutil.rmtree(self.root / "etcd", ignore_errors=True)
        else:
            shutil.rmtree(self.root, ignore_errors=True)


class AdminClient:
    """The cluster admin's JSON API client (tests poll state with it; users use kubectl)."""

    def __init__(self, plane: ControlPlane) -> None:
        from nodelet.adapters import kube, kubeconfig

        self._kube = kube
        self.client = kube.KubeClient(kubeconfig.load(plane.admin_kubeconfig),
                                      user_agent="nodelet-tests-admin")

    async def close(self) -> None:
        await self.client.close()

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.client.request("GET", path)
        except self._kube.NotFound:
            return None

    async def items(self, path: str, **params: str) -> list[dict[str, Any]]:
        answer = await self.client.request("GET", path, params=params or None)
        return list(answer.get("items", []))

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.client.request("POST", path, body=obj)

    async def delete(self, path: str, **body: Any) -> None:
        with contextlib.suppress(self._kube.NotFound):
            await self.client.request("DELETE", path, body=body or None)

    async def patch(self, path: str, patch: dict[str, Any], *,
                    content_type: str = "application/merge-patch+json") -> dict[str, Any]:
        return await self.client.request("PATCH", path, body=patch, content_type=content_type)


BUSYBOX = "localhost/nodelet/busybox:latest"  # imported into the session's containerd


def pod(name: str, *, node: str, grace: int = 1, command: str = "sleep 1000000",
        scheduler: bool = True, **spec: Any) -> dict[str, Any]:
    """A busybox pod for node `node`: placed there by the real scheduler (a nodeSelector on
    its hostname label), or with `scheduler=False` bound by `spec.nodeName`."""
    placement: dict[str, Any] = (
        {"nodeSelector": {"kubernetes.io/hostname": node}} if scheduler else {"nodeName": node})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"test": "nodelet"}},
        "spec": {**placement, "terminationGracePeriodSeconds": grace,
                 "containers": [{"name": "main", "image": BUSYBOX,
                                 "imagePullPolicy": "IfNotPresent",
                                 "command": ["sh", "-c", command]}], **spec},
    }


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_path(namespace: str, name: str = "", sub: str = "") -> str:
    path = f"/api/v1/namespaces/{namespace}/pods"
    return path + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


def node_path(name: str = "") -> str:
    return "/api/v1/nodes" + (f"/{name}" if name else "")


def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj or {}).get("status", {}).get("conditions") or []}


def node_requests(events: list[dict[str, Any]], node: str,
                  namespace: str | None = None) -> list[dict[str, Any]]:
    """The audit events of requests made with node `node`'s credentials (in `namespace`)."""
    return [e for e in events if e.get("user", {}).get("username") == f"system:node:{node}"
            and (namespace is None or e.get("objectRef", {}).get("namespace") == namespace)]


# Answers a node gets in normal work: an object that is gone (404) or changed meanwhile (409).
EXPECTED_ERRORS = (404, 409)


# NodeRestriction checks a TokenRequest against kube-apiserver's own pod cache, which can lag
# behind the watch that told the node about a new pod: a refusal with these words is the
# server's race, not a request the node may not make (nodelet asks again within 0.1-1.5 s:
# ClusterSettings.lag_retry). Counted apart (`lagged`), never hidden.
CACHE_LAG = "node requested token bound to a pod scheduled on a different node"


def _errors(events: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    """The node's requests refused as a client's fault (4xx), but EXPECTED_ERRORS. (A 5xx is
    the server's; the one seen here is 504 "context canceled": the node stopped with a request
    in flight.)"""
    return [e for e in node_requests(events, node) if e.get("stage") == "ResponseComplete"
            and 400 <= e.get("responseStatus", {}).get("code", 0) < 500
            and e["responseStatus"]["code"] not in EXPECTED_ERRORS]


def _line(e: dict[str, Any]) -> str:
    return f"{e.get('requestReceivedTimestamp', '')} {e['responseStatus']['code']} " \
           f"{e['verb']} {e['requestURI']}: {e['responseStatus'].get('message', '')}"


# The Node authorizer's graph is fed by an informer too: a node that lists a Secret or
# ConfigMap of a pod just bound to it can be refused ("no relationship found") before the
# graph has the pod. Such a refusal counts as the server's lag only when the very same
# request of the node was allowed within GRAPH_LAG_WITHIN seconds after it (a retry, with
# nothing changed by the node); otherwise it is a refusal.
GRAPH_LAG = "no relationship found between node"
GRAPH_LAG_WITHIN = 5.0


def _when(e: dict[str, Any]) -> float:
    stamp = str(e.get("requestReceivedTimestamp", "")).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(stamp).timestamp() if stamp else 0.0


def _allowed_soon_after(e: dict[str, Any], events: list[dict[str, Any]]) -> bool:
    user, uri, when = e["user"]["username"], e["requestURI"], _when(e)
    return any(o.get("user", {}).get("username") == user and o.get("requestURI") == uri
               and o.get("stage") == "ResponseComplete"
               and o.get("responseStatus", {}).get("code", 0) < 400
               and 0 < _when(o) - when <= GRAPH_LAG_WITHIN for o in events)


def _lag(e: dict[str, Any], events: list[dict[str, Any]]) -> bool:
    message = e["responseStatus"].get("message", "")
    return CACHE_LAG in message or (GRAPH_LAG in message and _allowed_soon_after(e, events))


def lagged(events: list[dict[str, Any]], node: str) -> list[str]:
    """The node's requests refused because a cache of the server lagged (CACHE_LAG, GRAPH_LAG
    followed by the same request allowed)."""
    return [_line(e) for e in _errors(events, node) if _lag(e, events)]


def refused(events: list[dict[str, Any]], node: str) -> list[str]:
    """The node's requests that kube-apiserver refused: 4xx other than EXPECTED_ERRORS (403
    from the Node authorizer or NodeRestriction, 400, 422...), but the lag of its caches
    (`lagged`); one line each."""
    return [_line(e) for e in _errors(events, node) if not _lag(e, events)]


# -- a control plane for a person (make cluster) --------------------------------------------


def _nodelet(args: argparse.Namespace, plane: ControlPlane, bootstrap: Path) -> Component:
    """`nodelet run` joined to `plane` by TLS bootstrap, as a kubeadm node joins."""
    node = args.dir / "node"
    return Component("nodelet", [
        str(args.nodelet), "run", "--data-dir", str(node), "--node-name", args.node_name,
        "--kubeconfig", str(node / "kubelet.conf"), "--bootstrap-kubeconfig", str(bootstrap),
        "--client-ca-file", str(plane.ca.cert), "--manifests", str(args.dir / "manifests"),
        "--progress", "never",
    ], plane.logs / "nodelet.log")


def _reset(args: argparse.Namespace) -> None:
    """`nodelet reset` of the node's data dir: its pods, sandboxes, network and containerd."""
    subprocess.run([str(args.nodelet), "reset", "--data-dir", str(args.dir / "node")],
                   stdout=subprocess.DEVNULL, check=False, timeout=120)


def _pod_cidr(args: argparse.Namespace) -> str:
    """The node's pod range: nodelet's default for its data dir (no --pod-cidr given)."""
    from nodelet.adapters import cni

    return cni.default_pod_cidr(args.dir / "node")


def _local_path(args: argparse.Namespace, plane: ControlPlane) -> Path:
    """The default StorageClass `standard`, as kind's: local-path-provisioner (support/
    localpath.py) imported into the node's containerd, its volumes under <dir>/local-path
    (removed at the end, `_remove_volumes`); the directory."""
    sys.path.insert(0, str(REPO / "tests"))
    from nodelet import settings
    from nodelet.adapters import containerd
    from support import localpath

    volumes = args.dir / LOCAL_PATH
    ctr = containerd.find_programs(settings.RuntimeSettings()).ctr
    socket = containerd.ContainerdPaths.of(args.dir / "node").socket
    asyncio.run(localpath.deploy(plane, path=volumes, socket=socket, ctr=ctr))
    return volumes


def _remove_volumes(args: argparse.Namespace) -> None:
    """The provisioned volumes' directories: the node, and its pods, are gone (`_reset`)."""
    shutil.rmtree(args.dir / LOCAL_PATH, ignore_errors=True)


def _serve(plane: ControlPlane, node: Component | None,
           proxy: KubeProxy | None = None) -> list[str]:
    """Until SIGINT/SIGTERM or a component's exit; the names of components that exited."""
    stop = {"now": False}

    def on_signal(_signo: int, _frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    running = [*plane.components, *([node] if node else []),
               *([proxy.component] if proxy else [])]
    while not stop["now"] and all(c.alive() for c in running):
        time.sleep(0.5)
    return [] if stop["now"] else [c.name for c in running if not c.alive()]


def _node_ready(plane: ControlPlane, name: str) -> bool:
    node = plane._get(f"/api/v1/nodes/{name}")
    return isinstance(node, dict) and conditions(node).get("Ready", {}).get("status") == "True"


def _background(argv: Sequence[str], directory: Path) -> int:
    """Run main() detached (its output in <dir>/cluster.log) and return once it is ready."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory.parent / f"{directory.name}.log"
    with log.open("wb") as out:
        child = subprocess.Popen([sys.executable, __file__, *argv], stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 3 * START_WITHIN
    while not (directory / "ready").exists():
        if child.poll() is not None or time.monotonic() > deadline:
            print(log.read_text(errors="replace"), file=sys.stderr)
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
            return 1
        time.sleep(0.3)
    print(log.read_text(errors="replace"), end="")
    print(f"running in the background (pid {child.pid}, output in {log}); "
          "stop it with `make cluster-down`")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(
        "Start a local Kubernetes control plane from the binaries `make kube` built and, with "
        "--join, a nodelet node joined to it by a bootstrap token; print the kubeconfigs; stop "
        "everything on Ctrl-C or SIGTERM (make cluster-down), leaving nothing behind."))
    parser.add_argument("--dir", type=Path, required=True,
                        help="the cluster's directory (PKI, kubeconfigs, etcd, the node, logs)")
    parser.add_argument("--join", action="store_true", help="run a nodelet node too")
    parser.add_argument("--nodelet", type=Path, default=Path(sys.executable).parent / "nodelet",
                        help="the nodelet program (default: next to this Python)")
    parser.add_argument("--node-name", default=socket.gethostname().lower())
    parser.add_argument("--background", action="store_true",
                        help="detach, and return once the cluster (and node) is ready")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.dir = args.dir.resolve()
    if args.background:
        if (args.dir / "supervisor.pid").exists():
            print(f"a cluster runs in {args.dir} already (make cluster-down)", file=sys.stderr)
            return 1
        return _background([a for a in argv if a != "--background"], args.dir)
    if (args.dir / "supervisor.pid").exists():
        print(f"a cluster runs in {args.dir} already (make cluster-down)", file=sys.stderr)
        return 1
    shutil.rmtree(args.dir, ignore_errors=True)  # what a killed run left (logs included)
    (args.dir / "manifests").mkdir(parents=True)
    started = time.monotonic()
    try:
        plane = ControlPlane.start(root=args.dir)
    except ControlPlaneError as e:
        print(e, file=sys.stderr)
        return 1
    (args.dir / "supervisor.pid").write_text(f"{os.getpid()}\n")
    node = None
    proxy = None
    try:
        bootstrap = plane.bootstrap_kubeconfig(args.dir / "bootstrap-kubelet.conf")
        print(f"control plane up in {time.monotonic() - started:.1f} s at {plane.server}\n"
              f"  admin kubeconfig:     {plane.admin_kubeconfig}\n"
              f"  bootstrap kubeconfig: {bootstrap}\n"
              f"  logs:                 {plane.logs}", flush=True)
        if args.join:
            node = _nodelet(args, plane, bootstrap)
            node.start()
            plane._wait(node, f"node {args.node_name} Ready",
                        check=lambda: _node_ready(plane, args.node_name))
            proxy = plane.kube_proxy(args.node_name, [_pod_cidr(args)])
            proxy.start()
            storage = time.monotonic()
            volumes = _local_path(args, plane)
            print(f"nodelet node {args.node_name} Ready (log: {node.log}), kube-proxy beside "
                  f"it (log: {proxy.component.log}); the default StorageClass `standard` "
                  f"(local-path-provisioner, rolled out in {time.monotonic() - storage:.1f} s; "
                  f"volumes in {volumes}); try:\n"
                  f"  export KUBECONFIG={plane.admin_kubeconfig}\n"
                  f"  {binary('kubectl')} get nodes", flush=True)
        (args.dir / "ready").touch()
        dead = _serve(plane, node, proxy)
    except (ControlPlaneError, RuntimeError) as e:
        print(e, file=sys.stderr)
        dead = ["the cluster"]
    finally:
        print("stopping...", flush=True)
        if proxy is not None:
            proxy.stop()  # and its rules and chains: kube-proxy --cleanup
        if node is not None:
            node.stop()
            _reset(args)
            _remove_volumes(args)
        plane.stop(keep=True)
        (args.dir / "ready").unlink(missing_ok=True)
        (args.dir / "supervisor.pid").unlink(missing_ok=True)
    if dead:
        print(f"{', '.join(dead)} exited; logs in {plane.logs}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
