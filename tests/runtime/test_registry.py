"""Pulls from a real local registry (tests/support/registry.py) into the session containerd."""

from __future__ import annotations

import time

import pytest

from conftest import Instance
from nodelet.adapters.cri import errors as cri_errors
from support.registry import BLOB_GETS_PER_PULL, Registry

pytestmark = pytest.mark.runtime


async def test_containerd_pulls_plain_http_from_loopback_registry(
    runtime: Instance, registry: Registry
) -> None:
    ref = registry.push("nodelet/busybox", "direct")
    assert await runtime.client.image_status(ref) is None
    try:
        image_ref = await runtime.client.pull_image(ref)
        image = await runtime.client.image_status(ref)
        assert image is not None and ref in image.repo_tags
        assert image_ref == image.id
    finally:
        await runtime.client.remove_image(ref)
    assert await runtime.client.image_status(ref) is None


async def test_pull_of_a_missing_tag_fails_with_not_found(
    runtime: Instance, registry: Registry
) -> None:
    ref = registry.ref("nodelet/busybox", "no-such-tag")
    with pytest.raises(cri_errors.CriError) as failed:
        await runtime.client.pull_image(ref)
    assert "not found" in str(failed.value)


async def test_slow_proxy_holds_every_blob_of_a_pull(
    runtime: Instance, registry: Registry
) -> None:
    registry.push("nodelet/busybox", "slow")
    async with registry.slow_proxy(1.0) as proxy:
        ref = registry.ref("nodelet/busybox", "slow", host=proxy.host)
        started = time.monotonic()
        try:
            await runtime.client.pull_image(ref)
            took = time.monotonic() - started
        finally:
            await runtime.client.remove_image(ref)
    delayed = [r for r in proxy.requests if r.delayed]
    # The config and the one layer: both fetched now (fresh variant), both held, one after the
    # other — what makes `PULL_15S_DELAY` give a 15 s pull.
    assert len(delayed) == BLOB_GETS_PER_PULL, proxy.requests
    assert delayed[1].at - delayed[0].at >= 1.0, proxy.requests
    assert took >= BLOB_GETS_PER_PULL * 1.0, (took, proxy.requests)
