"""A pod's start-up timeline from its v1 JSON and its events (pure: JSON in, values and text out).

The timeline follows the kubelet-owned conditions in start-up order — PodScheduled →
PodReadyToStartContainers (or its 1.25-1.27 name PodHasNetwork) → Initialized → ContainersReady
→ Ready — with the time each one turned True, its offset from PodScheduled and the step from
the milestone reached just before it (in time order: without init containers Initialized comes
before the sandbox, DESIGN.md §3). Sandbox attempts come from the events: every
`FailedCreatePodSandBox` and `FailedMount` (the sandbox is blocked on volumes) occurrence, and
`SandboxChanged` (the sandbox is re-created). Aggregated events only keep their first and last
occurrence, so an attempt carries `count`, `first` and `last`. A pod being deleted also has
its termination step (KEP-3085's termination SLI, `core/terminations.py`): from the deletion
request to the sandbox condition turning False.

Times are as precise as the JSON: `/pods?precise` serves microseconds, Kubernetes whole seconds.
`build` and `render_text` read any kubelet-shaped Pod / EventList, tolerate missing fields, and
raise no exceptions of their own. There is one builder, over v1 JSON, because `nodelet timeline`
only has the API's JSON; the web UI, which holds the typed values, goes through `of_pod`, which
serialises them with the API's own serialisers (no text is parsed).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from nodelet.model.core import apijson, podjson, pods, terminations
from nodelet.model.core import events as ev
from nodelet.model.core import status as st

JSON = apijson.JSON

# Start-up order of the conditions; the sandbox slot accepts either name of the KEP-3085 condition.
PHASES: tuple[tuple[str, ...], ...] = (
    (st.POD_SCHEDULED,),
    (st.POD_READY_TO_START_CONTAINERS, st.POD_HAS_NETWORK),
    (st.INITIALIZED,),
    (st.CONTAINERS_READY,),
    (st.READY,),
)
SANDBOX_TYPES = PHASES[1]

AttemptKind = Literal["failed", "changed", "blocked"]
_ATTEMPT_KINDS: dict[str, AttemptKind] = {
    ev.FAILED_CREATE_POD_SANDBOX: "failed",
    ev.SANDBOX_CHANGED: "changed",
    ev.FAILED_MOUNT: "blocked",
}


@dataclass(frozen=True)
class Milestone:
    """One condition on the timeline.

    `reached_at` is its lastTransitionTime when it is True (None otherwise); `since_start` is
    measured from PodScheduled, `step` from the latest milestone reached no later than this one.
    """

    type: str
    status: str  # "True", "False", "Unknown", or "" when the pod does not have the condition
    last_transition: datetime | None = None
    reason: str = ""
    message: str = ""
    reached_at: datetime | None = None
    since_start: timedelta | None = None
    step: timedelta | None = None
    step_from: str = ""  # the milestone `step` is measured from

    @property
    def reached(self) -> bool:
        return self.reached_at is not None


@dataclass(frozen=True)
class SandboxAttempt:
    """Sandbox attempts told by one (aggregated) event: `count` occurrences, `first` … `last`."""

    kind: AttemptKind
    reason: str
    message: str
    count: int
    first: datetime
    last: datetime


@dataclass(frozen=True)
class Termination:
    """The termination step: the deletion `requested` (deletionTimestamp minus the grace
    period) and the sandbox condition turning False for it (`stopped`, None while pending)."""

    requested: datetime
    stopped: datetime | None

    @property
    def latency(self) -> timedelta | None:
        """The termination SLI (None while the condition is not False yet)."""
        return None if self.stopped is None else max(self.stopped - self.requested, timedelta(0))


@dataclass(frozen=True)
class Timeline:
    namespace: str
    name: str
    phase: str
    milestones: tuple[Milestone, ...]
    attempts: tuple[SandboxAttempt, ...]
    start: datetime | None  # PodScheduled, else the earliest time known
    end: datetime | None  # the latest time known, or `now` while a milestone is pending
    sandbox_error: str  # the sandbox condition's message while it is not True
    termination: Termination | None = None  # only for a pod being deleted

    @property
    def sandbox_ready(self) -> Milestone:
        return self.milestones[1]

    @property
    def sandbox_ready_latency(self) -> timedelta | None:
        """DESIGN.md §1: PodScheduled → PodReadyToStartContainers=True (while still True)."""
        return self.sandbox_ready.since_start

    @property
    def failed_attempts(self) -> int:
        return sum(a.count for a in self.attempts if a.kind == "failed")

    @property
    def span(self) -> timedelta:
        if self.start is None or self.end is None:
            return timedelta(0)
        return max(self.end - self.start, timedelta(0))


# --- building


def build(pod: JSON, events: JSON | None, now: datetime) -> Timeline:
    """The timeline of `pod` (a v1 Pod) with its events (a v1 EventList; others' are skipped)."""
    meta, status = apijson.obj(pod.get("metadata")), apijson.obj(pod.get("status"))
    conditions = {str(c.get("type")): c for c in apijson.objs(status.get("conditions"))}
    raw = [_milestone(_pick(conditions, types), types[0]) for types in PHASES]
    milestones = _with_offsets(raw)
    attempts = tuple(_attempts(pod, events or {}))
    sandbox = milestones[1]
    termination = _termination(meta, _pick(conditions, SANDBOX_TYPES))
    times = [m.reached_at for m in milestones if m.reached_at is not None]
    times += [t for a in attempts for t in (a.first, a.last)]
    if termination is not None:
        times += [t for t in (termination.requested, termination.stopped) if t is not None]
    start = milestones[0].reached_at or min(times, default=None)
    pending = any(not m.reached for m in milestones) or (
        termination is not None and termination.stopped is None)
    end = max([*times, now] if pending and start is not None else times, default=None)
    return Timeline(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        phase=str(status.get("phase") or "Unknown"),
        milestones=milestones,
        attempts=attempts,
        start=start,
        end=end,
        sandbox_error=sandbox.message if sandbox.status not in ("True", "") else "",
        termination=termination,
    )


def _termination(meta: JSON, sandbox: JSON) -> Termination | None:
    grace = meta.get("deletionGracePeriodSeconds")
    requested = terminations.requested_at(st.parse_time_lenient(meta.get("deletionTimestamp")),
                                          grace if isinstance(grace, int) else None)
    if requested is None:
        return None
    return Termination(requested, terminations.stopped_after(
        requested, st.condition_from_api(sandbox)))


def of_pod(pod: pods.Pod, status: st.PodStatus | None, events: Sequence[ev.Event],
           now: datetime) -> Timeline:
    """The timeline of a pod this agent runs, with its events: `build` over the same v1 form
    that `/pods?precise` and `/events?precise` serve, so the web UI shows what `nodelet
    timeline` prints."""
    api_events = ev.event_list_to_api(list(events), precise=True)
    return build(podjson.pod_to_api(pod, status, precise=True), api_events, now)


def _pick(conditions: Mapping[str, JSON], types: Sequence[str]) -> JSON:
    for type_ in types:
        if type_ in conditions:
            return conditions[type_]
    return {"type": types[0]}


def _milestone(cond: JSON, default_type: str) -> Milestone:
    status = str(cond.get("status") or "")
    changed = st.parse_time_lenient(cond.get("lastTransitionTime"))
    return Milestone(
        type=str(cond.get("type") or default_type),
        status=status,
        last_transition=changed,
        reason=str(cond.get("reason") or ""),
        message=str(cond.get("message") or ""),
        reached_at=changed if status == "True" else None,
    )


def _with_offsets(raw: list[Milestone]) -> tuple[Milestone, ...]:
    """Fill `since_start` and `step`: steps follow time order, ties keep start-up order."""
    start = raw[0].reached_at
    order = sorted((m.reached_at, i) for i, m in enumerate(raw) if m.reached_at is not None)
    out = list(raw)
    previous: Milestone | None = None
    for at, i in order:
        m = raw[i]
        since = at - start if start is not None else None
        step = at - previous.reached_at if previous and previous.reached_at else None
        out[i] = dataclasses.replace(m, since_start=since, step=step,
                                     step_from=previous.type if previous else "")
        previous = m
    return tuple(out)


def _attempts(pod: JSON, events: JSON) -> list[SandboxAttempt]:
    out = []
    for e in apijson.objs(events.get("items")):
        kind = _ATTEMPT_KINDS.get(str(e.get("reason")))
        if kind is None or not apijson.about_pod(pod, e):
            continue
        last = (st.parse_time_lenient(e.get("lastTimestamp"))
                or st.parse_time_lenient(e.get("eventTime")))
        first = st.parse_time_lenient(e.get("firstTimestamp")) or last
        if first is None or last is None:
            continue
        out.append(SandboxAttempt(kind=kind, reason=str(e.get("reason")),
                                  message=str(e.get("message") or "").strip(),
                                  count=max(int(e.get("count") or 1), 1), first=first, last=last))
    return sorted(out, key=lambda a: (a.first, a.last))


def pods_from_text(text: str) -> JSON:
    """A PodList of the pods in saved JSON (`nodelet timeline --file`): a v1 Pod, a PodList or
    List, or the concatenated objects `kubectl get -w -o json` writes — the last copy of each
    pod wins, so a watch saved during a deletion keeps the pod's final status. Raises
    ValueError (json.JSONDecodeError) for text that is not JSON."""
    decoder, at, found = json.JSONDecoder(), 0, {}
    while (at := _skip_space(text, at)) < len(text):
        value, at = decoder.raw_decode(text, at)
        doc = apijson.obj(value)
        items = apijson.objs(doc.get("items")) if "items" in doc else [doc]
        for item in items:
            meta = apijson.obj(item.get("metadata"))
            key = meta.get("uid") or (meta.get("namespace"), meta.get("name"))
            found[str(key)] = item
    return {"kind": "PodList", "apiVersion": "v1", "items": list(found.values())}


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


# --- formatting


def format_duration(delta: timedelta | None) -> str:
    """`-`, `0 ms`, `352 ms`, `1.234 s`, `59.9 s`, `2m03s`, `1h05m`: precise while it is short."""
    if delta is None:
        return "-"
    seconds = delta.total_seconds()
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{sign}{seconds:.3f} s"
    if seconds < 60:
        return f"{sign}{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes}m{secs:02d}s"
    return f"{sign}{minutes // 60}h{minutes % 60:02d}m"


def format_time(value: datetime | None) -> str:
    """RFC 3339 with microseconds, or `-`."""
    return st.format_precise(value) or "-"


def offset(timeline: Timeline, at: datetime) -> float:
    """Where `at` falls on the timeline, 0.0 (start) … 1.0 (end), clamped."""
    span = timeline.span.total_seconds()
    if timeline.start is None or span <= 0:
        return 0.0
    return min(max((at - timeline.start).total_seconds() / span, 0.0), 1.0)


def bar(timeline: Timeline, milestone: Milestone) -> tuple[float, float]:
    """The (from, to) offsets of a milestone's bar: its step when reached, else the wait so far
    (from the latest milestone reached, to the end)."""
    if milestone.reached_at is not None:
        begin = milestone.reached_at - (milestone.step or timedelta(0))
        return offset(timeline, begin), offset(timeline, milestone.reached_at)
    since = _last_reached(timeline)
    if since is None:
        return 0.0, 0.0
    return offset(timeline, since), 1.0


def termination_bar(timeline: Timeline) -> tuple[float, float]:
    """The (from, to) offsets of the termination step: request to False, or to the end while
    it is pending."""
    t = timeline.termination
    if t is None:
        return 0.0, 0.0
    end = offset(timeline, t.stopped) if t.stopped is not None else 1.0
    return offset(timeline, t.requested), end


def termination_label(timeline: Timeline) -> str:
    """`<condition>=False 1.234 s after the deletion request`, or how long it has waited."""
    t = timeline.termination
    if t is None:
        return ""
    if t.latency is not None:
        return f"{timeline.sandbox_ready.type}=False {format_duration(t.latency)} after deletion"
    waited = timeline.end - t.requested if timeline.end is not None else None
    return f"waiting for {timeline.sandbox_ready.type}=False for {format_duration(waited)}"


def _last_reached(timeline: Timeline) -> datetime | None:
    reached = [m.reached_at for m in timeline.milestones if m.reached_at is not None]
    return max(reached, default=timeline.start)


def waiting(timeline: Timeline) -> timedelta | None:
    """How long the pod has waited for its next milestone (None once all are reached)."""
    since = _last_reached(timeline)
    if all(m.reached for m in timeline.milestones) or since is None or timeline.end is None:
        return None
    return timeline.end - since


_BAR_WIDTH = 32


def render_text(timeline: Timeline, *, width: int = _BAR_WIDTH) -> str:
    """The timeline for a terminal: one row per condition with a text bar, time and deltas,
    then the sandbox attempts and the sandbox error."""
    lines = [f"Pod {timeline.namespace}/{timeline.name} ({timeline.phase}), "
             f"scheduled {format_time(timeline.start)}, span {format_duration(timeline.span)}"]
    rows = [["CONDITION", "STATUS", "TRUE SINCE", "", "+START", "STEP"]]
    rows += [_text_row(timeline, m, width) for m in timeline.milestones]
    rows += _termination_rows(timeline, width)
    lines += _columns(rows)
    latency = timeline.sandbox_ready_latency
    if latency is not None:
        lines.append(f"Sandbox ready after {format_duration(latency)} "
                     f"(PodScheduled → {timeline.sandbox_ready.type})")
    if timeline.termination is not None:
        lines.append(f"Deletion requested {format_time(timeline.termination.requested)}: "
                     f"{termination_label(timeline)} (termination SLI)")
    lines += _attempt_lines(timeline)
    if timeline.sandbox_error:
        lines.append(f"Sandbox error: {timeline.sandbox_error}")
    return "\n".join(lines) + "\n"


def _text_row(timeline: Timeline, m: Milestone, width: int) -> list[str]:
    begin, end = bar(timeline, m)
    left = min(round(begin * width), width - 1)  # a zero-length step still shows one cell
    right = max(round(end * width), left + 1)
    fill = "█" if m.reached else "░"
    cells = ("·" * left + fill * (right - left)).ljust(width, "·")[:width]
    since = format_duration(m.since_start) if m.reached else ""
    if m.step is not None:
        step = format_duration(m.step)
    else:
        step = f"waiting {format_duration(waiting(timeline))}" if m.status and not m.reached else ""
    return [m.type, m.status or "-", format_time(m.reached_at), f"|{cells}|", since, step]


def _termination_rows(timeline: Timeline, width: int) -> list[list[str]]:
    """The termination step as a row: from the deletion request (its +START) to the sandbox
    condition turning False (its STEP, the termination SLI)."""
    t = timeline.termination
    if t is None:
        return []
    begin, end = termination_bar(timeline)
    left = min(round(begin * width), width - 1)
    right = max(round(end * width), left + 1)
    fill = "▓" if t.stopped is not None else "░"
    cells = ("·" * left + fill * (right - left)).ljust(width, "·")[:width]
    since = format_duration(t.requested - timeline.start) if timeline.start else ""
    step = (format_duration(t.latency) if t.latency is not None
            else f"waiting {format_duration(timeline.end - t.requested if timeline.end else None)}")
    return [["Deleted → " + f"{timeline.sandbox_ready.type}=False",
             "False" if t.stopped is not None else "pending", format_time(t.stopped),
             f"|{cells}|", since, step]]


def _attempt_lines(timeline: Timeline) -> list[str]:
    if not timeline.attempts:
        return []
    lines = [f"Sandbox attempts ({timeline.failed_attempts} failed):"]
    for a in timeline.attempts:
        when = format_time(a.first)
        times = f" x{a.count} until {format_time(a.last)}" if a.count > 1 else ""
        lines.append(f"  {when}  {a.reason}{times}: {a.message}")
    return lines


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]
