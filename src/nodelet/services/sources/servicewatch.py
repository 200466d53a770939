"""The cluster's Services, for service environment variables (`enableServiceLinks`).

`ServiceWatch` is the kubelet's Service informer: one list + watch of the Services of every
namespace with a cluster IP (`fieldSelector=spec.clusterIP!=None`, as the kubelet's since
kubernetes#122394: headless Services never give variables), through a `kube.Reflector`
(bookmarks, relist on 410 Gone, reconnect back-off), listed in pages of `PAGE_SIZE`. A watch
event updates only the Service it names (`Reflector.changed`); only a (re)list reads them all.
It is the `podwork.names.ServiceSource` that container starts read, in cluster mode only:
standalone there is no watch and no Service, and containers get no service variables.

Exceptions: list and watch errors are logged and retried by the Reflector.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from nodelet.adapters import kube
from nodelet.model.core import apijson, servicelinks
from nodelet.model.parsing import serviceobjects

# Services per list page (`limit`/`continue`), as client-go's reflector and `analyze`: a large
# cluster's Services are not one huge answer.
PAGE_SIZE = 500


class ServiceWatch:
    """The Services of all namespaces by list + watch; run `run()` as a task."""

    def __init__(self, client: kube.KubeClient, *, wait_timeout: float) -> None:
        self._wait_timeout = wait_timeout
        self._by_uid: dict[str, servicelinks.Service] | None = None  # None: never listed
        self._services: tuple[servicelinks.Service, ...] | None = None  # made when asked
        self.reflector = kube.Reflector(
            client, path=kube.core_path("services"),
            field_selector=servicelinks.FIELD_SELECTOR, page_size=PAGE_SIZE,
            on_change=self._changed, name="service watch")

    async def run(self) -> None:
        await self.reflector.run()

    def current(self) -> tuple[servicelinks.Service, ...] | None:
        if self._services is None and self._by_uid is not None:
            self._services = tuple(self._by_uid.values())
        return self._services

    async def wait_listed(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._wait_timeout):
                await self.reflector.listed.wait()

    def _changed(self, store: Mapping[str, apijson.Obj]) -> None:
        uid = self.reflector.changed
        if uid is None or self._by_uid is None:  # a (re)list: all of them
            self._by_uid = {}
            for key, obj in store.items():
                _put(self._by_uid, key, obj)
        else:  # one watch event: that Service only
            _put(self._by_uid, uid, store.get(uid))
        self._services = None


def _put(services: dict[str, servicelinks.Service], uid: str, obj: apijson.Obj | None) -> None:
    """Services[uid] as `obj` says (a removed or headless one: out)."""
    service = None if obj is None else serviceobjects.service_from_object(obj)
    if service is None:
        services.pop(uid, None)
    else:
        services[uid] = service
