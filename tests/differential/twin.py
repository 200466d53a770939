"""Run the catalogue on one agent, and compare what two agents showed.

`run_catalogue` writes every scenario's manifest into the agent's manifest dir at once (a
scenario with `after` once that one has settled), polls the agent's `/pods` until each
scenario's `settled` check holds, and keeps, at that moment, its normalised status and the
order its conditions turned (`Observation`); once all have settled, the events of each. A
scenario still unsettled at the deadline (60 s; the slowest settled after 23 s, on the
kubelet: a 10 s image back-off) keeps what was last seen, `settled` False. Then
every manifest is removed and the run waits until the agent has no pod left. `compare`
gives the differences of two observations of a scenario: none means identical.

An agent here is `Twin`: its manifest dir, node name, and two readers through the interface a
user has — its pods (`/pods`) and its events (nodelet's `/events`; the standalone kubelet's
log, as it has no API server to post them to).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import normalise
import scenarios as sc

POLL = 0.2


@dataclass
class Twin:
    name: str
    manifests: Path
    node: str
    pods: Callable[[], Awaitable[list[dict[str, Any]]]]
    # Every event recorded so far, oldest first, as {name, type, reason, message, fieldPath}.
    events: Callable[[], Awaitable[list[dict[str, str]]]]


@dataclass
class Observation:
    settled: bool = False
    view: dict[str, Any] = field(default_factory=dict)
    order: list[list[str]] = field(default_factory=list)
    events: list[dict[str, str]] = field(default_factory=list)
    seen_after: float = 0.0  # seconds from the manifest written


def _write(directory: Path, name: str, text: str) -> None:
    tmp = directory / f".{name}.tmp"
    tmp.write_text(text)
    tmp.rename(directory / f"{name}.yaml")


def _observe(pod: dict[str, Any], written: float) -> Observation:
    return Observation(True, normalise.pod_view(pod), normalise.transition_order(pod),
                       [], time.monotonic() - written)


async def run_catalogue(twin: Twin, catalogue: Sequence[sc.Scenario], *,
                        within: float = 60.0) -> dict[str, Observation]:
    results: dict[str, Observation] = {s.name: Observation() for s in catalogue}
    written: dict[str, float] = {}
    deadline = time.monotonic() + within
    pending = list(catalogue)
    while pending and time.monotonic() < deadline:
        for s in pending:
            if s.name not in written and (not s.after or results[s.after].settled):
                _write(twin.manifests, s.name, s.manifest())
                written[s.name] = time.monotonic()
        by_name = {p["metadata"]["name"]: p for p in await twin.pods()}
        for s in list(pending):
            pod = by_name.get(f"{s.name}-{twin.node}")
            if pod is None:
                continue
            if s.settled(pod):
                results[s.name] = _observe(pod, written[s.name])
                pending.remove(s)
            else:
                results[s.name].view = normalise.pod_view(pod)
        await asyncio.sleep(POLL)
    # The events once every scenario has settled (an agent may record one just after the
    # status that settles the scenario, or before it); repeats do not count.
    recorded = await twin.events()
    for s in catalogue:
        events = [e for e in recorded if e.get("name") == f"{s.name}-{twin.node}"]
        results[s.name].events = normalise.event_view(events)
    await clear(twin)
    return results


async def clear(twin: Twin, within: float = 120.0) -> None:
    """Remove every manifest and wait until the agent serves no pod."""
    for path in twin.manifests.iterdir():
        path.unlink()
    deadline = time.monotonic() + within
    while await twin.pods():
        if time.monotonic() > deadline:
            raise AssertionError(f"{twin.name} kept pods {within}s after their manifests went")
        await asyncio.sleep(POLL)


def compare(a: Observation, b: Observation) -> list[str]:
    """What differs between two agents' observations of one scenario (empty: identical)."""
    found = []
    if a.settled != b.settled:
        found.append(f"settled: {a.settled} != {b.settled}")
    found += normalise.differences(a.view, b.view)
    if not normalise.orders_agree(a.order, b.order):
        found.append(f"condition order: {a.order} != {b.order}")
    found += _event_differences(a.events, b.events)
    return found


def _event_differences(a: list[dict[str, str]], b: list[dict[str, str]]) -> list[str]:
    """Events only one agent recorded, then a different order of the common ones."""
    def text(e: dict[str, str]) -> str:
        about = f" ({e['fieldPath']})" if e.get("fieldPath") else ""
        return f"{e['type']} {e['reason']}{about}: {e['message']}"
    found = [f"events: only the first: {text(e)}" for e in a if e not in b]
    found += [f"events: only the second: {text(e)}" for e in b if e not in a]
    common_a = [text(e) for e in a if e in b]
    common_b = [text(e) for e in b if e in a]
    if common_a != common_b:
        found.append(f"events: order {common_a} != {common_b}")
    return found


def summary(diffs: dict[str, list[str]]) -> str:
    same = sum(1 for d in diffs.values() if not d)
    return f"{same} of {len(diffs)} scenarios identical"
