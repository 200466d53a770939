"""The pod-spec field table: it covers every field the parser accepts, docs/podspec.md is its
rendering, and what it says is refused is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodelet.model.core import admission, pods
from nodelet.model.parsing import apifields, envspecs, hookspecs, manifests, podfields

DOC = Path(__file__).resolve().parents[2] / "docs" / "podspec.md"

# Each list of fields the manifest parser accepts, and where its fields sit in the table.
ACCEPTED = (
    (apifields.SPEC_FIELDS, podfields.SPEC),
    (apifields.POD_SECURITY_CONTEXT_FIELDS, podfields.POD_SC),
    (apifields.CONTAINER_FIELDS, podfields.CONTAINER),
    (apifields.SECURITY_CONTEXT_FIELDS, podfields.CONTAINER_SC),
    (apifields.PORT_FIELDS, podfields.PORT),
    (apifields.ENV_FIELDS, podfields.ENV),
    (apifields.MOUNT_FIELDS, podfields.MOUNT),
    (apifields.RESOURCES_FIELDS, podfields.RESOURCES),
    (hookspecs.LIFECYCLE_FIELDS, podfields.LIFECYCLE),
    (apifields.HOST_ALIAS_FIELDS, podfields.HOST_ALIAS),
    (apifields.VOLUME_SOURCES, podfields.VOLUME),
)


def test_every_accepted_field_has_a_decision() -> None:
    table = {row.path for row in podfields.all_fields()}
    accepted = {prefix + name for names, prefix in ACCEPTED for name in names}
    assert sorted(accepted - table) == [], "fields accepted without a decision"
    assert sorted(table - accepted) == [], "decisions for fields the parser does not accept"


def test_the_value_sources_of_env_are_all_described() -> None:
    row = next(r for r in podfields.all_fields() if r.path == podfields.ENV + "valueFrom")
    assert all(source in row.note for source in envspecs.VALUE_SOURCES)


def test_docs_podspec_md_is_the_rendered_table() -> None:
    assert DOC.read_text() == podfields.render_markdown(), (
        "docs/podspec.md is stale: run "
        "`.venv/bin/python -m nodelet.model.parsing.podfields > docs/podspec.md`")


def pod(spec: dict[str, Any] | None = None, container: dict[str, Any] | None = None,
        resources: dict[str, Any] | None = None,
        lifecycle: dict[str, Any] | None = None) -> dict[str, Any]:
    main = {"name": "c", "image": "busybox", **(container or {})}
    if resources:
        main["resources"] = resources
    if lifecycle:
        main["lifecycle"] = lifecycle
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [main], **(spec or {})}}


# No field of v1.37 is refused any more; the mechanism stays for the next one, tested with a
# row marked refused for the test (a field nodelet honours, `overhead` and a container's
# `resources.claims`).
SPEC_ROW = podfields.Field("spec.overhead", "refused", "overhead refused here", "spec")
RESOURCES_ROW = podfields.Field("spec.containers[*].resources.claims", "refused",
                                "claims refused here", "resources")


@pytest.fixture
def refusing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podfields, "TABLE", (*podfields.TABLE, SPEC_ROW, RESOURCES_ROW))


def test_no_field_is_refused_today() -> None:
    assert [r.path for r in podfields.TABLE if r.refused_in] == []


@pytest.mark.usefixtures("refusing")
def test_a_refused_field_is_refused_with_the_tables_message() -> None:
    with pytest.raises(manifests.UnsupportedError) as info:
        manifests.pod_from_object(pod({"overhead": {"cpu": "100m"}}), node_name="n")
    assert (info.value.path, info.value.message) == ("spec.overhead", SPEC_ROW.note)


@pytest.mark.parametrize(("mount", "error"), [
    ({"readOnly": True, "recursiveReadOnly": "IfPossible"}, None),
    ({"readOnly": True, "recursiveReadOnly": "Disabled"}, None),
    ({"recursiveReadOnly": "IfPossible"}, "may only be specified when readOnly is true"),
    ({"readOnly": True, "recursiveReadOnly": "Sometimes"}, "Disabled, IfPossible, Enabled"),
    ({"readOnly": True, "recursiveReadOnly": "IfPossible", "mountPropagation":
      "HostToContainer"}, "mountPropagation is None"),
    # Accepted when read: whether the runtime can is decided on the node (tests/agent).
    ({"readOnly": True, "recursiveReadOnly": "Enabled"}, None),
])
def test_recursive_read_only(mount: dict[str, Any], error: str | None) -> None:
    obj = pod({"volumes": [{"name": "v", "emptyDir": {}}]},
              {"volumeMounts": [{"name": "v", "mountPath": "/v", **mount}]})
    if error is None:
        parsed = manifests.pod_from_object(obj, node_name="n")
        mounted = parsed.spec.containers[0].volume_mounts[0]
        assert mounted.read_only and mounted.recursive_read_only == mount["recursiveReadOnly"]
        return
    with pytest.raises(manifests.ManifestError) as info:
        manifests.pod_from_object(obj, node_name="n")
    assert error in str(info.value)
    assert info.value.path == "spec.containers[0].volumeMounts[0].recursiveReadOnly"


@pytest.mark.usefixtures("refusing")
def test_an_api_pod_with_refused_fields_is_kept_for_admission_to_refuse() -> None:
    obj = pod({"overhead": {"cpu": "100m"},
               "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]},
              resources={"claims": [{"name": "gpu"}]})
    obj["metadata"]["uid"] = "u-1"
    parsed = manifests.pod_from_object(obj, node_name="n", source="api", strict=False)
    assert [path for path, _ in parsed.refused] == [
        "spec.overhead", "spec.containers[0].resources.claims"]
    rejection = admission.admit(parsed, admission.Node(labels={}))
    assert rejection is not None and rejection.reason == "UnsupportedPodSpec"
    assert rejection.message.startswith("spec.overhead: overhead refused here")
    clean = dict(obj, spec={"containers": [{"name": "c", "image": "busybox"}]})
    parsed = manifests.pod_from_object(clean, node_name="n", source="api", strict=False)
    assert parsed.refused == () and admission.admit(parsed, admission.Node(labels={})) is None


def test_container_restart_rules_are_read_with_both_actions() -> None:
    """ContainerRestartRules (beta, on in 1.37): a regular container's restartPolicy and its
    rules are read, `RestartAllContainers` (RestartAllContainersOnContainerExits, beta and on
    in 1.37) as well as `Restart` — in a manifest and in a pod the API server accepted, and
    admitted; a sidecar may carry them too."""
    rule = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
    parsed = manifests.pod_from_object(
        pod({}, {"restartPolicy": "Never", "restartPolicyRules": [rule]}), node_name="n")
    container = parsed.spec.containers[0]
    assert container.restart_policy == "Never"
    assert container.restart_rules == (pods.RestartRule("Restart", "In", (42,)),)
    every = {"restartPolicy": "Never",
             "restartPolicyRules": [dict(rule, action="RestartAllContainers")]}
    obj = pod({}, every)
    obj["metadata"]["uid"] = "u-1"
    parsed = manifests.pod_from_object(obj, node_name="n", source="api", strict=False)
    assert parsed.refused == ()
    assert admission.admit(parsed, admission.Node(labels={})) is None
    parsed = manifests.pod_from_object(pod({}, every), node_name="n")
    assert parsed.spec.containers[0].restart_rules == (
        pods.RestartRule("RestartAllContainers", "In", (42,)),)
