"""Image pulls under a real agent, from a real local registry (tests/support/registry.py).

Every test pushes its own busybox variant (fresh layer digests), so containerd never has the
blobs in advance and a pull really transfers them; pulled images are removed at the end.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest

from conftest import Instance
from nodelet.model.core import events as ev
from nodelet.model.core import status as st
from support.harness import (
    Harness,
    all_ready,
    cond,
    events_by,
    is_true,
    pod_manifest,
    waiting,
    waiting_reason,
)
from support.polling import eventually
from support.registry import BLOB_GETS_PER_PULL, PULL_15S_DELAY, Registry

pytestmark = pytest.mark.runtime

REPO = "nodelet/busybox"
_DEFAULT_IMAGE = "image: localhost/nodelet/busybox:latest\n      imagePullPolicy: IfNotPresent"


def image_pod(name: str, image: str, policy: str, **kwargs: object) -> str:
    """`pod_manifest` with the app container's image and imagePullPolicy replaced."""
    text = pod_manifest(name, **kwargs)  # type: ignore[arg-type]
    assert text.count(_DEFAULT_IMAGE) == 1, text
    return text.replace(_DEFAULT_IMAGE, f"image: {image}\n      imagePullPolicy: {policy}")


_GO_DURATION = r"(?:\d+m)?\d+(?:\.\d+)?(?:ms|s)"


def pull_seconds(event: ev.Event, ref: str) -> float:
    """The time taken, from the kubelet's words: `Successfully pulled image "REF" in 512ms
    (512ms including waiting). Image size: 1234 bytes.` (Go durations, in milliseconds)."""
    found = re.fullmatch(
        rf'Successfully pulled image "{re.escape(ref)}" in ({_GO_DURATION}) '
        rf"\(({_GO_DURATION}) including waiting\)\. Image size: ([1-9]\d*) bytes\.",
        event.message)
    assert found is not None, event.message
    text = found.group(1)
    minutes, _, rest = text.rpartition("m") if not text.endswith("ms") else ("", "", text)
    seconds = float(rest[:-2]) / 1000 if rest.endswith("ms") else float(rest[:-1])
    return seconds + 60 * float(minutes or 0)


async def test_always_policy_pulls_through_cri_with_events(
    pulled: list[str], agent: Harness, runtime: Instance, registry: Registry
) -> None:
    ref = registry.push(REPO, "always")
    pulled.append(ref)
    agent.write("always.yaml", image_pod("always", ref, "Always"))
    pod_status = await agent.wait_status("always", all_ready, what="pod of a pulled image Ready")
    assert pod_status.phase == "Running"
    assert pod_status.container_statuses[0].image == ref
    pulling = events_by(agent, "always", ev.PULLING)
    done = events_by(agent, "always", ev.PULLED)
    assert [(e.type, e.message) for e in pulling] == [("Normal", f'Pulling image "{ref}"')]
    assert len(done) == 1 and done[0].type == "Normal", done
    pull_seconds(done[0], ref)
    assert pulling[0].first_timestamp <= done[0].first_timestamp
    assert await runtime.client.image_status(ref) is not None


async def test_if_not_present_policy_uses_the_present_image_without_pulling(
    pulled: list[str], agent: Harness, runtime: Instance, registry: Registry
) -> None:
    ref = registry.push(REPO, "present")
    pulled.append(ref)
    await runtime.client.pull_image(ref)
    agent.write("present.yaml", image_pod("present", ref, "IfNotPresent"))
    await agent.wait_status("present", all_ready, what="pod of a present image Ready")
    events = [(e.reason, e.message) for e in agent.events_of("present")]
    assert ev.PULLING not in dict(events), events
    # As the kubelet 1.35+ says it: no pull, the image was there, and (pulled outside the
    # agent: preloaded, not verified by default) the pod may use it.
    assert (ev.PULLED, f'Container image "{ref}" already present on machine and can be '
            "accessed by the pod") in events


async def test_never_policy_with_a_missing_image_waits_with_err_image_never_pull(
    agent: Harness, runtime: Instance, registry: Registry
) -> None:
    ref = registry.ref(REPO, "never-pulled")
    assert await runtime.client.image_status(ref) is None
    agent.write("never.yaml", image_pod("never", ref, "Never"))
    pod_status = await agent.wait_status(
        "never", lambda s: waiting_reason(s) == "ErrImageNeverPull",
        what="waiting reason ErrImageNeverPull")
    message = f'Container image "{ref}" is not present with pull policy of Never'
    assert waiting(pod_status) == st.ContainerStateWaiting("ErrImageNeverPull", message)
    assert pod_status.phase == "Pending"
    # The sandbox does not wait for images (KEP-3085): its condition is True all the same.
    assert is_true(pod_status, st.POD_READY_TO_START_CONTAINERS)
    assert not is_true(pod_status, st.CONTAINERS_READY)
    never = events_by(agent, "never", "ErrImageNeverPull")
    assert never and never[0].type == "Warning" and never[0].message == message
    assert not events_by(agent, "never", ev.PULLING)
    # And the kubelet's Failed event of the start that stopped there (tests/differential).
    assert [(e.type, e.message) for e in events_by(agent, "never", ev.FAILED)] == [
        ("Warning", "Error: ErrImageNeverPull")]


async def test_an_image_name_the_kubelet_cannot_parse_is_invalid_and_never_pulled(
    agent: Harness,
) -> None:
    """Found by the differential harness (scenario image-bad-name): nodelet pulled it."""
    agent.write("bad.yaml", image_pod("bad", "Not//Valid", "IfNotPresent"))
    pod_status = await agent.wait_status(
        "bad", lambda s: waiting_reason(s) == "InvalidImageName", what="InvalidImageName")
    message = ('Failed to apply default image tag "Not//Valid": couldn\'t parse image name '
               '"Not//Valid": invalid reference format: repository name (/Valid) must be '
               "lowercase")
    assert waiting(pod_status) == st.ContainerStateWaiting("InvalidImageName", message)
    assert [(e.type, e.reason, e.message) for e in agent.events_of("bad")
            if e.reason in ("InspectFailed", ev.FAILED, ev.PULLING)] == [
        ("Warning", "InspectFailed", message), ("Warning", ev.FAILED, "Error: InvalidImageName")]


async def test_missing_image_goes_from_err_image_pull_to_image_pull_back_off(
    pulled: list[str], agent: Harness, registry: Registry
) -> None:
    ref = registry.ref(REPO, "not-pushed-yet")
    pulled.append(ref)
    agent.write("missing.yaml", image_pod("missing", ref, "IfNotPresent"))
    first = await agent.wait_status("missing", lambda s: waiting_reason(s) == "ErrImagePull",
                                    what="waiting reason ErrImagePull after the first pull")
    assert first.phase == "Pending" and is_true(first, st.POD_READY_TO_START_CONTAINERS)
    failed = events_by(agent, "missing", ev.FAILED)
    assert failed and failed[0].type == "Warning", agent.events_of("missing")
    assert failed[0].message.startswith(f'Failed to pull image "{ref}": '), failed[0].message
    pull_error = failed[0].message.removeprefix(f'Failed to pull image "{ref}": ')
    # The kubelet's Failed event of the start that stopped there (tests/differential).
    assert ("Warning", "Error: ErrImagePull") in [(e.type, e.message) for e in failed]

    backing_off = await agent.wait_status(
        "missing", lambda s: waiting_reason(s) == "ImagePullBackOff"
        and bool(events_by(agent, "missing", ev.BACK_OFF)),
        what="waiting reason ImagePullBackOff with a BackOff event")
    assert is_true(backing_off, st.POD_READY_TO_START_CONTAINERS)
    back_off = events_by(agent, "missing", ev.BACK_OFF)
    assert [(e.type, e.message) for e in back_off] == [
        ("Normal", f'Back-off pulling image "{ref}"')]
    # As the kubelet's, the Waiting message repeats the last pull's error.
    assert waiting(backing_off) == st.ContainerStateWaiting(
        "ImagePullBackOff", f'Back-off pulling image "{ref}": ErrImagePull: {pull_error}')
    assert ("Warning", "Error: ImagePullBackOff") in [
        (e.type, e.message) for e in events_by(agent, "missing", ev.FAILED)]

    # Once the tag exists, the next attempt after the back-off pulls it.
    registry.push(REPO, "not-pushed-yet")
    await agent.wait_status("missing", all_ready, what="Ready once the image can be pulled")
    assert events_by(agent, "missing", ev.PULLED)


async def test_slow_image_pull_does_not_delay_pod_ready_to_start_containers(
    pulled: list[str], agent: Harness, registry: Registry
) -> None:
    """The KEP-3085 node e2e case: an image pull of about 15 s (registry behind a slow proxy)."""
    registry.push(REPO, "slow")
    async with registry.slow_proxy(PULL_15S_DELAY) as proxy:
        ref = registry.ref(REPO, "slow", host=proxy.host)
        pulled.append(ref)
        agent.write("slow.yaml", image_pod("slow", ref, "IfNotPresent"))
        early = await agent.wait_status(
            "slow", lambda s: is_true(s, st.POD_READY_TO_START_CONTAINERS), within=10,
            what="PodReadyToStartContainers True within 10 s of the manifest")
        assert not is_true(early, st.READY)
        final = await agent.wait_status("slow", all_ready, within=90,
                                        what="Ready after the slow pull")
    held = [r for r in proxy.requests if r.delayed]
    assert len(held) == BLOB_GETS_PER_PULL, proxy.requests
    [done] = events_by(agent, "slow", ev.PULLED)
    assert pull_seconds(done, ref) >= PULL_15S_DELAY, done.message

    sandbox = cond(final, st.POD_READY_TO_START_CONTAINERS)
    ready = cond(final, st.READY)
    assert sandbox is not None and ready is not None
    assert sandbox.last_transition_time is not None and ready.last_transition_time is not None
    assert sandbox.last_transition_time < ready.last_transition_time
    # Also as the API serialises them (whole seconds), which is what the node e2e test compares.
    assert sandbox.last_transition_time.replace(microsecond=0) \
        < ready.last_transition_time.replace(microsecond=0)
    assert ready.last_transition_time - sandbox.last_transition_time >= timedelta(
        seconds=PULL_15S_DELAY)


async def test_pod_removed_during_a_slow_pull_is_terminated_without_waiting_for_it(
    pulled: list[str], agent: Harness, registry: Registry
) -> None:
    """The sync in flight (here: a ~15 s pull) is cancelled when the pod is to be terminated."""
    registry.push(REPO, "abandoned")
    async with registry.slow_proxy(PULL_15S_DELAY) as proxy:
        ref = registry.ref(REPO, "abandoned", host=proxy.host)
        pulled.append(ref)
        agent.write("abandon.yaml", image_pod("abandon", ref, "IfNotPresent"))
        await eventually(lambda: events_by(agent, "abandon", ev.PULLING),
                         within=30, what="the pull started")
        removed_at = time.monotonic()
        agent.remove("abandon.yaml")
        await eventually(lambda: agent.find("abandon") is None, within=PULL_15S_DELAY,
                         what="the pod gone well before its pull could have finished")
        assert time.monotonic() - removed_at < PULL_15S_DELAY
        assert not events_by(agent, "abandon", ev.PULLED)
