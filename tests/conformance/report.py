#!/usr/bin/env python3
"""The e2e suite's JUnit reports → docs/conformance.md and the `N passed, M failed` line.

    tests/conformance/report.py JUNIT.xml [JUNIT.xml ...] [--doc docs/conformance.md]

Only `[NodeConformance]` specs are counted. A spec in several reports (the parallel phase
skips the `[Serial]` ones that the serial phase runs) counts once, by its most telling result:
failed over passed over skipped. Every count comes from the JUnit files the suite wrote; the
reasons for the specs not passed are the suite's own failure or skip messages, with the
notes in tests/conformance/notes.py (what in nodelet the test found, or why it does not apply
to this node) added where one matches.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support
sys.path.insert(0, str(Path(__file__).resolve().parent))
import notes

from support.checkout import current_commit

REPO = Path(__file__).resolve().parents[2]
MARK = "[NodeConformance]"
RANK = {"failed": 4, "passed": 3, "skipped": 2, "not run": 1}
# ginkgo's JUnit marks a spec that the focus/skip/labels left out as skipped with this bare
# message; a spec skipped by the test itself (e2eskipper) says why after "skipped - ".
NOT_SELECTED = "skipped"
STATUSES = ("passed", "failed", "skipped", "not run")
MESSAGE_CHARS = 400


@dataclass(frozen=True)
class Result:
    name: str
    status: str  # passed, failed, skipped (by the test) or "not run" (not selected)
    seconds: float
    message: str  # the first lines of the failure or skip text; "" when passed


def _status(case: ET.Element) -> tuple[str, str]:
    for tag in ("failure", "error"):
        found = case.find(tag)
        if found is not None:
            return "failed", (found.get("message") or found.text or "").strip()
    skipped = case.find("skipped")
    if skipped is not None:
        text = (skipped.get("message") or skipped.text or "").strip()
        return ("not run" if text == NOT_SELECTED else "skipped"), text
    return "passed", ""


def _short(text: str) -> str:
    """The failure's gist: ginkgo's full text starts with the `[FAILED]` line and location."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    failed = [ln for ln in lines if ln.startswith("[FAILED]") or ln.startswith("[PANICKED]")]
    gist = " ".join(failed[:2] or lines[:3])
    gist = re.sub(r"\s+", " ", gist)
    return gist[:MESSAGE_CHARS] + ("…" if len(gist) > MESSAGE_CHARS else "")


def read_junit(files: Iterable[Path], *, mark: str = MARK) -> list[Result]:
    """The specs of the reports whose name holds `mark` (the NodeConformance ones), each once,
    sorted by name."""
    best: dict[str, Result] = {}
    for file in files:
        for case in ET.parse(file).getroot().iter("testcase"):
            name = case.get("name", "")
            if mark not in name:
                continue
            status, text = _status(case)
            result = Result(name, status, float(case.get("time") or 0), _short(text))
            old = best.get(name)
            if old is None or RANK[status] > RANK[old.status]:
                best[name] = result
    return sorted(best.values(), key=lambda r: r.name)


def counts(results: Sequence[Result]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in STATUSES}


def summary(results: Sequence[Result]) -> str:
    c = counts(results)
    return (f"{c['passed']} passed, {c['failed']} failed ({c['skipped']} skipped by the tests, "
            f"{c['not run']} not selected)")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(results: Sequence[Result], *, list_not_run: bool = True) -> list[str]:
    lines = []
    for status in ("failed", "skipped", "passed", "not run"):
        chosen = [r for r in results if r.status == status]
        if not chosen:
            continue
        lines += [f"### {status.capitalize()} ({len(chosen)})", ""]
        if status == "not run" and not list_not_run:
            lines += ["Not listed: the node suite's other [NodeConformance] specs, which this "
                      "phase's focus leaves out.", ""]
            continue
        if status in ("passed", "not run"):
            lines += [f"- {r.name}" for r in chosen]
        else:
            lines += ["| test | the suite's message | note |", "|---|---|---|"]
            lines += [f"| {_cell(r.name)} | {_cell(r.message)} | {_cell(notes.note(r.name))} |"
                      for r in chosen]
        lines.append("")
    return lines


def render(results: Sequence[Result], *, times: dict[str, float], focus: str,
           skip: str, node_results: Sequence[Result] = (), node_focus: str = "",
           commit: str = "") -> str:
    c = counts(results)
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    timing = ", ".join(f"{k} {v / 60:.1f} min" for k, v in times.items())
    lines = [
        "# Kubernetes [NodeConformance] e2e tests on nodelet",
        "",
        "Written by `make conformance` (tests/conformance/run.py, then report.py) from the JUnit "
        "files of Kubernetes' own e2e suite (`e2e.test` of the pinned release, kube/versions.env), "
        "run against the real control plane with nodelet as the only node.",
        "",
        f"- Last run: {today}, commit `{commit or current_commit()}`; wall time: "
        f"{timing or 'not measured'}.",
        f"- Selection: focus `{focus}`, skip `{skip}` (parallel phase), then the `[Serial]` ones.",
        f"- **{c['passed']} passed, {c['failed']} failed**, {c['skipped']} skipped by the tests "
        f"themselves, {c['not run']} not selected by this run.",
        "",
        "The counts and messages come from the suite's JUnit; the notes say what a failure found "
        "in nodelet or why a test does not apply here (tests/conformance/notes.py).",
        "",
    ]
    if notes.HISTORY:
        lines += ["Runs so far (newest last):", "", *[f"- {h}" for h in notes.HISTORY], ""]
    lines += ["## The e2e suite (e2e.test)", "", *_table(results)]
    if node_results:
        nc = counts(node_results)
        lines += ["## The node e2e suite (e2e_node.test)", "",
                  f"Focus `{node_focus}`, run with `--start-services=false "
                  f"--prepull-images=false` against the same plane and node (its "
                  "`--bearer-token` authenticated by kube-apiserver's `--token-auth-file`, in "
                  "`system:masters` as the suite's own services do): "
                  f"**{nc['passed']} passed, {nc['failed']} failed**, {nc['skipped']} skipped.",
                  "", *_table(node_results, list_not_run=False)]
    return "\n".join(lines)


def write_doc(doc: Path, results: Sequence[Result], *, times: dict[str, float], focus: str,
              skip: str, node_results: Sequence[Result] = (), node_focus: str = "",
              commit: str = "") -> None:
    doc.write_text(render(results, times=times, focus=focus, skip=skip,
                          node_results=node_results, node_focus=node_focus, commit=commit))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", nargs="+", type=Path)
    parser.add_argument("--doc", type=Path, help="write this Markdown report too")
    args = parser.parse_args(argv)
    results = read_junit(args.junit)
    if args.doc:
        write_doc(args.doc, results, times={}, focus="(see the run)", skip="(see the run)")
    print(summary(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
