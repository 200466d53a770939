"""Registry credentials under a real agent: a local registry that asks for basic auth
(tests/support/registry.py), pull secrets written as manifests, and the node's config.json.

Every test pushes its own busybox variant, so containerd never has the image in advance and
each pod really pulls it; pulled images are removed at the end.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from nodelet.model.core import events as ev
from nodelet.model.core import status as st
from support.harness import (
    Harness,
    all_ready,
    events_by,
    is_true,
    pod_manifest,
    waiting,
    waiting_reason,
)
from support.polling import eventually
from support.registry import Auth, Registry

pytestmark = pytest.mark.runtime

REPO = "private/busybox"
AUTH: Auth = ("puller", "s3cret:with-colon")
_DEFAULT_IMAGE = "image: localhost/nodelet/busybox:latest"
# The registry's log line for a wrong password (quotes escaped in its logfmt).
REJECTED = f'error authenticating user \\"{AUTH[0]}\\"'


@pytest.fixture(scope="module")
def auth_registry() -> Iterator[Registry]:
    with Registry.started(auth=AUTH) as running:
        yield running


def push(registry: Registry, tag: str, pulled: list[str]) -> str:
    ref = registry.push(REPO, tag)
    pulled.append(ref)
    return ref


def private_pod(name: str, image: str, *secrets: str) -> str:
    extra = "imagePullSecrets:\n" + "".join(f"  - name: {s}\n" for s in secrets) if secrets else ""
    text = pod_manifest(name, extra_spec=extra)
    assert text.count(_DEFAULT_IMAGE) == 1, text
    return text.replace(_DEFAULT_IMAGE, f"image: {image}")


def docker_config(registry: str, auth: Auth) -> str:
    token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    return json.dumps({"auths": {registry: {"auth": token}}})


def secret_manifest(name: str, data: str, *, type_: str = "kubernetes.io/dockerconfigjson",
                    key: str = ".dockerconfigjson") -> str:
    encoded = base64.b64encode(data.encode()).decode()
    return (f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\ntype: {type_}\n"
            f"data:\n  {key}: {encoded}\n")


def refused_by_registry(message: str) -> bool:
    """The registry's 401 in the runtime's words: containerd 1.6 quotes the status line,
    2.x says "pull access denied ... authorization failed"."""
    return "401 Unauthorized" in message or "authorization failed" in message


async def test_pull_without_credentials_fails_with_the_registrys_401_until_the_secret_exists(
    pulled: list[str], agent: Harness, auth_registry: Registry
) -> None:
    ref = push(auth_registry, "late-secret", pulled)
    agent.write("pod.yaml", private_pod("late", ref, "regcred"))
    failed = await agent.wait_status("late", lambda s: waiting_reason(s) == "ErrImagePull",
                                     what="ErrImagePull without credentials")
    state = waiting(failed)
    assert state is not None and refused_by_registry(state.message), state
    assert failed.phase == "Pending" and is_true(failed, st.POD_READY_TO_START_CONTAINERS)
    [missing] = events_by(agent, "late", "FailedToRetrieveImagePullSecret")
    assert (missing.type, missing.message) == (
        "Warning", "Unable to retrieve some image pull secrets (regcred); attempting to pull "
        "the image may not succeed.")
    failures = events_by(agent, "late", ev.FAILED)
    assert failures and failures[0].type == "Warning", agent.events_of("late")
    assert failures[0].message.startswith(f'Failed to pull image "{ref}": '), failures[0]
    assert refused_by_registry(failures[0].message)

    agent.write("regcred.yaml", secret_manifest("regcred", docker_config(
        auth_registry.host, AUTH)))
    await agent.wait_status("late", all_ready, what="Ready once the pull secret exists")
    assert events_by(agent, "late", ev.PULLED)


async def test_each_matching_pull_secret_is_tried_in_order(
    pulled: list[str], agent: Harness, auth_registry: Registry
) -> None:
    """A wrong password first, then the right one (from a .dockercfg secret, with the scheme
    and API version in its key); a Secret of another type is skipped with a warning."""
    ref = push(auth_registry, "in-order", pulled)
    host = auth_registry.host
    agent.write("wrong.yaml", secret_manifest("wrong", docker_config(host, (AUTH[0], "nope"))))
    right = json.loads(docker_config(f"http://{host}/v1/", AUTH))["auths"]
    agent.write("right.yaml", secret_manifest(
        "right", json.dumps(right), type_="kubernetes.io/dockercfg", key=".dockercfg"))
    agent.write("opaque.yaml", secret_manifest("opaque", "{}", type_="Opaque"))
    log = auth_registry.root / "registry.log"
    rejected_before = log.read_text().count(REJECTED)
    agent.write("pod.yaml", private_pod("ordered", ref, "opaque", "wrong", "right"))
    await agent.wait_status("ordered", all_ready, what="Ready with the second credential")
    # The registry saw the wrong password first.
    assert log.read_text().count(REJECTED) > rejected_before
    reasons = [e.reason for e in agent.events_of("ordered")]
    assert ev.FAILED not in reasons and "FailedToRetrieveImagePullSecret" not in reasons
    [invalid] = events_by(agent, "ordered", "InvalidImagePullSecret")
    assert invalid.type == "Warning"
    assert invalid.message.startswith(
        'image pull secret "default/opaque" of type "Opaque" holds no registry credentials'), \
        invalid.message


async def test_broken_pull_secret_is_refused_and_the_pull_goes_on_without_it(
    pulled: list[str], agent: Harness, auth_registry: Registry
) -> None:
    ref = push(auth_registry, "broken", pulled)
    agent.write("broken.yaml", secret_manifest("broken", '{"auths": {'))
    agent.write("pod.yaml", private_pod("broken", ref, "broken"))
    # As kube-apiserver, nodelet refuses a dockerconfigjson Secret that is not JSON: the
    # manifest is reported, the Secret does not exist, and the pull goes on without it.
    report = await eventually(lambda: [m for m in agent.agent_or_fail().manifests()
                                       if m.file.endswith("broken.yaml") and not m.ok],
                              within=30, what="the broken Secret refused")
    assert ".dockerconfigjson" in report[0].error
    await agent.wait_status("broken", lambda s: waiting_reason(s) == "ErrImagePull",
                            what="ErrImagePull without the refused pull secret")
    assert events_by(agent, "broken", "FailedToRetrieveImagePullSecret")

    # Fixed in place: the next attempt uses it.
    agent.write("broken.yaml", secret_manifest("broken", docker_config(auth_registry.host, AUTH)))
    await agent.wait_status("broken", all_ready, what="Ready once the pull secret is fixed")


async def test_node_config_json_serves_pods_without_pull_secrets(
    pulled: list[str], agent: Harness, auth_registry: Registry
) -> None:
    ref = push(auth_registry, "node-config", pulled)
    config = agent.settings.registry_config_file
    assert config == agent.settings.data_dir / "config.json"
    config.write_text(docker_config(f"https://{auth_registry.host}", AUTH))
    agent.write("pod.yaml", private_pod("nodecreds", ref))
    await agent.wait_status("nodecreds", all_ready, what="Ready with the node's credentials")
    assert not events_by(agent, "nodecreds", ev.FAILED)
