#!/usr/bin/env python3
"""The node suite's JUnit, one file per agent → docs/conformance-node.md, two columns per spec.

    tests/conformance/report_node.py --dry-all ALL.json --dry-selected SELECTED.json
        --junit nodelet=JUNIT.xml --junit kubelet=JUNIT.xml [--doc docs/conformance-node.md]

The specs come from ginkgo's dry-run JSON reports (run_node.py writes them): every
`[NodeConformance]` spec of `e2e_node.test` with its file, and which of them the run's
selection holds. Each agent's result for each selected spec comes from the JUnit file the
suite wrote for that agent (tests/conformance/report.py reads it); a selected spec absent
from it, or left out by an interrupted run, is "not run". A failure of nodelet is read against
the kubelet's column: the kubelet passed it here, so it is nodelet's; the kubelet failed it
too, so it is this machine's or this harness's limit. tests/conformance/notes_node.py adds
what people found when they read a failure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notes_node
import report  # tests/conformance/report.py: JUnit reading

MARK = report.MARK
# The node suite's own files (what the focus-file default selects); the binary also holds
# test/e2e/common's specs.
NODE_DIR = "/test/e2e_node/"
# The presubmit's skip, to count what it would run whatever this run selects.
PRESUBMIT_SKIP = re.compile(r"\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]")
AGENTS = ("nodelet", "kubelet")


def spec_name(text: str) -> str:
    """One spelling for a spec in ginkgo's JSON and in the framework's JUnit (`[It] ` and
    ginkgo's double spaces between empty container texts dropped)."""
    return re.sub(r"\s+", " ", text.removeprefix("[It] ")).strip()


@dataclass(frozen=True)
class Spec:
    name: str
    file: str  # the file name under test/e2e_node/ (or the path below the module otherwise)
    node: bool  # in the node suite's own files
    selected: bool  # in this run's selection


@dataclass(frozen=True)
class DryRun:
    specs: tuple[Spec, ...]  # every [NodeConformance] spec of the binary

    @property
    def all_count(self) -> int:
        return len(self.specs)

    @property
    def node_count(self) -> int:
        return sum(s.node for s in self.specs)

    @property
    def selected_count(self) -> int:
        return sum(s.selected for s in self.specs)

    def selected(self) -> list[Spec]:
        return [s for s in self.specs if s.selected]


def spec_reports(report_file: Path) -> list[dict[str, Any]]:
    """The It specs of a ginkgo JSON report."""
    suites = json.loads(report_file.read_text())
    return [s for suite in suites for s in suite.get("SpecReports") or []
            if s.get("LeafNodeType") == "It"]


def _name_and_file(spec: Mapping[str, Any]) -> tuple[str, str]:
    texts = [*(spec.get("ContainerHierarchyTexts") or []), str(spec.get("LeafNodeText", ""))]
    path = str((spec.get("LeafNodeLocation") or {}).get("FileName", ""))
    return spec_name(" ".join(texts)), path


def _short_file(path: str) -> str:
    if NODE_DIR in path:
        return path.split(NODE_DIR, 1)[1]
    return re.sub(r"^.*?/test/", "test/", path)


def read_dry_run(*, everything: Path, selected: Path | Sequence[Path]) -> DryRun:
    """`everything`: the dry run focused on [NodeConformance] only; `selected`: the run's
    own selection (the dry runs of each of its passes). A spec the dry run would run is
    reported as passed."""
    chosen = {_name_and_file(s)[0] for path in ([selected] if isinstance(selected, Path)
                                                 else selected)
              for s in spec_reports(path) if s.get("State") == "passed"}
    specs = []
    for spec in spec_reports(everything):
        if spec.get("State") != "passed":
            continue
        name, path = _name_and_file(spec)
        specs.append(Spec(name, _short_file(path), NODE_DIR in path, name in chosen))
    return DryRun(tuple(sorted(specs, key=lambda s: (s.file, s.name))))


def read_results(junit: Path, dry: DryRun) -> dict[str, report.Result]:
    """The agent's result of each selected spec, by name (`results_by_name`)."""
    return results_by_name(junit, [s.name for s in dry.selected()])


def merged_results(junits: Sequence[Path], dry: DryRun) -> dict[str, report.Result]:
    """`read_results` of each JUnit (the passes of one run, or a rerun of some specs); a
    later file's result replaces an earlier one's for the specs it ran."""
    merged: dict[str, report.Result] = {}
    for junit in junits:
        found = read_results(junit, dry)
        merged = {name: r if r.status != "not run" or name not in merged else merged[name]
                  for name, r in found.items()}
    return merged


def results_by_name(junit: Path, names: Iterable[str], *,
                    mark: str = MARK) -> dict[str, report.Result]:
    """The result of each spec of `names` in `junit`; "not run" when the JUnit has none (no
    file: the run did not get as far as writing it). `mark`: what every spec's name holds
    (the JUnit's other test cases are the suite's own setup)."""
    found = {spec_name(r.name): r for r in report.read_junit([junit], mark=mark)} \
        if junit.exists() else {}
    return {name: found.get(name) or report.Result(name, "not run", 0, "") for name in names}


def summary(results: Mapping[str, report.Result]) -> str:
    c = Counter(r.status for r in results.values())
    return (f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped by the "
            f"tests, {c['not run']} not run")


def whose(theirs: report.Result | None) -> str:
    """Whose a spec nodelet did not pass is, by the kubelet's result of it."""
    if theirs is None or theirs.status == "not run":
        return "no kubelet result to compare with"
    if theirs.status == "skipped":
        return "the kubelet skipped it here (not applicable to it)"
    if theirs.status == "failed":
        return "this machine's or this harness's limit: the kubelet fails it too"
    return "nodelet's: the kubelet passes it here"


def verdict(name: str, ours: report.Result, theirs: report.Result | None) -> str:
    """One line on a spec nodelet did not pass: whose it is, and what it saw."""
    note = notes_node.note(name)
    return f"{whose(theirs)}; {note}" if note else whose(theirs)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _status_cell(result: report.Result | None) -> str:
    return "—" if result is None else result.status


def by_file_text(dry: DryRun) -> str:
    """The dry run's counts per node-suite file, as plain lines (for `--dry-run`)."""
    return "\n".join(f"  {f}: {n} [NodeConformance], {p} without Serial/Disruptive/Flaky/"
                     f"Slow, {s} selected" for f, n, p, s in _file_counts(dry))


def _file_counts(dry: DryRun) -> list[tuple[str, int, int, int]]:
    rows = []
    for file in sorted({s.file for s in dry.specs if s.node}):
        mine = [s for s in dry.specs if s.node and s.file == file]
        rows.append((file, len(mine), sum(not PRESUBMIT_SKIP.search(s.name) for s in mine),
                     sum(s.selected for s in mine)))
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def _agent_counts(results: Mapping[str, Mapping[str, report.Result]], names: list[str],
                  agent: str) -> str:
    got = results.get(agent)
    if got is None:
        return "—"
    c = Counter(got[n].status for n in names if n in got)
    extra = "".join(f", {c[s]} {s}" for s in ("skipped", "not run") if c[s])
    return f"{c['passed']} / {c['failed']}{extra}"


def _counts_section(dry: DryRun, results: Mapping[str, Mapping[str, report.Result]]
                    ) -> list[str]:
    presubmit = sum(s.node and not PRESUBMIT_SKIP.search(s.name) for s in dry.specs)
    lines = [
        "## What the suite holds (dry run)", "",
        f"- `[NodeConformance]` specs in `e2e_node.test`: **{dry.all_count}**; "
        f"{dry.all_count - dry.node_count} of them are test/e2e/common's (also in `e2e.test`, "
        f"docs/conformance.md), **{dry.node_count}** the node suite's own (test/e2e_node/).",
        f"- Of those {dry.node_count}, without `[Serial]`, `[Disruptive]`, `[Flaky]`, "
        f"`[Slow]` (the kubelet presubmit's set): **{presubmit}**.",
        f"- Selected by this run: **{dry.selected_count}**.", "",
        "| file | [NodeConformance] | presubmit set | this run | nodelet passed / failed "
        "| kubelet passed / failed |", "|---|---|---|---|---|---|",
    ]
    for file, total, pre, chosen in _file_counts(dry):
        names = [s.name for s in dry.specs if s.node and s.file == file and s.selected]
        lines.append(f"| {file} | {total} | {pre} | {chosen} | "
                     f"{_agent_counts(results, names, 'nodelet') if names else ''} | "
                     f"{_agent_counts(results, names, 'kubelet') if names else ''} |")
    return [*lines, ""]


def _failures_section(dry: DryRun, results: Mapping[str, Mapping[str, report.Result]]
                      ) -> list[str]:
    ours, theirs = results.get("nodelet", {}), results.get("kubelet", {})
    # A spec that skipped itself on nodelet but ran and passed on the kubelet found something
    # missing in nodelet as surely as a failure.
    failed = [s for s in dry.selected() if s.name in ours and (
        ours[s.name].status == "failed" or (ours[s.name].status == "skipped" and s.name in theirs
                                            and theirs[s.name].status == "passed"))]
    lines = [f"## nodelet's failures ({len(failed)})", "",
             "With the specs nodelet skipped that the kubelet ran and passed.", ""]
    if failed:
        lines += ["| file | spec | nodelet | kubelet | whose | what the spec saw (nodelet) |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {s.file} | {_cell(s.name)} | {ours[s.name].status} | "
                  f"{_status_cell(theirs.get(s.name))} | "
                  f"{_cell(verdict(s.name, ours[s.name], theirs.get(s.name)))} | "
                  f"{_cell(ours[s.name].message)} |" for s in failed]
        lines.append("")
    only_theirs = [s for s in dry.selected() if s.name in theirs
                   and theirs[s.name].status == "failed"
                   and (s.name not in ours or ours[s.name].status != "failed")]
    if only_theirs:
        lines += [f"## The kubelet's failures that nodelet does not share ({len(only_theirs)})",
                  "", "| file | spec | nodelet | what the spec saw (kubelet) |",
                  "|---|---|---|---|"]
        lines += [f"| {s.file} | {_cell(s.name)} | {_status_cell(ours.get(s.name))} | "
                  f"{_cell(theirs[s.name].message)} |" for s in only_theirs]
        lines.append("")
    return lines


def _every_spec(dry: DryRun, results: Mapping[str, Mapping[str, report.Result]]) -> list[str]:
    ours, theirs = results.get("nodelet", {}), results.get("kubelet", {})
    lines = ["## Every selected spec", "", "| file | spec | nodelet | kubelet |",
             "|---|---|---|---|"]
    lines += [f"| {s.file} | {_cell(s.name)} | {_status_cell(ours.get(s.name))} | "
              f"{_status_cell(theirs.get(s.name))} |" for s in dry.selected()]
    return [*lines, ""]


def render(dry: DryRun, results: Mapping[str, Mapping[str, report.Result]], *,
           selection: Sequence[str], procs: int, times: Mapping[str, float],
           commit: str) -> str:
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    timing = ", ".join(f"{k} {v / 60:.1f} min" for k, v in times.items()) or "not measured"
    head = [
        "# The node's own suite: e2e_node.test [NodeConformance] on nodelet and on the kubelet",
        "",
        "Written by `make conformance-node` (tests/conformance/run_node.py, then "
        "report_node.py) from the JUnit files of Kubernetes' node e2e suite (`e2e_node.test` "
        "of the pinned release, kube/versions.env), run with `--start-services=false` "
        "against a fresh real control plane with one node: nodelet, then the real kubelet "
        "v1.37.2 on a containerd of the same build and configuration, the same images from "
        "the same local registry. `make test` runs a subset of it on nodelet alone "
        "(tests/conformance/test_node_suite_subset.py).", "",
        f"- Last run: {today}, commit `{commit}`; wall time: {timing}.",
        f"- Selection: {'; '.join(f'`{part}`' for part in selection)}"
        f"{f', `--procs={procs}`' if procs else ''}.",
    ]
    head += [f"- {agent}: **{summary(got)}**." for agent, got in results.items()]
    head += ["", "A nodelet failure the kubelet shares is this machine's or this harness's "
             "limit; one the kubelet passes is nodelet's. The notes are people's, after "
             "reading the failure (tests/conformance/notes_node.py).", ""]
    if notes_node.HISTORY:
        head += ["Runs so far (newest last):", "", *[f"- {h}" for h in notes_node.HISTORY], ""]
    needs = ["## What the framework needs of the node", "",
             *[f"- {n}" for n in notes_node.NEEDS], ""]
    return "\n".join([*head, *_counts_section(dry, results), *needs,
                      *_failures_section(dry, results), *_every_spec(dry, results)])


def write_doc(doc: Path, dry: DryRun, results: Mapping[str, Mapping[str, report.Result]], *,
              selection: Sequence[str], procs: int, times: Mapping[str, float],
              commit: str) -> None:
    doc.write_text(render(dry, results, selection=selection, procs=procs, times=times,
                          commit=commit))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-all", type=Path, required=True)
    parser.add_argument("--dry-selected", type=Path, action="append", required=True,
                        help="the dry run of the selection; again for each pass")
    parser.add_argument("--junit", action="append", default=[], metavar="AGENT=FILE",
                        help="an agent's JUnit; again for the same agent: a later file's "
                             "results replace the earlier's for the specs it ran (a rerun of "
                             "some specs; say so in notes_node.HISTORY)")
    parser.add_argument("--time", action="append", default=[], metavar="AGENT=MINUTES",
                        help="an agent's wall time, for the report's header")
    parser.add_argument("--commit", help="the commit the runs were of (default: HEAD's)")
    parser.add_argument("--selection", default="(see the run)")
    parser.add_argument("--procs", type=int, default=0)
    parser.add_argument("--doc", type=Path)
    args = parser.parse_args(argv)
    dry = read_dry_run(everything=args.dry_all, selected=args.dry_selected)
    files: dict[str, list[Path]] = {}
    for item in args.junit:
        agent, _, path = item.partition("=")
        files.setdefault(agent, []).append(Path(path))
    results = {agent: merged_results(paths, dry) for agent, paths in files.items()}
    for agent, found in results.items():
        print(f"{agent}: {summary(found)}")
    times = {agent: float(minutes) * 60 for agent, _, minutes in
             (t.partition("=") for t in args.time)}
    if args.doc:
        write_doc(args.doc, dry, results, selection=[args.selection], procs=args.procs,
                  times=times, commit=args.commit or report.current_commit())
    return 0


if __name__ == "__main__":
    sys.exit(main())
