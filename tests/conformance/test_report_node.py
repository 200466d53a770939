"""report_node.py: the dry run's specs and files, each agent's JUnit, the verdict per failure;
report_selection.py: an agent's passes merged."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402  (tests/conformance/report.py)
import report_node  # noqa: E402  (tests/conformance/report_node.py)
import report_selection  # noqa: E402  (tests/conformance/report_selection.py)

NODE_FILE = "k8s.io/kubernetes@v1.37.2/test/e2e_node/mirror_pod_test.go"
COMMON_FILE = "k8s.io/kubernetes@v1.37.2/test/e2e/common/node/pods.go"
SPECS = [  # (containers, leaf, file)
    (["[sig-node] MirrorPod", "when create a mirror pod"],
     "should be updated when static pod updated [NodeConformance]", NODE_FILE),
    (["[sig-node] MirrorPod", "when create a mirror pod"],
     "should be recreated when mirror pod gracefully deleted [NodeConformance]", NODE_FILE),
    (["[sig-node] MirrorPod", ""], "should restart [Serial] [NodeConformance]", NODE_FILE),
    (["[sig-node] Pods"], "should get a host IP [NodeConformance]", COMMON_FILE),
]


def _name(i: int) -> str:
    containers, leaf, _ = SPECS[i]
    return report_node.spec_name(" ".join([*containers, leaf]))


def _ginkgo_json(path: Path, selected: set[int]) -> Path:
    reports: list[dict[str, Any]] = [
        {"ContainerHierarchyTexts": c, "LeafNodeText": leaf, "LeafNodeType": "It",
         "LeafNodeLocation": {"FileName": f, "LineNumber": i},
         "State": "passed" if i in selected else "skipped"}
        for i, (c, leaf, f) in enumerate(SPECS)]
    path.write_text(json.dumps([{"SpecReports": reports}]))
    return path


def _junit(path: Path, results: dict[int, str]) -> Path:
    cases = []
    for i, status in results.items():
        containers, leaf, _ = SPECS[i]
        name = "[It] " + " ".join([*containers, leaf])
        body = {"passed": "", "failed": f'<failure message="boom {i}">[FAILED] boom {i}</failure>',
                "skipped": '<skipped message="skipped"></skipped>'}[status]
        cases.append(f'<testcase name="{name}" classname="E2eNode Suite" status="{status}" '
                     f'time="1">{body}</testcase>')
    path.write_text(f'<testsuites><testsuite>{"".join(cases)}</testsuite></testsuites>')
    return path


def test_the_dry_run_counts_the_node_suites_files_and_the_selection(tmp_path: Path) -> None:
    dry = report_node.read_dry_run(everything=_ginkgo_json(tmp_path / "a.json", {0, 1, 2, 3}),
                                   selected=_ginkgo_json(tmp_path / "s.json", {0, 1}))
    assert (dry.all_count, dry.node_count, dry.selected_count) == (4, 3, 2)
    assert {s.file for s in dry.specs} == {"mirror_pod_test.go", "test/e2e/common/node/pods.go"}
    # The double space of an empty container text is one space in both reports.
    assert _name(2) == "[sig-node] MirrorPod should restart [Serial] [NodeConformance]"
    assert _name(2) in {s.name for s in dry.specs}


def test_each_failure_is_read_against_the_kubelets_column(tmp_path: Path) -> None:
    dry = report_node.read_dry_run(everything=_ginkgo_json(tmp_path / "a.json", {0, 1, 2, 3}),
                                   selected=_ginkgo_json(tmp_path / "s.json", {0, 1, 2}))
    ours = report_node.read_results(_junit(tmp_path / "n.xml", {0: "failed", 1: "failed"}), dry)
    theirs = report_node.read_results(_junit(tmp_path / "k.xml", {0: "failed", 1: "passed",
                                                                   2: "passed"}), dry)
    updated, recreated, restart = (_name(i) for i in range(3))
    assert "the kubelet fails it too" in report_node.verdict(updated, ours[updated],
                                                             theirs[updated])
    assert "nodelet's" in report_node.verdict(recreated, ours[recreated], theirs[recreated])
    assert ours[restart].status == "not run"  # absent from nodelet's JUnit
    doc = report_node.render(dry, {"nodelet": ours, "kubelet": theirs}, selection=["x"],
                             procs=1, times={"nodelet": 60.0}, commit="abc")
    assert "| mirror_pod_test.go | 3 | 2 | 3 | 0 / 2, 1 not run | 2 / 1 |" in doc
    assert "boom 1" in doc and "## nodelet's failures (2)" in doc


def test_a_rerun_replaces_the_results_of_the_specs_it_ran(tmp_path: Path) -> None:
    everything = _ginkgo_json(tmp_path / "a.json", {0, 1, 2, 3})
    selected = _ginkgo_json(tmp_path / "s.json", {0, 1, 2})
    first = _junit(tmp_path / "n1.xml", {0: "failed", 1: "failed", 2: "passed"})
    rerun = _junit(tmp_path / "n2.xml", {1: "passed"})
    doc = tmp_path / "doc.md"
    report_node.main(["--dry-all", str(everything), "--dry-selected", str(selected),
                      "--junit", f"nodelet={first}", "--junit", f"nodelet={rerun}",
                      "--time", "nodelet=2.5", "--commit", "abc", "--doc", str(doc)])
    text = doc.read_text()
    assert "**2 passed, 1 failed, 0 skipped by the tests, 0 not run**" in text
    assert "nodelet 2.5 min" in text and "commit `abc`" in text


def test_a_selections_passes_merge_to_the_result_of_the_pass_that_ran_each_spec() -> None:
    def result(name: str, status: str) -> report.Result:
        return report.Result(name, status, 0, "")

    parallel = {"a": result("a", "passed"), "b": result("b", "skipped"),
                "c": result("c", "skipped"), "d": result("d", "not run")}
    serial = {"a": result("a", "skipped"), "b": result("b", "failed"),
              "c": result("c", "skipped"), "d": result("d", "not run")}
    merged = report_selection.merged(parallel, serial)
    assert {n: r.status for n, r in merged.items()} == {
        "a": "passed", "b": "failed", "c": "skipped", "d": "not run"}
