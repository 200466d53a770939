"""TLS bootstrap and client certificate rotation (the kubelet's pkg/kubelet/certificate).

`ClientCertificates.bootstrap()` runs before cluster mode connects: when `--kubeconfig` is
missing, unreadable or its client certificate is not valid now, a still-valid pair in the
store is used again, or else a new EC P-256 key and a CertificateSigningRequest (signer
`kubernetes.io/kube-apiserver-client-kubelet`, CN `system:node:<node>`, O `system:nodes`,
usages digital signature + client auth, as the kubelet asks for an EC key) are made with the
bootstrap kubeconfig's credentials; the CSR is watched until it is Approved and carries its
certificate (Denied or Failed: `CertificateError` naming it; `csr_timeout`). Key and
certificate go to the store (`adapters.certs.CertStore`, `<cert_dir>/kubelet-client-*.pem`)
and the kubeconfig is written pointing at `kubelet-client-current.pem`.

`ClientCertificates.run(on_rotated)` is the rotation loop: at a jittered 70-90 % of the
certificate's lifetime (`model.core.rotation`) a new key and CSR are sent with the current
certificate (with the bootstrap credentials once it expired, as the kubelet), the pair is
stored, and `await on_rotated(config)` hands the new credentials to the API clients, whose new
connections use them while requests and watches in flight finish. Failures are retried with a
back-off (`csr_retry` doubling to `csr_retry_max`) at once, as client-go's manager does (the
deadline, and its jitter, is drawn once per certificate), logged, never raised. The file work
(store, kubeconfig, TLS contexts) runs on threads.

An issued certificate is used only when it is an X.509 certificate whose public key is the new
key's (`certs.check_pair`, Go's tls.X509KeyPair): otherwise bootstrap fails and rotation
retries, and nothing is stored. A kubeconfig or stored pair is reused at start only when its
certificate is valid now and matches its key.

Exceptions::

    CertificateError   the CSR was denied, failed, deleted, not issued in time, or issued an
                       unusable certificate; or the store or kubeconfig cannot be written (the
                       message names the CSR or file)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import datetime

from nodelet import settings as settings_mod
from nodelet.adapters import certs, kube, kubeconfig
from nodelet.helpers import backoff
from nodelet.model.core import apijson, rotation

log = logging.getLogger(__name__)

SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
# The kubelet's client certificate usages for an EC key (no key encipherment: RSA only).
USAGES = ("digital signature", "client auth")


class CertificateError(Exception):
    """No client certificate could be had; the message names the CSR or the file."""


class ClientCertificates:
    """The node's client certificate: bootstrap, then rotation. See the module doc."""

    def __init__(self, *, settings: settings_mod.ClusterSettings, node_name: str,
                 client_settings: kube.ClientSettings, clock: Callable[[], datetime],
                 rng: Callable[[], float] = random.random) -> None:
        if settings.bootstrap_kubeconfig is None:
            raise ValueError("ClientCertificates needs settings.bootstrap_kubeconfig")
        self._settings = settings
        self._bootstrap = settings.bootstrap_kubeconfig
        self._node_name = node_name
        self._client_settings = client_settings
        self._clock = clock
        self._rng = rng
        self.store = certs.CertStore(settings.cert_dir or settings.kubeconfig.parent / "pki")
        self.rotations = 0  # certificates obtained by rotation
        self.last_csr = ""  # the name of the last CSR sent

    # -- bootstrap ------------------------------------------------------------------------------

    async def bootstrap(self) -> None:
        """Make `kubeconfig` hold a client certificate valid now (see the module doc)."""
        if await asyncio.to_thread(self._kubeconfig_usable):
            return
        boot = await asyncio.to_thread(kubeconfig.load, self._bootstrap)
        try:
            pair = await asyncio.to_thread(self._stored_pair)
            if pair is None or not self._usable(*pair):
                log.info("requesting a client certificate for node %s from %s",
                         self._node_name, boot.server)
                await asyncio.to_thread(self.store.write, *await self._request_until_sent(boot))
        except certs.CertError as exc:
            raise CertificateError(str(exc)) from exc
        try:
            await asyncio.to_thread(kubeconfig.write_client_cert_config,
                                    self._settings.kubeconfig, cluster=boot,
                                    cert_file=self.store.current)
        except kubeconfig.KubeconfigError as exc:
            raise CertificateError(str(exc)) from exc
        log.info("wrote %s with the client certificate %s", self._settings.kubeconfig,
                 self.store.current)

    def _stored_pair(self) -> tuple[bytes, bytes] | None:
        """The store's current pair; None when there is none or it cannot be read (a new
        one is requested then)."""
        try:
            return self.store.load()
        except certs.CertError as exc:
            log.warning("requesting a new client certificate: %s", exc)
            return None

    def _kubeconfig_usable(self) -> bool:
        if not self._settings.kubeconfig.exists():
            return False
        try:
            config = kubeconfig.load(self._settings.kubeconfig)
        except kubeconfig.KubeconfigError as exc:
            log.warning("bootstrapping again: %s", exc)
            return False
        if config.client_cert_pem is None:
            return True  # a token kubeconfig: nothing to bootstrap
        return self._usable(config.client_cert_pem, config.client_key_pem,
                            what=str(self._settings.kubeconfig))

    def _usable(self, cert_pem: bytes, key_pem: bytes | None, *,
                what: str = "the stored certificate") -> bool:
        """The pair parses, matches and is valid now (a broken pair is bootstrapped again,
        not reused)."""
        try:
            v = certs.check_pair(cert_pem, key_pem or b"", what=what)
        except certs.CertError as exc:
            log.warning("not using the client certificate: %s", exc)
            return False
        return rotation.usable(v.not_before, v.not_after, self._clock())

    # -- one CSR ----------------------------------------------------------------------------

    async def _request_until_sent(self, credentials: kubeconfig.KubeConfig) -> tuple[bytes, bytes]:
        """`_request`, again with a back-off while the API server cannot be reached (a node
        often starts before its control plane answers), for at most `csr_timeout`."""
        retry = backoff.Backoff(self._settings.csr_retry, self._settings.csr_retry_max)
        timeout = self._settings.csr_timeout
        try:
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        return await self._request(credentials)
                    except (kube.Unavailable, kube.TooManyRequests) as exc:
                        delay = retry.next_delay()
                        log.warning("cannot send a certificate signing request to %s: %s; "
                                    "again in %.1fs", credentials.server, exc, delay)
                        await asyncio.sleep(delay)
        except TimeoutError as exc:
            raise CertificateError(
                f"no client certificate within {timeout:.0f}s: {credentials.server} did not "
                "take a certificate signing request; check the API server and the bootstrap "
                "kubeconfig") from exc

    async def _request(self, credentials: kubeconfig.KubeConfig) -> tuple[bytes, bytes]:
        """A new (certificate, key) PEM pair, asked for with `credentials`."""
        key = certs.new_key()
        spec: apijson.Obj = {
            "request": base64.b64encode(certs.node_csr(key, self._node_name)).decode(),
            "signerName": SIGNER, "usages": list(USAGES)}
        if self._settings.csr_expiration_seconds is not None:
            spec["expirationSeconds"] = self._settings.csr_expiration_seconds
        tls = await asyncio.to_thread(credentials.ssl_context)
        client = kube.KubeClient(credentials, settings=self._client_settings, tls=tls)
        try:
            created = await client.create_csr({
                "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": {"generateName": "csr-"}, "spec": spec})
            name = str(created.get("metadata", {}).get("name", ""))
            self.last_csr = name
            log.info("sent certificate signing request %s; waiting for its approval", name)
            cert = await self._wait_issued(client, name)
        finally:
            await client.close()
        try:
            certs.check_pair(cert, key, what=f"the certificate issued for certificate signing "
                                             f"request {name}")
        except certs.CertError as exc:
            raise CertificateError(f"{exc}; check the signer") from exc
        return cert, key

    async def _wait_issued(self, client: kube.KubeClient, name: str) -> bytes:
        timeout = self._settings.csr_timeout
        retry = backoff.Backoff(self._settings.csr_retry, self._settings.csr_retry_max)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        return await self._follow(client, name)
                    except (kube.Unavailable, kube.Gone) as exc:
                        delay = retry.next_delay()
                        log.warning("watching certificate signing request %s: %s; again in "
                                    "%.1fs", name, exc, delay)
                        await asyncio.sleep(delay)
        except TimeoutError as exc:
            raise CertificateError(
                f"certificate signing request {name} was not approved and issued within "
                f"{timeout:.0f}s; approve it (kubectl certificate approve {name}) or check "
                "the signer") from exc

    async def _follow(self, client: kube.KubeClient, name: str) -> bytes:
        """List the CSR, then watch it (again from the last resourceVersion when the server
        ends a watch) until it is issued."""
        selector = f"metadata.name={name}"
        items, rv = await client.list_objects(kube.CSR_PATH, field_selector=selector)
        for item in items:
            found = _issued(item)
            if found is not None:
                return found
        while True:
            events = client.watch(kube.CSR_PATH, resource_version=rv, field_selector=selector)
            async with contextlib.aclosing(events):
                async for event in events:
                    rv = kube.resource_version(event.object) or rv
                    if event.type == "DELETED":
                        raise CertificateError(f"certificate signing request {name} was "
                                               "deleted before it was issued")
                    found = _issued(event.object) if event.type != "BOOKMARK" else None
                    if found is not None:
                        return found

    # -- rotation -----------------------------------------------------------------------------

    async def run(self, on_rotated: Callable[[kubeconfig.KubeConfig], Awaitable[None]]
                  ) -> None:
        """Renew the certificate for ever (see the module doc); `await on_rotated(config)`
        after each renewal."""
        retry = backoff.Backoff(self._settings.csr_retry, self._settings.csr_retry_max)
        due = False
        while True:
            try:
                if not due:
                    await asyncio.sleep(await asyncio.to_thread(self._until_rotation))
                    # From now on a failure retries the renewal with the back-off (client-go's
                    # rotateCerts under wait.ExponentialBackoff), not a new, later deadline.
                    due = True
                await self._rotate(on_rotated)
                due = False
                retry.reset()
            except (kube.KubeError, kubeconfig.KubeconfigError, certs.CertError,
                    CertificateError) as exc:
                delay = retry.next_delay()
                log.warning("cannot renew the client certificate of node %s (retrying in "
                            "%.1fs): %s", self._node_name, delay, exc)
                await asyncio.sleep(delay)

    def _until_rotation(self) -> float:
        """Seconds until the current certificate is renewed (blocking: it reads the store);
        0 when there is none or it cannot be read."""
        try:
            pair = self.store.load()
            if pair is None:
                return 0.0
            v = certs.check_pair(*pair, what=str(self.store.current))
        except certs.CertError as exc:
            log.warning("renewing the client certificate now: %s", exc)
            return 0.0
        wait = rotation.seconds_until_rotation(v.not_before, v.not_after, self._rng(),
                                               self._clock())
        log.info("client certificate valid until %s; renewing in %.0fs", v.not_after, wait)
        return wait

    def _credentials(self) -> kubeconfig.KubeConfig:
        """The current certificate while it is usable, else (expired or broken) the bootstrap
        credentials, as at bootstrap. Blocking: it reads files."""
        try:
            current = kubeconfig.load(self._settings.kubeconfig)
            if current.client_cert_pem is not None and self._usable(
                    current.client_cert_pem, current.client_key_pem,
                    what=str(self._settings.kubeconfig)):
                return current
        except kubeconfig.KubeconfigError as exc:
            log.warning("renewing with the bootstrap credentials: %s", exc)
        return kubeconfig.load(self._bootstrap)

    async def _rotate(self, on_rotated: Callable[[kubeconfig.KubeConfig], Awaitable[None]]
                      ) -> None:
        cert, key = await self._request(await asyncio.to_thread(self._credentials))
        await asyncio.to_thread(self.store.write, cert, key)
        self.rotations += 1
        log.info("rotated the client certificate of node %s (%s)", self._node_name,
                 self.last_csr)
        await on_rotated(await asyncio.to_thread(kubeconfig.load, self._settings.kubeconfig))


def _issued(csr: apijson.Obj) -> bytes | None:
    """The certificate of an issued CSR; None while it waits; CertificateError when denied
    or failed."""
    name = csr.get("metadata", {}).get("name", "")
    status = csr.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Denied", "Failed") and condition.get("status") == "True":
            verdict = "was denied" if condition["type"] == "Denied" else "failed"
            raise CertificateError(
                f"certificate signing request {name} {verdict}: "
                f"{condition.get('reason', '')} {condition.get('message', '')}".rstrip())
    certificate = status.get("certificate")
    if not certificate:
        return None
    try:
        return base64.b64decode(certificate, validate=True)
    except (binascii.Error, TypeError, ValueError) as exc:
        raise CertificateError(f"certificate signing request {name}: status.certificate is "
                               f"not base64: {exc}") from exc
