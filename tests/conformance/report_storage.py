#!/usr/bin/env python3
"""The storage suite's JUnit, one file per agent → docs/conformance-storage.md, two columns.

    tests/conformance/report_storage.py [--out test-artifacts/conformance-storage]
                                        [--doc docs/conformance-storage.md]

Reads what run_storage.py leaves under --out: ginkgo's dry-run JSON reports (`dry-all.json`:
every `[sig-storage]` spec of `e2e.test`; `dry-selected.json`: the ones the selection holds)
and, for each agent that ran, `<agent>/junit/junit_01.xml` (the suite's JUnit) and
`<agent>/run.json` (when, at which commit, with which selection). The specs are counted by
group: the suite's top container (`[sig-storage] PV Protection`), with its second level for
the driver suites (`In-tree Volumes [Driver: local] [LocalVolumeType: dir]`) and
`PersistentVolumes`/`PersistentVolumes-local`. A nodelet failure is read against the
kubelet's column (report_node.whose); notes_storage.py adds what people found, and why each
group not selected is left out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import notes_storage  # noqa: E402
import report  # noqa: E402  (tests/conformance/report.py: JUnit reading)
import report_node  # noqa: E402  (tests/conformance/report_node.py: names, verdicts)

MARK = "[sig-storage]"
MARK_RE = r"\[sig-storage\]"
AGENTS = ("nodelet", "kubelet")
# What a default selection leaves out whatever its focus (run_storage.SKIP without the
# gce-localssd type): counted per group as "runnable here".
EXCLUDED = re.compile(r"\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]|\[Feature:")
# Suites whose groups are named with their second container (a driver, a volume type, a
# context).
TWO_LEVEL = ("In-tree Volumes", "CSI Volumes", "PersistentVolumes", "PersistentVolumes-local")


@dataclass(frozen=True)
class Spec:
    name: str
    group: str
    selected: bool


@dataclass(frozen=True)
class DryRun:
    specs: tuple[Spec, ...]  # every [sig-storage] spec of the binary

    def selected(self) -> list[Spec]:
        return [s for s in self.specs if s.selected]

    def groups(self) -> list[str]:
        return sorted({s.group for s in self.specs})


@dataclass(frozen=True)
class Run:
    """One agent's run, as run.json records it."""

    agent: str
    commit: str
    started: str  # "YYYY-MM-DD HH:MM UTC"
    minutes: float  # the suite's wall time
    procs: int
    selection: tuple[str, ...]  # ginkgo's selection flags


def write_run(work: Path, run: Run) -> None:
    (work / "run.json").write_text(json.dumps(asdict(run), indent=1) + "\n")


def read_run(work: Path) -> Run | None:
    try:
        got = json.loads((work / "run.json").read_text())
    except (OSError, ValueError):
        return None
    return Run(**{**got, "selection": tuple(got.get("selection") or ())})


def group_of(spec: Mapping[str, Any]) -> str:
    texts = [str(t) for t in spec.get("ContainerHierarchyTexts") or []] or [""]
    top = texts[0].removeprefix(MARK).strip()
    if top in TWO_LEVEL and len(texts) > 1:
        return f"{top} {texts[1]}"
    return top


def _name(spec: Mapping[str, Any]) -> str:
    texts = [*(spec.get("ContainerHierarchyTexts") or []), str(spec.get("LeafNodeText", ""))]
    return report_node.spec_name(" ".join(texts))


def _would_run(report_file: Path) -> list[Mapping[str, Any]]:
    """The It specs a dry run reports as passed: the ones its selection holds."""
    return [s for s in report_node.spec_reports(report_file) if s.get("State") == "passed"]


def read_dry_run(out: Path) -> DryRun:
    chosen = {_name(s) for s in _would_run(out / "dry-selected.json")}
    specs = [Spec(_name(s), group_of(s), _name(s) in chosen)
             for s in _would_run(out / "dry-all.json")]
    return DryRun(tuple(sorted(specs, key=lambda s: (s.group, s.name))))


def read_results(out: Path, dry: DryRun) -> dict[str, dict[str, report.Result]]:
    """Each agent's result of each selected spec, for the agents that ran (their run.json)."""
    names = [s.name for s in dry.selected()]
    return {agent: report_node.results_by_name(out / agent / "junit" / "junit_01.xml", names,
                                               mark=MARK)
            for agent in AGENTS if (out / agent / "run.json").exists()}


def summary(results: Mapping[str, report.Result]) -> str:
    return report_node.summary(results)


def counts_text(dry: DryRun) -> str:
    runnable = sum(not EXCLUDED.search(s.name) for s in dry.specs)
    lines = [f"dry run: {len(dry.specs)} [sig-storage] specs, {runnable} without "
             f"[Serial]/[Disruptive]/[Flaky]/[Slow]/[Feature:*], {len(dry.selected())} "
             f"selected"]
    for group in dry.groups():
        mine = [s for s in dry.specs if s.group == group]
        if chosen := sum(s.selected for s in mine):
            lines.append(f"  {group}: {len(mine)} specs, {chosen} selected")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _status_cell(result: report.Result | None) -> str:
    return "—" if result is None else result.status


def _agent_counts(results: Mapping[str, Mapping[str, report.Result]], names: list[str],
                  agent: str) -> str:
    got = results.get(agent)
    if got is None:
        return "—"
    c = Counter(got[n].status for n in names if n in got)
    extra = "".join(f", {c[s]} {s}" for s in ("skipped", "not run") if c[s])
    return f"{c['passed']} / {c['failed']}{extra}"


def _selected_groups(dry: DryRun, results: Mapping[str, Mapping[str, report.Result]]
                     ) -> list[str]:
    runnable = sum(not EXCLUDED.search(s.name) for s in dry.specs)
    lines = [
        "## What the suite holds (dry run)", "",
        f"- `[sig-storage]` specs in `e2e.test`: **{len(dry.specs)}**; without `[Serial]`, "
        f"`[Disruptive]`, `[Flaky]`, `[Slow]`, `[Feature:*]`: **{runnable}**.",
        f"- Selected: **{len(dry.selected())}**, in the groups below.", "",
        "| group | specs | without Serial/Disruptive/Flaky/Slow/Feature | selected "
        "| nodelet passed / failed | kubelet passed / failed |", "|---|---|---|---|---|---|",
    ]
    for group in dry.groups():
        mine = [s for s in dry.specs if s.group == group]
        names = [s.name for s in mine if s.selected]
        if names:
            lines.append(f"| {_cell(group)} | {len(mine)} | "
                         f"{sum(not EXCLUDED.search(s.name) for s in mine)} | {len(names)} | "
                         f"{_agent_counts(results, names, 'nodelet')} | "
                         f"{_agent_counts(results, names, 'kubelet')} |")
    return [*lines, ""]


def _left_out(dry: DryRun) -> list[str]:
    lines = ["## The groups left out, and why", "",
             "Every other `[sig-storage]` group of the suite, with its number of specs "
             "(without Serial/Disruptive/Flaky/Slow/Feature in brackets).", "",
             "| group | specs | why not here |", "|---|---|---|"]
    for group in dry.groups():
        mine = [s for s in dry.specs if s.group == group]
        if any(s.selected for s in mine):
            continue
        lines.append(f"| {_cell(group)} | {len(mine)} "
                     f"({sum(not EXCLUDED.search(s.name) for s in mine)}) | "
                     f"{_cell(notes_storage.why_not(group))} |")
    return [*lines, ""]


def verdict(name: str, theirs: report.Result | None) -> str:
    note = notes_storage.note(name)
    whose = report_node.whose(theirs)
    return f"{whose}; {note}" if note else whose


def _failures(dry: DryRun, results: Mapping[str, Mapping[str, report.Result]]) -> list[str]:
    ours, theirs = results.get("nodelet", {}), results.get("kubelet", {})
    # A spec that skipped itself on nodelet but ran and passed on the kubelet found something
    # missing in nodelet as surely as a failure.
    failed = [s for s in dry.selected() if s.name in ours and (
        ours[s.name].status == "failed" or (ours[s.name].status == "skipped" and s.name in theirs
                                            and theirs[s.name].status == "passed"))]
    lines = []
    if ours:
        lines += [f"## nodelet's failures ({len(failed)})", "",
                  "With the specs nodelet skipped that the kubelet ran and passed.", ""]
    if failed:
        lines += ["| group | spec | kubelet | whose | what the spec saw (nodelet) |",
                  "|---|---|---|---|---|"]
        lines += [f"| {_cell(s.group)} | {_cell(s.name)} | {_status_cell(theirs.get(s.name))} "
                  f"| {_cell(verdict(s.name, theirs.get(s.name)))} | "
                  f"{_cell(ours[s.name].message)} |" for s in failed]
        lines.append("")
    shown = {s.name for s in failed}
    theirs_failed = [s for s in dry.selected() if s.name in theirs and s.name not in shown
                     and theirs[s.name].status == "failed"]
    if theirs_failed:
        lines += [f"## The kubelet's failures ({len(theirs_failed)})", "",
                  "Besides those above: this machine's or this harness's limits, or the "
                  "kubelet's.", "",
                  "| group | spec | nodelet | note | what the spec saw (kubelet) |",
                  "|---|---|---|---|---|"]
        lines += [f"| {_cell(s.group)} | {_cell(s.name)} | {_status_cell(ours.get(s.name))} | "
                  f"{_cell(notes_storage.note(s.name))} | {_cell(theirs[s.name].message)} |"
                  for s in theirs_failed]
        lines.append("")
    return lines


def _every_spec(dry: DryRun, results: Mapping[str, Mapping[str, report.Result]]) -> list[str]:
    ours, theirs = results.get("nodelet", {}), results.get("kubelet", {})
    lines = ["## Every selected spec", "", "| group | spec | nodelet | kubelet |",
             "|---|---|---|---|"]
    lines += [f"| {_cell(s.group)} | {_cell(s.name.removeprefix(MARK + ' '))} | "
              f"{_status_cell(ours.get(s.name))} | {_status_cell(theirs.get(s.name))} |"
              for s in dry.selected()]
    return [*lines, ""]


def _run_line(run: Run | None, agent: str, got: Mapping[str, report.Result] | None) -> str:
    if run is None or got is None:
        return f"- {agent}: not run yet."
    return (f"- {agent}: **{summary(got)}**; run {run.started}, commit `{run.commit}`, "
            f"{run.minutes} min with `--procs={run.procs}`.")


def render(dry: DryRun, runs: Mapping[str, Run | None],
           results: Mapping[str, Mapping[str, report.Result]]) -> str:
    selections = {r.selection for r in runs.values() if r is not None}
    selection = " ".join(next(iter(selections))) if len(selections) == 1 else \
        "; ".join(f"{a}: `{' '.join(r.selection)}`" for a, r in runs.items() if r)
    head = [
        "# Kubernetes' storage tests: e2e.test [sig-storage] on nodelet and on the kubelet", "",
        "Written by `make conformance-storage` (tests/conformance/run_storage.py, then "
        "report_storage.py) from the JUnit files of Kubernetes' e2e suite (`e2e.test` of the "
        "pinned release, kube/versions.env), run with `--provider=local` against a fresh real "
        "control plane (with the PV binder, attach-detach, ephemeral-volume and protection "
        "controllers) whose only node is nodelet, then the real kubelet v1.37.2 on a "
        "containerd of the same build and configuration; the same images from the same local "
        "registry, the same selection and order.", "",
        f"- Selection: `{selection}`." if selections else "- Selection: not run yet.",
        *[_run_line(runs.get(a), a, results.get(a)) for a in AGENTS], "",
        "A nodelet failure the kubelet shares is this machine's or this harness's limit; one "
        "the kubelet passes is nodelet's. The notes are people's, after reading the failure "
        "(tests/conformance/notes_storage.py).", "",
    ]
    if notes_storage.HISTORY:
        head += ["Runs so far (newest last):", "",
                 *[f"- {h}" for h in notes_storage.HISTORY], ""]
    needs = ["## What the storage specs need of the node and the harness", "",
             *[f"- {n}" for n in notes_storage.NEEDS], ""]
    return "\n".join([*head, *_selected_groups(dry, results), *needs,
                      *_failures(dry, results), *_every_spec(dry, results), *_left_out(dry)])


def write_doc(doc: Path, out: Path) -> dict[str, dict[str, report.Result]]:
    dry = read_dry_run(out)
    results = read_results(out, dry)
    runs = {agent: read_run(out / agent) for agent in AGENTS}
    doc.write_text(render(dry, runs, results))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=HERE.parent.parent / "test-artifacts" / "conformance-storage")
    parser.add_argument("--doc", type=Path,
                        default=HERE.parent.parent / "docs" / "conformance-storage.md")
    args = parser.parse_args(argv)
    results = write_doc(args.doc, args.out)
    for agent, got in results.items():
        print(f"{agent}: {summary(got)}")
    print(f"wrote {args.doc} ({datetime.datetime.now(datetime.UTC):%H:%M UTC})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
