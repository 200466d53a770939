"""A selection of the node suite beyond its [NodeConformance] specs (the DRA specs, say), run
by run_node.py on both agents → a document with a column per agent and a line on each spec
nodelet did not pass (whose it is, by the kubelet's result, and notes_node's note).

    .venv/bin/python tests/conformance/report_selection.py \
        --dry-selected OUT/dry-selected-serial.json \
        --junit nodelet=OUT/nodelet/junit-serial/junit_01.xml \
        --junit kubelet=OUT2/kubelet/junit-serial/junit_01.xml \
        (--junit again for an agent's other pass: a spec's result is that of the pass that
        ran it)
        --title "..." --command "..." --doc docs/conformance-node-dra.md
"""

from __future__ import annotations

import argparse
import subprocess
from collections import Counter
from datetime import date
from pathlib import Path

import report
import report_node

AGENTS = ("nodelet", "kubelet")


def selected(paths: list[Path]) -> list[str]:
    """The specs the dry runs of the selection would run, by name."""
    return sorted({report_node._name_and_file(s)[0] for path in paths
                   for s in report_node.spec_reports(path) if s.get("State") == "passed"})


# What a spec's result says of it, least first: a pass that did not select it shows it skipped.
_WEIGHT = {"not run": 0, "skipped": 1, "passed": 2, "failed": 2}


def merged(earlier: dict[str, report.Result],
           later: dict[str, report.Result]) -> dict[str, report.Result]:
    """The results of two passes of one agent (parallel, serial): for each spec the one that
    ran it (passed or failed) over one that skipped it, over none."""
    return {name: r if name not in earlier or _WEIGHT[r.status] >= _WEIGHT[earlier[name].status]
            else earlier[name] for name, r in later.items()}


def render(names: list[str], results: dict[str, dict[str, report.Result]], *, title: str,
           command: str, commit: str, times: dict[str, str]) -> str:
    lines = [f"# {title}", "",
             "Written by tests/conformance/report_selection.py from the JUnit files of "
             "`e2e_node.test` (the pinned release) run by tests/conformance/run_node.py, each "
             "agent joined alone to a fresh real control plane, the same harness and images "
             "for both.", "",
             f"- Last run: {date.today().isoformat()}, commit `{commit}`.",
             f"- Command: `{command}`.",
             f"- Selected: **{len(names)}** specs."]
    for agent, found in results.items():
        counts = Counter(r.status for r in found.values())
        spent = f" in {times[agent]} min" if agent in times else ""
        lines.append(f"- {agent}: **{counts['passed']} passed, {counts['failed']} failed, "
                     f"{counts['skipped']} skipped, {counts['not run']} not run**{spent}.")
    ours, theirs = results.get("nodelet", {}), results.get("kubelet", {})
    lines += ["", "A nodelet failure the kubelet shares is this machine's or this harness's "
              "limit; one the kubelet passes is nodelet's. The notes are people's, after "
              "reading the failure (tests/conformance/notes_node.py).", "",
              "| spec | nodelet | kubelet | why nodelet did not pass |", "|---|---|---|---|"]
    for name in names:
        mine, other = ours.get(name), theirs.get(name)
        why = report_node.verdict(name, mine, other) \
            if mine is not None and mine.status != "passed" else ""
        lines.append(f"| {report_node._cell(name)} | {report_node._status_cell(mine)} | "
                     f"{report_node._status_cell(other)} | {report_node._cell(why)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-selected", type=Path, action="append", required=True)
    parser.add_argument("--junit", action="append", default=[], metavar="AGENT=FILE")
    parser.add_argument("--time", action="append", default=[], metavar="AGENT=MINUTES")
    parser.add_argument("--title", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--commit", default="")
    parser.add_argument("--doc", type=Path, required=True)
    parser.add_argument("--mark", default="[sig-node]",
                        help="what every selected spec's name holds (default: %(default)s)")
    args = parser.parse_args()
    names = selected(args.dry_selected)
    results: dict[str, dict[str, report.Result]] = {}
    for item in args.junit:
        agent, _, path = item.partition("=")
        found = report_node.results_by_name(Path(path), names, mark=args.mark)
        results[agent] = merged(results.get(agent, {}), found)
    commit = args.commit or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        check=True).stdout.strip()
    times = dict(item.partition("=")[::2] for item in args.time)
    args.doc.write_text(render(names, results, title=args.title, command=args.command,
                               commit=commit, times=times))
    for agent, found in results.items():
        print(f"{agent}: {report_node.summary(found)}")


if __name__ == "__main__":
    main()
