"""KubeletEnsureSecretPulledImages under a real agent (issue 36): a pod may use an image already
on the node only with the credentials that pulled it. A local registry asks for basic auth
(tests/support/registry.py); pull secrets are manifests, as in test_pull_secrets.py.

Each test pushes its own busybox variant, so containerd never has it in advance; pulled images
are removed at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_pull_secrets import (
    AUTH,
    docker_config,
    private_pod,
    push,
    refused_by_registry,
    secret_manifest,
)

from nodelet.adapters import pullrecordfiles
from nodelet.model.core import events as ev
from nodelet.model.core import pullrecords, status
from support.harness import Harness, all_ready, events_by, waiting, waiting_reason
from support.registry import Registry

pytestmark = pytest.mark.runtime

ACCESSIBLE = "already present on machine and can be accessed by the pod"


@pytest.fixture(scope="module")
def private_registry() -> Iterator[Registry]:
    with Registry.started(auth=AUTH) as running:
        yield running


def never_pull(text: str) -> str:
    assert text.count("imagePullPolicy: IfNotPresent") == 1, text
    return text.replace("imagePullPolicy: IfNotPresent", "imagePullPolicy: Never")


def pulled_message(agent: Harness, name: str) -> str:
    [pulled] = events_by(agent, name, ev.PULLED)
    return pulled.message


def refused_pull(pod_status: status.PodStatus) -> bool:
    """ErrImagePull with the registry's 401, or the ImagePullBackOff after it, whose message
    repeats that error: a sync soon after the failed pull (a runtime event) may replace the one
    with the other before the test looks."""
    state = waiting(pod_status)
    return (state is not None and state.reason in ("ErrImagePull", "ImagePullBackOff")
            and refused_by_registry(state.message))


async def refused(agent: Harness, name: str) -> None:
    """The pod tried to pull with its own (no) credentials, and the registry said 401."""
    await agent.wait_status(name, refused_pull,
                            what=f"{name}: a pull refused by the registry (its own credentials)")
    assert events_by(agent, name, ev.PULLING), agent.events_of(name)
    assert not events_by(agent, name, ev.PULLED), agent.events_of(name)


async def allowed_without_pull(agent: Harness, name: str, image: str) -> None:
    await agent.wait_status(name, all_ready, what=f"{name}: Ready without a pull")
    assert pulled_message(agent, name) == f'Container image "{image}" {ACCESSIBLE}'
    assert not events_by(agent, name, ev.PULLING), agent.events_of(name)


async def test_a_pod_without_the_secret_cannot_use_a_private_image_another_pod_pulled(
    pulled: list[str], agent: Harness, private_registry: Registry
) -> None:
    ref = push(private_registry, "pulled-by-a", pulled)
    agent.write("regcred.yaml", secret_manifest("regcred", docker_config(
        private_registry.host, AUTH)))
    agent.write("a.yaml", private_pod("a", ref, "regcred"))
    await agent.wait_status("a", all_ready, what="a pulls with its secret")
    assert pulled_message(agent, "a").startswith(f'Successfully pulled image "{ref}"')

    # B has no secret: the image is on the node, but B must pull it as itself.
    agent.write("b.yaml", private_pod("b", ref))
    await refused(agent, "b")
    # C has the same secret: it uses the image A pulled.
    agent.write("c.yaml", private_pod("c", ref, "regcred"))
    await allowed_without_pull(agent, "c", ref)
    # Under Never, B is told what it would be told were the image not there.
    agent.write("never.yaml", never_pull(private_pod("never", ref)))
    refused_never = await agent.wait_status(
        "never", lambda s: waiting_reason(s) == "ErrImageNeverPull", what="ErrImageNeverPull")
    state = waiting(refused_never)
    assert state is not None
    assert state.message == f'Container image "{ref}" is not present with pull policy of Never'

    # The record names the secret, in the kubelet's file layout under the data dir.
    records = pullrecordfiles.PullRecordFiles(
        agent.settings.data_dir / pullrecordfiles.DIRECTORY).load().records
    [record] = [r for r in records if ref.rsplit(":", 1)[0] in r.credentials]
    [secret] = record.credentials[ref.rsplit(":", 1)[0]].secrets
    assert (secret.namespace, secret.name) == ("default", "regcred")

    # A restart keeps the records: a new pod without the secret is still refused (without
    # them, the image would count as preloaded and serve anyone), one with it is not.
    await agent.stop()
    await agent.start()
    agent.write("regcred.yaml", secret_manifest("regcred", docker_config(
        private_registry.host, AUTH)))
    agent.write("b2.yaml", private_pod("b2", ref))
    agent.write("c2.yaml", private_pod("c2", ref, "regcred"))
    await refused(agent, "b2")
    await allowed_without_pull(agent, "c2", ref)


async def test_the_same_credential_in_another_secret_is_accepted_and_learnt(
    pulled: list[str], agent: Harness, private_registry: Registry
) -> None:
    ref = push(private_registry, "same-credential", pulled)
    config = docker_config(private_registry.host, AUTH)
    agent.write("first.yaml", secret_manifest("first", config))
    agent.write("second.yaml", secret_manifest("second", config))
    agent.write("a.yaml", private_pod("a", ref, "first"))
    await agent.wait_status("a", all_ready, what="a pulls with the first secret")
    agent.write("b.yaml", private_pod("b", ref, "second"))
    await allowed_without_pull(agent, "b", ref)
    name = pullrecords.PullSecret("default", "second", "")
    records = pullrecordfiles.PullRecordFiles(
        agent.settings.data_dir / pullrecordfiles.DIRECTORY).load().records
    learnt = [s.coordinates for r in records for c in r.credentials.values() for s in c.secrets]
    assert name.coordinates in learnt, records


async def test_an_image_pulled_without_credentials_serves_every_pod(
    pulled: list[str], agent: Harness, registry: Registry
) -> None:
    ref = push(registry, "public", pulled)
    agent.write("a.yaml", private_pod("a", ref))
    await agent.wait_status("a", all_ready, what="a pulls anonymously")
    agent.write("b.yaml", private_pod("b", ref))
    await allowed_without_pull(agent, "b", ref)


async def test_a_preloaded_image_is_not_verified_by_default(agent: Harness) -> None:
    """The busybox image was imported, not pulled: NeverVerifyPreloadedImages lets it be."""
    agent.write("pod.yaml", private_pod("pre", "localhost/nodelet/busybox:latest"))
    await allowed_without_pull(agent, "pre", "localhost/nodelet/busybox:latest")


def test_record_files_are_private_and_a_broken_one_is_named(tmp_path: Path) -> None:
    """Records name the Secrets that pulled each image: root's only. A file that cannot be
    read is named, so the image it is about is verified (fail safe)."""
    root = tmp_path / pullrecordfiles.DIRECTORY
    files = pullrecordfiles.PullRecordFiles(root)
    files.write_intent("r.test/app:v1")
    files.write_record(pullrecords.PulledRecord("sha256:x", datetime(2025, 1, 1, tzinfo=UTC)))
    for path in (root / "pulling", root / "pulled"):
        assert path.stat().st_mode & 0o777 == 0o700
        [written] = list(path.iterdir())
        assert written.stat().st_mode & 0o777 == 0o600
        assert json.loads(written.read_bytes())["apiVersion"] == pullrecords.API_VERSION
    (root / "pulled" / "sha256-broken").write_text("{")
    loaded = files.load()
    assert loaded.intents == ("r.test/app:v1",)
    assert [r.image_ref for r in loaded.records] == ["sha256:x"]
    assert loaded.unreadable_records == {"sha256-broken"}

