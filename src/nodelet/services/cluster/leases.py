"""The node Lease: nodelet's heartbeat (`kube-node-lease/<node>`, coordination.k8s.io/v1).

As the kubelet's lease controller (`k8s.io/component-helpers/apimachinery/lease`): duration
40 s, renewed every 10 s with a small jitter (`wait.JitterUntil(..., 0.04)`); the first renewal
GETs the Lease (creating it on NotFound, owned by the Node so it goes with it); later renewals
PUT the cached copy with a new `renewTime`, falling back to a GET after a conflict. A failed
renewal is retried after 0.2 s doubling up to 7 s, as the kubelet does, before the next period.

The owner is the Node as it is now: read by `node_uid()` (a GET of the Node) whenever a Lease
is made or has no owner, as the kubelet's `SetNodeOwnerFunc` does, never a UID remembered from
registration. While the Node does not exist (deleted under the running node) no Lease is made
and an ownerless one is not renewed: a Lease owned by a deleted Node would be deleted by the
garbage collector at once, made again, and so on. Once a Node of that name exists again, the
Lease is made owned by it.

Exceptions: `renew()` raises `kube.KubeError`, and `NodeMissing` when the Lease would need an
owner and there is no Node; `run()` logs and retries.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from nodelet.adapters import kube
from nodelet.helpers import backoff
from nodelet.model.core import apijson

log = logging.getLogger(__name__)

NAMESPACE = "kube-node-lease"


class NodeMissing(Exception):
    """The Node does not exist, so its Lease is not made or renewed (see the module doc)."""


def micro_time(value: datetime) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseTiming:
    """The lease's duration (s) and renewal period, its jitter, and the retry back-off."""

    duration: int = 40
    renew_period: float = 10.0
    jitter: float = 0.04
    retry: float = 0.2
    retry_max: float = 7.0


class LeaseKeeper:
    def __init__(
        self,
        *,
        client: kube.KubeClient,
        node_name: str,
        node_uid: Callable[[], Awaitable[str | None]],
        clock: Callable[[], datetime],
        timing: LeaseTiming | None = None,
    ) -> None:
        timing = timing or LeaseTiming()
        self._client = client
        self._node_name = node_name
        self._node_uid = node_uid
        self._clock = clock
        self.duration = timing.duration
        self.renew_period = timing.renew_period
        self._jitter = timing.jitter
        self._retry = backoff.Backoff(timing.retry, timing.retry_max)
        self.lease: apijson.Obj | None = None
        self.renewals = 0
        self.attempts = 0  # renewal rounds tried (each period, each retry)
        self.last_error: str | None = None

    async def run(self) -> None:
        while True:
            try:
                await self.renew()
            except NodeMissing as exc:  # nothing to retry at once: the next period looks again
                self.last_error = str(exc)
                log.warning("%s", exc)
                await asyncio.sleep(backoff.jittered(self.renew_period, self._jitter))
                continue
            except kube.KubeError as exc:
                self.last_error = str(exc)
                delay = self._retry.next_delay()
                log.warning("cannot renew lease of node %s, retrying in %.1fs: %s",
                            self._node_name, delay, exc)
                await asyncio.sleep(delay)
                continue
            self._retry.reset()
            self.last_error = None
            await asyncio.sleep(backoff.jittered(self.renew_period, self._jitter))

    async def renew(self) -> apijson.Obj:
        self.attempts += 1
        if self.lease is None:
            self.lease = await self._get_or_create()
            return self.lease
        lease = copy.deepcopy(self.lease)
        await self._own(lease)
        lease["spec"]["renewTime"] = micro_time(self._clock())
        lease["spec"]["holderIdentity"] = self._node_name
        lease["spec"]["leaseDurationSeconds"] = self.duration
        try:
            self.lease = await self._client.replace_lease(NAMESPACE, self._node_name, lease)
        except (kube.Conflict, kube.NotFound):
            self.lease = None  # someone else wrote it: start from the API's copy next time
            raise
        self.renewals += 1
        return self.lease

    async def _get_or_create(self) -> apijson.Obj:
        try:
            lease = await self._client.get_lease(NAMESPACE, self._node_name)
        except kube.NotFound:
            created = await self._client.create_lease(NAMESPACE, await self._new_lease())
            self.renewals += 1
            return created
        await self._own(lease)
        lease.setdefault("spec", {})
        lease["spec"].update(holderIdentity=self._node_name, leaseDurationSeconds=self.duration,
                             renewTime=micro_time(self._clock()))
        updated = await self._client.replace_lease(NAMESPACE, self._node_name, lease)
        self.renewals += 1
        return updated

    async def _own(self, lease: apijson.Obj) -> None:
        """Give a Lease without an owner the Node as it is now; NodeMissing without one."""
        meta = lease.setdefault("metadata", {})
        if meta.get("ownerReferences"):
            return
        uid = await self._node_uid()
        if not uid:
            raise NodeMissing(f"node {self._node_name} does not exist: its Lease is neither "
                              "made nor renewed until it does")
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node",
                                    "name": self._node_name, "uid": uid}]

    async def _new_lease(self) -> apijson.Obj:
        lease: apijson.Obj = {"metadata": {"name": self._node_name, "namespace": NAMESPACE}}
        await self._own(lease)
        return {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": lease["metadata"],
            "spec": {"holderIdentity": self._node_name, "leaseDurationSeconds": self.duration,
                     "renewTime": micro_time(self._clock())},
        }
