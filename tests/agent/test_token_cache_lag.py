"""A TokenRequest refused while kube-apiserver's pod cache lags behind the pod's binding
(NodeRestriction's 403 "bound to a pod scheduled on a different node", or 404 for the pod) is
asked again at once with a short back-off, within the same call; other refusals are not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nodelet.adapters import kube
from nodelet.model.core import pods, tokens
from nodelet.services.cluster import tokens as token_service

REQUEST = tokens.TokenRequest(service_account="default", namespace="ns", audiences=("api",),
                              expiration_seconds=3600, pod_name="web",
                              pod_uid=pods.PodUID("uid-1"))
LAG = kube.KubeError('POST token: 403 Forbidden: serviceaccounts "default" is forbidden: '
                     "node requested token bound to a pod scheduled on a different node",
                     status=403)
NOT_YET = kube.NotFound('POST token: 404 NotFound: pods "web" not found', status=404)
DENIED = kube.KubeError("POST token: 403 Forbidden: no relationship found", status=403)


def answer() -> dict[str, Any]:
    expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"status": {"token": "t0k3n", "expirationTimestamp": expires}}


def manager(failures: list[Exception], calls: list[int]) -> token_service.TokenManager:
    async def fetch(_: tokens.TokenRequest) -> dict[str, Any]:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return answer()

    return token_service.TokenManager(fetch=fetch, clock=lambda: datetime.now(UTC),
                                      lag_retry=0.001, lag_retries=4)


@pytest.mark.parametrize("lag", [LAG, NOT_YET], ids=["forbidden", "not-found"])
async def test_a_lagging_cache_is_asked_again(lag: Exception) -> None:
    calls: list[int] = []
    token = await manager([lag, lag], calls).token(REQUEST)
    assert token.token == "t0k3n" and len(calls) == 3


async def test_a_cache_that_keeps_lagging_fails_after_the_retries() -> None:
    calls: list[int] = []
    with pytest.raises(token_service.FetchError, match="scheduled on a different node"):
        await manager([LAG] * 10, calls).token(REQUEST)
    assert len(calls) == 5


async def test_other_refusals_fail_at_once() -> None:
    calls: list[int] = []
    with pytest.raises(token_service.FetchError, match="no relationship found"):
        await manager([DENIED], calls).token(REQUEST)
    assert len(calls) == 1
