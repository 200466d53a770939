"""nodelet as a Kubernetes 1.37 node: the version it reports and 1.37's feature-gate locks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nodelet import cli, settings
from nodelet.model.core import nodes

# semver 2.0.0: MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]; build metadata is ignored in comparisons.
SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")


def test_kubelet_version_compares_as_the_release() -> None:
    # The e2e suite and kubectl parse kubeletVersion as semver: a pre-release suffix
    # (v1.37.0-nodelet...) compares older than v1.37.0; build metadata does not count.
    match = SEMVER.match(nodes.KUBELET_VERSION)
    assert match is not None, nodes.KUBELET_VERSION
    major, minor, patch, prerelease, build = match.groups()
    assert (int(major), int(minor), int(patch)) == (1, 37, 2)
    assert prerelease is None
    assert build is not None and build.startswith("nodelet.")


def test_a_locked_gate_is_refused_with_the_kubelet_s_message() -> None:
    with pytest.raises(settings.SettingsError) as refused:
        settings.parse_feature_gates("PodReadyToStartContainersCondition=false")
    assert str(refused.value) == ("cannot set feature gate PodReadyToStartContainersCondition "
                                  "to false, feature is locked to true")


def test_a_locked_gate_may_be_set_to_its_locked_value() -> None:
    gates = settings.parse_feature_gates("PodReadyToStartContainersCondition=true")
    assert gates.pod_ready_to_start_containers


def test_the_legacy_name_stays_an_explicit_option() -> None:
    gates = settings.parse_feature_gates("PodHasNetworkCondition=true")
    assert gates.pod_has_network and gates.pod_ready_to_start_containers


def test_the_command_line_and_the_config_file_refuse_it_too(tmp_path: Path) -> None:
    message = "cannot set feature gate PodReadyToStartContainersCondition to false"
    with pytest.raises(settings.SettingsError, match=message):
        cli.settings_from_argv(["run", "--data-dir", str(tmp_path), "--feature-gates",
                                "PodReadyToStartContainersCondition=false"])
    config = tmp_path / "kubelet.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                      "featureGates:\n  PodReadyToStartContainersCondition: false\n")
    with pytest.raises(settings.SettingsError, match=message):
        cli.settings_from_argv(["run", "--data-dir", str(tmp_path), "--config", str(config)])
