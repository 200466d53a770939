"""report_storage.py: the dry run's groups, each agent's JUnit and run record, the verdicts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report_storage  # noqa: E402  (tests/conformance/report_storage.py)

LOCAL = ["[sig-storage] In-tree Volumes", "[Driver: local] [LocalVolumeType: dir]",
         "[Testpattern: Pre-provisioned PV (default fs)]", "subPath"]
SPECS = [  # (containers, leaf)
    (LOCAL, "should support existing directory"),
    (LOCAL, "should support file as subpath [LinuxOnly]"),
    (["[sig-storage] PV Protection"], "Verify that PV bound to a PVC is not removed immediately"),
    (["[sig-storage] In-tree Volumes", "[Driver: nfs]", "[Testpattern: Inline-volume (default fs)]",
      "volumes"], "should store data"),
    (["[sig-storage] HostPathType Socket"], "Should be able to mount socket 'asocket' [Slow]"),
]


def _name(i: int) -> str:
    containers, leaf = SPECS[i]
    return " ".join([*containers, leaf])


def _ginkgo_json(path: Path, selected: set[int]) -> None:
    reports: list[dict[str, Any]] = [
        {"ContainerHierarchyTexts": c, "LeafNodeText": leaf, "LeafNodeType": "It",
         "State": "passed" if i in selected else "skipped"}
        for i, (c, leaf) in enumerate(SPECS)]
    path.write_text(json.dumps([{"SpecReports": reports}]))


def _agent(out: Path, agent: str, results: dict[int, str]) -> None:
    work = out / agent
    (work / "junit").mkdir(parents=True)
    cases = []
    for i, status in results.items():
        body = {"passed": "", "failed": f'<failure message="boom {i}">[FAILED] boom {i}</failure>',
                "skipped": '<skipped message="skipped - no default class"></skipped>'}[status]
        cases.append(f'<testcase name="[It] {_name(i)}" status="{status}">{body}</testcase>')
    (work / "junit" / "junit_01.xml").write_text(
        f'<testsuites><testsuite>{"".join(cases)}</testsuite></testsuites>')
    report_storage.write_run(work, report_storage.Run(
        agent=agent, commit="abc1234", started="2026-12-06 21:00 UTC", minutes=12.5, procs=2,
        selection=("--focus=x", "--skip=y")))


def _out(tmp_path: Path) -> Path:
    _ginkgo_json(tmp_path / "dry-all.json", {0, 1, 2, 3, 4})
    _ginkgo_json(tmp_path / "dry-selected.json", {0, 1, 2})
    return tmp_path


def test_the_dry_run_groups_every_storage_spec(tmp_path: Path) -> None:
    dry = report_storage.read_dry_run(_out(tmp_path))
    assert len(dry.specs) == 5 and len(dry.selected()) == 3
    assert dry.groups() == ["HostPathType Socket", "In-tree Volumes [Driver: local] "
                            "[LocalVolumeType: dir]", "In-tree Volumes [Driver: nfs]",
                            "PV Protection"]
    text = report_storage.counts_text(dry)
    assert "5 [sig-storage] specs, 4 without" in text and "PV Protection: 1 specs, 1 selected" \
        in text


def test_each_column_comes_from_its_own_run_and_failures_are_read_against_the_kubelet(
        tmp_path: Path) -> None:
    out = _out(tmp_path)
    _agent(out, "kubelet", {0: "passed", 1: "failed", 2: "passed"})
    doc = tmp_path / "doc.md"
    results = report_storage.write_doc(doc, out)
    assert set(results) == {"kubelet"}  # nodelet has not run
    text = doc.read_text()
    assert "- nodelet: not run yet." in text
    assert "- kubelet: **2 passed, 1 failed, 0 skipped by the tests, 0 not run**" in text
    assert "## The kubelet's failures (1)" in text and "boom 1" in text
    _agent(out, "nodelet", {0: "failed", 1: "failed"})
    text = (report_storage.write_doc(doc, out), doc.read_text())[1]
    assert "## nodelet's failures (2)" in text
    assert "nodelet's: the kubelet passes it here" in text  # spec 0
    assert "the kubelet fails it too" in text  # spec 1
    assert "| PV Protection | 1 | 1 | 1 | 0 / 0, 1 not run | 1 / 0 |" in text
    assert "| In-tree Volumes [Driver: nfs] | 1 (1) | needs the NFS server image" in text
    assert "| HostPathType Socket | 1 (0) |" in text
