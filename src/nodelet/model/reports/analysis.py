"""Pod startup analysis of a cluster dump: phase latencies, percentiles, stuck sandboxes (pure).

`analyze_dump(reader)` analyses the pods and events an `analysis_input.DumpReader` read from
any number of documents (`analyze(pod_list, event_list)` for one of each) and returns an
`Analysis`:

- per pod, the phases scheduled → ready-to-start-containers → initialized → containers-ready →
  ready, from the lastTransitionTime of the kubelet's conditions when True (PodScheduled,
  PodReadyToStartContainers or its old name PodHasNetwork, Initialized, ContainersReady, Ready);
- latencies of each transition. A step is measured from the *latest earlier phase reached*, so
  the steps add up to scheduled → ready whatever the order: without init containers
  Initialized comes before the sandbox (KEP-3085), and its step is then 0;
  scheduled → ready-to-start-containers is the KEP-3085 sandbox-ready SLI. When no pod carries
  either condition name (Kubernetes < 1.25, gate off) the chain falls back to scheduled →
  initialized → containers-ready → ready and a note says so;
- p50/p90/p99 with clusterloader2's rule (the element at ceil(n*p/100)-1 of the sorted
  latencies; negative latencies, from second-granular stamps, clamped to 0), overall and by
  namespace, node and runtimeClass. Samples are sorted once per transition (and once per
  group), all percentiles read from that; the per-pod work runs column-wise in comprehensions;
- first starts vs re-created sandboxes: a snapshot's condition time is the *latest*
  transition, so a pod whose sandbox was re-created (node reboot, pause killed) reports a time
  weeks after scheduling. `recreation_reason` tells them apart (a container that started
  before the sandbox became ready, SandboxChanged events, restarts with the sandbox ready long
  after status.startTime); every transition is measured on first starts only, and the
  re-created pods are listed with the reason;
- KEP-3085's termination SLI: deletion requested (deletionTimestamp - grace period) → the
  sandbox condition False, for terminating pods;
- pods stuck before their sandbox — condition not True while the pod is neither finished nor
  terminating (or, without the condition, Pending with sandbox events) — with the condition's
  reason and message and their FailedCreatePodSandBox / FailedMount events. An event matches
  a pod by involvedObject.uid; an event without uid (or a pod without one) by namespace + name.
  When the pods carry nodelet's alpha conditions (`nodelet.dev/VolumesReady`, `IPv4Ready`,
  `IPv6Ready`), a stuck pod says what it waits for (`blocked_on`), and `extra_conditions`
  counts each condition's pods not ready and times scheduled → True. Without them, nothing
  changes.

Errors: `AnalysisError` (from `analysis_input`), raised for malformed input.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from nodelet.model.reports import analysis_input as ai

AnalysisError = ai.AnalysisError

PERCENTILES = (50, 90, 99)
DIMENSIONS = ("namespace", "node", "runtimeClass")
_FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Transition:
    """`start` → `end` (indexes into `analysis_input.PHASES`).

    A step (`step=True`) is measured from the latest of the chain's phases before `end` that
    the pod reached (requiring `start` among them); a total from `start` only.
    """

    name: str
    start: int
    end: int
    step: bool = True

    @property
    def label(self) -> str:
        return f"{ai.PHASE_LABELS[self.start]} → {ai.PHASE_LABELS[self.end]}"


SANDBOX_READY = Transition("scheduledToReadyToStart", ai.SCHEDULED, ai.READY_TO_START)
END_TO_END = Transition("scheduledToReady", ai.SCHEDULED, ai.READY, step=False)
SANDBOX_CHAIN = (ai.SCHEDULED, ai.READY_TO_START, ai.INITIALIZED, ai.CONTAINERS_READY, ai.READY)
FALLBACK_CHAIN = (ai.SCHEDULED, ai.INITIALIZED, ai.CONTAINERS_READY, ai.READY)


def transitions_of(chain: Sequence[int]) -> tuple[Transition, ...]:
    steps = tuple(
        Transition(f"{ai.PHASES[a]}To{ai.PHASES[b][0].upper()}{ai.PHASES[b][1:]}", a, b)
        for a, b in itertools.pairwise(chain)
    )
    return (*steps, END_TO_END)


@dataclass(frozen=True)
class Stats:
    """Latency percentiles of one transition, in seconds."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float


@dataclass(frozen=True)
class Group:
    """One namespace, node or runtimeClass: its pod count and the stats of each transition
    that has samples in it."""

    key: str
    pods: int
    stats: Mapping[str, Stats]


@dataclass(frozen=True)
class EventSummary:
    """The matching events of one reason, aggregated: total count and the latest message."""

    reason: str
    count: int
    last_message: str
    last_seen: str | None


@dataclass(frozen=True)
class StuckPod:
    pod: ai.PodRecord
    events: tuple[EventSummary, ...]
    blocked_on: str | None = None  # from nodelet.dev conditions (`blocked_on`), when present


@dataclass(frozen=True)
class ExtraCondition:
    """One of nodelet's alpha conditions (`ai.EXTRA_CONDITIONS`) over the pods carrying it."""

    type: str
    pods: int  # pods carrying the condition
    not_ready: int  # ... with a status other than True
    stats: Stats | None  # scheduled -> True, first starts with both times


@dataclass(frozen=True)
class RecreatedPod:
    """A pod whose sandbox condition reflects a later sandbox, and why the analysis thinks so."""

    pod: ai.PodRecord
    reason: str


@dataclass(frozen=True)
class Termination:
    """KEP-3085's termination SLI over the terminating pods of the dump."""

    terminating: int  # pods with a deletionTimestamp
    still_ready: int  # ... whose sandbox condition is still True
    stats: Stats | None  # deletion requested -> condition False, for those measured


@dataclass(frozen=True)
class Analysis:
    """Everything the reports show; latencies are seconds, pods in input order."""

    pods: Sequence[ai.PodRecord]
    condition_counts: Mapping[str, int]  # PodReadyToStartContainers / PodHasNetwork / neither
    fallback: bool  # no pod has either sandbox condition name
    transitions: tuple[Transition, ...]
    headline: Transition  # the sandbox-ready SLI, or scheduled → ready in fallback
    latencies: Mapping[str, Sequence[float | None]]  # per transition name, aligned with pods
    overall: Mapping[str, Stats]
    groups: Mapping[str, tuple[Group, ...]]  # per DIMENSIONS entry, groups sorted by key
    headline_samples: Sequence[float]  # sorted, for histograms and CDFs
    stuck: tuple[StuckPod, ...]
    events_given: bool
    notes: tuple[str, ...]
    recreated: tuple[RecreatedPod, ...] = ()
    termination: Termination = Termination(0, 0, None)
    measured: int = 0  # pods measured: first starts (re-created sandboxes left out)
    extra: tuple[ExtraCondition, ...] = ()  # only the conditions some pod carries


def percentile(sorted_values: Sequence[float], p: int) -> float:
    """clusterloader2's percentile: the element at ceil(n*p/100)-1 (n > 0, 0 < p <= 100)."""
    n = len(sorted_values)
    return sorted_values[max(0, -(-n * p // 100) - 1)]


def stats(sorted_values: Sequence[float]) -> Stats | None:
    """Percentiles of already sorted latencies; None when there are none."""
    return _stats(sorted_values) if sorted_values else None


def _stats(sorted_values: Sequence[float]) -> Stats:
    p50, p90, p99 = (percentile(sorted_values, p) for p in PERCENTILES)
    return Stats(len(sorted_values), p50, p90, p99, sorted_values[-1])


def latency(times: Sequence[float | None], transition: Transition,
            chain: Sequence[int]) -> float | None:
    """One pod's latency of `transition`, clamped at 0; None when a phase is missing.

    The reference definition; `latency_column` computes the same for all pods at once.
    """
    end, start = times[transition.end], times[transition.start]
    if end is None or start is None:
        return None
    if transition.step:
        start = max(t for p in chain[:chain.index(transition.end)]
                    if (t := times[p]) is not None)
    return end - start if end > start else 0.0


Column = list[float | None]


def phase_columns(pods: Sequence[ai.PodRecord]) -> list[Column]:
    """The pods' times transposed: one column per phase, aligned with `pods`."""
    if not pods:
        return [[] for _ in ai.PHASES]
    return [list(col) for col in zip(*(p.times for p in pods), strict=True)]


def latency_column(columns: Sequence[Column], transition: Transition,
                   chain: Sequence[int]) -> Column:
    """`latency` of every pod, column-wise: comprehensions instead of 500 000 calls."""
    ends, starts = columns[transition.end], columns[transition.start]
    bases = _latest(columns, chain[:chain.index(transition.end)]) if transition.step \
        else starts
    return [None if e is None or s is None else (e - b if e > b else 0.0)  # type: ignore[operator]
            for e, s, b in zip(ends, starts, bases, strict=True)]


def _latest(columns: Sequence[Column], phases: Sequence[int]) -> Column:
    """Per pod, the latest time among `phases` (None when it reached none of them)."""
    out = columns[phases[0]]
    for p in phases[1:]:
        out = [a if b is None or (a is not None and a >= b) else b
               for a, b in zip(out, columns[p], strict=True)]
    return out


def analyze(pod_list: Any, event_list: Any = None, *, source: str = "pods",
            events_source: str = "events") -> Analysis:
    """Analyse one parsed document of pods (and one of events, or None); AnalysisError if
    malformed."""
    reader = ai.DumpReader()
    reader.add(pod_list, source)
    if event_list is not None:
        reader.add(event_list, events_source)
    return analyze_dump(reader)


def analyze_dump(reader: ai.DumpReader) -> Analysis:
    """Analyse what `reader` read."""
    pods, events = reader.pods, reader.events
    counts = _condition_counts(pods)
    fallback = counts["neither"] == len(pods)
    chain = FALLBACK_CHAIN if fallback else SANDBOX_CHAIN
    transitions = transitions_of(chain)
    index = EventIndex(events)
    recreated = recreated_pods(pods, events)
    columns = phase_columns(pods)
    for i in recreated:  # the SLI is about first starts
        for column in columns:
            column[i] = None
    latencies = {t.name: latency_column(columns, t, chain) for t in transitions}
    builders = {d: _GroupBuilder(keys) for d, keys in _dimension_keys(pods).items()}
    overall, samples = {}, {}
    for t in transitions:
        samples[t.name] = values = sorted_present(latencies[t.name])
        if values:
            overall[t.name] = _stats(values)
        for builder in builders.values():
            builder.add(t.name, latencies[t.name])
    headline = END_TO_END if fallback else SANDBOX_READY
    stuck = stuck_pods(pods, index)
    return Analysis(
        pods=pods, condition_counts=counts, fallback=fallback, transitions=transitions,
        headline=headline, latencies=latencies, overall=overall,
        groups={d: b.build() for d, b in builders.items()},
        headline_samples=samples[headline.name], stuck=stuck,
        events_given=reader.event_lists > 0,
        notes=_notes(reader, counts, fallback, len(recreated)) + _blocked_notes(stuck),
        recreated=tuple(RecreatedPod(pods[i], r) for i, r in recreated.items()),
        termination=termination(pods), measured=len(pods) - len(recreated),
        extra=extra_conditions(pods, recreated),
    )


_not_none = functools.partial(operator.is_not, None)


def sorted_present(values: Iterable[float | None]) -> list[float]:
    """The values that are not None, sorted (filter and sort both run in C)."""
    return sorted(cast(Iterable[float], filter(_not_none, values)))


def _condition_counts(pods: Sequence[ai.PodRecord]) -> dict[str, int]:
    counts = Counter(p.sandbox.type if p.sandbox is not None else "neither" for p in pods)
    return {name: counts.get(name, 0) for name in (*ai.SANDBOX_CONDITIONS, "neither")}


def _dimension_keys(pods: Sequence[ai.PodRecord]) -> dict[str, list[str]]:
    return {
        "namespace": [p.namespace for p in pods],
        "node": [p.node for p in pods],
        "runtimeClass": [p.runtime_class for p in pods],
    }


class _GroupBuilder:
    """The groups of one dimension. Each group's samples are picked with `itemgetter` and
    sorted once per transition — all in C; a Python loop per sample took 3x longer."""

    def __init__(self, keys: list[str]) -> None:
        members: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            members.setdefault(key, []).append(i)
        self._pods = {k: len(v) for k, v in members.items()}
        self._pick = {k: _picker(v) for k, v in members.items()}
        self._stats: dict[str, dict[str, Stats]] = {k: {} for k in members}

    def add(self, transition: str, values: Column) -> None:
        for key, pick in self._pick.items():
            group = sorted_present(pick(values))
            if group:
                self._stats[key][transition] = _stats(group)

    def build(self) -> tuple[Group, ...]:
        return tuple(Group(k, self._pods[k], self._stats[k]) for k in sorted(self._pods))


def _picker(indexes: list[int]) -> Callable[[Column], Sequence[float | None]]:
    if len(indexes) == 1:  # itemgetter with one index returns the item, not a tuple
        only = indexes[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*indexes)


# --- events by pod


class EventIndex:
    """Events by pod uid and by namespace/name, for `matching`."""

    def __init__(self, events: Sequence[ai.EventRecord]) -> None:
        self.by_uid: dict[str, list[ai.EventRecord]] = {}
        self.by_name: dict[tuple[str, str], list[ai.EventRecord]] = {}
        for e in events:
            self.by_name.setdefault((e.namespace, e.pod_name), []).append(e)
            if e.pod_uid:
                self.by_uid.setdefault(e.pod_uid, []).append(e)

    def matching(self, pod: ai.PodRecord) -> list[ai.EventRecord]:
        """Events about this pod: same uid, or same namespace/name when either side has no
        uid (an event with another uid is about an earlier pod of the same name)."""
        if not self.by_name:
            return []
        same_name = self.by_name.get((pod.namespace, pod.name), [])
        if not pod.uid:
            return same_name
        return self.by_uid.get(pod.uid, []) + [e for e in same_name if not e.pod_uid]


# --- first starts and re-created sandboxes

# A sandbox ready this long after status.startTime (the kubelet's first sync of the pod, after
# which it creates the sandbox at once) with restarted containers is a later sandbox; without
# restarts only a much longer gap says so (a first start can be stuck for hours).
RECREATED_GAP_WITH_RESTARTS = 600.0
RECREATED_GAP = 86400.0
# A container start counts as before the sandbox only by more than this: `startedAt` has whole
# seconds while the condition may be precise (nodelet's ?precise), so 10:00:05 may be 10:00:05.9.
START_SLACK = 1.0


def recreation_reason(pod: ai.PodRecord, events: Sequence[ai.EventRecord]) -> str | None:
    """Why `pod`'s sandbox-ready time reflects a re-created sandbox, or None (a first start)."""
    ready = pod.times[ai.READY_TO_START]
    if ready is None:
        return None
    first = pod.first_container
    if first is not None and first.at < ready - START_SLACK:
        return (f"container {first.container} started at {first.raw}, "
                f"{human_seconds(ready - first.at)} before the sandbox became ready")
    changed = sum(e.count for e in events if e.reason == ai.SANDBOX_CHANGED)
    if changed:
        return f"SandboxChanged event ({changed}x): the sandbox was killed and re-created"
    gap = ready - pod.start_time if pod.start_time is not None else 0.0
    if pod.restarts and gap > RECREATED_GAP_WITH_RESTARTS:
        return (f"{pod.restarts} container restarts, sandbox ready {human_seconds(gap)} "
                "after the pod started (status.startTime)")
    if gap > RECREATED_GAP:
        return f"sandbox ready {human_seconds(gap)} after the pod started (status.startTime)"
    return None


def recreated_pods(pods: Sequence[ai.PodRecord],
                   events: Sequence[ai.EventRecord]) -> dict[int, str]:
    """Index in `pods` -> reason, for the pods whose sandbox was re-created."""
    changed = EventIndex([e for e in events if e.reason == ai.SANDBOX_CHANGED])
    out = {}
    for i, pod in enumerate(pods):
        ready = pod.times[ai.READY_TO_START]
        if ready is None:
            continue
        # The common case, decided inline (100 000 pods): nothing says "re-created".
        first, start = pod.first_container, pod.start_time
        if (first is None or first.at >= ready - START_SLACK) and not changed.by_name and (
                start is None or ready - start <= (
                    RECREATED_GAP_WITH_RESTARTS if pod.restarts else RECREATED_GAP)):
            continue
        reason = recreation_reason(pod, changed.matching(pod))
        if reason is not None:
            out[i] = reason
    return out


def human_seconds(value: float | None) -> str:
    """One format for every duration: 0s, 850ms, 3.2s, 4m12s, 2h5m, 3d4h (`-` for None)."""
    if value is None:
        return "-"
    if value <= 0:
        return "0s"
    if value < 0.9995:
        return f"{value * 1000:.0f}ms"
    if value < 59.95:
        return f"{value:.1f}".removesuffix(".0") + "s"
    whole = round(value)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60}m"
    return f"{whole // 86400}d{whole % 86400 // 3600}h"


# --- termination


def termination(pods: Sequence[ai.PodRecord]) -> Termination:
    """Deletion requested -> sandbox condition False, for terminating pods whose condition
    turned False after the request (`termination_seconds`)."""
    terminating = [p for p in pods if p.terminating]
    parse = ai.TimeParser()
    still_ready = sum(1 for p in terminating if p.sandbox is not None
                      and p.deletion_requested is not None and p.sandbox.status == "True")
    samples = sorted(v for p in terminating if (v := termination_seconds(p, parse)) is not None)
    return Termination(len(terminating), still_ready, stats(samples))


def termination_seconds(pod: ai.PodRecord, parse: ai.TimeParser | None = None) -> float | None:
    """One pod's termination SLI: deletion requested -> its sandbox condition False, when the
    condition turned False after the request (whole-second stamps: 1 s of slack); else None."""
    cond = pod.sandbox
    if cond is None or pod.deletion_requested is None or cond.status != "False" \
            or cond.since is None:
        return None
    at = (parse or ai.TimeParser())(cond.since)
    if at < pod.deletion_requested - 1:
        return None
    return max(0.0, at - pod.deletion_requested)


# --- stuck pods


def is_stuck(pod: ai.PodRecord, has_events: bool) -> bool:
    """Before its sandbox: condition not True (or, without it, Pending with sandbox events),
    and neither finished nor terminating (their sandbox is stopped on purpose)."""
    if pod.terminating or pod.phase in _FINISHED_PHASES:
        return False
    if pod.sandbox is not None:
        return pod.sandbox.status != "True"
    return pod.phase == "Pending" and has_events


def stuck_pods(pods: Sequence[ai.PodRecord], index: EventIndex) -> tuple[StuckPod, ...]:
    """Stuck pods, longest stuck first, with their matching sandbox events."""
    stuck = []
    for pod in pods:
        if pod.sandbox is not None and pod.sandbox.status == "True":
            continue  # most pods: started, no event lookup
        matched = [e for e in index.matching(pod) if e.reason in ai.SANDBOX_EVENT_REASONS]
        if is_stuck(pod, bool(matched)):
            stuck.append(StuckPod(pod, summarize_events(matched), blocked_on(pod)))
    stuck.sort(key=_stuck_order)
    return tuple(stuck)


def blocked_on(pod: ai.PodRecord) -> str | None:
    """What a pod waits for, from nodelet's conditions not True: `volumes (FailedMount): <the
    event's message>`, `network: no IPv6 address`; None without such conditions."""
    causes = []
    for ctype in ai.EXTRA_CONDITIONS:
        for c in pod.extra:
            if c.type != ctype or c.status == "True":
                continue
            if ctype in ai.FAMILY_CONDITIONS:
                causes.append(f"network: no {ai.FAMILY_CONDITIONS[ctype]} address")
            else:
                reason = f" ({c.reason})" if c.reason else ""
                causes.append(f"volumes{reason}: {c.message or 'not set up'}")
    return "; ".join(causes) or None


def extra_conditions(pods: Sequence[ai.PodRecord],
                     recreated: Mapping[int, str]) -> tuple[ExtraCondition, ...]:
    """Per nodelet.dev condition some pod carries: pods, not ready, scheduled -> True."""
    carrying = [(i, p) for i, p in enumerate(pods) if p.extra]
    if not carrying:
        return ()
    parse, out = ai.TimeParser(), []
    for ctype in ai.EXTRA_CONDITIONS:
        found = [(i, p, c) for i, p in carrying for c in p.extra if c.type == ctype]
        if not found:
            continue
        samples = sorted(
            max(0.0, parse(c.since) - scheduled) for i, p, c in found
            if c.status == "True" and c.since is not None and i not in recreated
            and (scheduled := p.times[ai.SCHEDULED]) is not None)
        out.append(ExtraCondition(ctype, len(found),
                                  sum(1 for _, _, c in found if c.status != "True"),
                                  stats(samples)))
    return tuple(out)


def _blocked_notes(stuck: Sequence[StuckPod]) -> tuple[str, ...]:
    volumes = sum(1 for s in stuck if s.blocked_on and s.blocked_on.startswith("volumes"))
    network = sum(1 for s in stuck if s.blocked_on and "network: " in s.blocked_on)
    if not volumes and not network:
        return ()
    return (f"nodelet.dev conditions say what stuck pods wait for: volumes {volumes}, an IP "
            f"address family {network} (listed per pod).",)


def _stuck_order(s: StuckPod) -> tuple[bool, str, str, str]:
    since = s.pod.sandbox.since if s.pod.sandbox is not None else None
    # RFC 3339 in UTC sorts as text; mixed offsets are rare enough in a dump to accept.
    return since is None, since or "", s.pod.namespace, s.pod.name


def summarize_events(events: Sequence[ai.EventRecord]) -> tuple[EventSummary, ...]:
    out = []
    for reason in ai.SANDBOX_EVENT_REASONS:
        mine = [e for e in events if e.reason == reason]
        if mine:
            last = max(mine, key=lambda e: -1e18 if e.last_seen is None else e.last_seen)
            out.append(EventSummary(reason, sum(e.count for e in mine), last.message,
                                    last.last_seen_raw))
    return tuple(out)


# --- notes


def _pods(n: int) -> str:
    return "1 pod" if n == 1 else f"{n} pods"


def _notes(reader: ai.DumpReader, counts: Mapping[str, int], fallback: bool,
           recreated: int) -> tuple[str, ...]:
    pods = reader.pods
    new, old = ai.SANDBOX_CONDITIONS
    notes = [*_input_notes(reader)]
    if not pods:
        notes.append("The input has no pods.")
    elif fallback:
        notes.append(f"No pod has a {new} or {old} condition (Kubernetes before 1.25, or the "
                     f"feature gate is off): sandbox-ready latency cannot be measured; the "
                     "transitions fall back to scheduled → initialized → containers-ready → "
                     "ready, and stuck pods are found by their sandbox events only.")
    else:
        if counts[old]:
            notes.append(f"{_pods(counts[old])} report the condition under its old name {old} "
                         "(Kubernetes 1.25-1.27 or nodelet's compatibility gate); both names "
                         "are read as ready-to-start-containers.")
        if counts["neither"]:
            notes.append(f"{_pods(counts['neither'])} without {new} or {old}: left out of "
                         "the transitions that need it.")
    if recreated:
        notes.append(f"{_pods(recreated)} had their sandbox re-created after the first start "
                     "(listed with the reason): their condition times are of a later sandbox, "
                     "so every transition is measured on first starts only.")
    untimed = sum(1 for p in pods if p.untimed)
    if untimed:
        notes.append(f"{_pods(untimed)} have a True condition without lastTransitionTime: "
                     "left out of the transitions that need it.")
    if pods and not reader.parse.saw_fraction:
        notes.append("Transition times have whole-second precision (as the API serialises "
                     "them): sub-second latencies are rounded; nodelet's /pods?precise keeps "
                     "microseconds.")
    if not reader.event_lists:
        notes.append("No events given: stuck pods are shown without their "
                     "FailedCreatePodSandBox / FailedMount events, and SandboxChanged events "
                     "cannot mark re-created sandboxes.")
    return tuple(notes)


def _input_notes(reader: ai.DumpReader) -> list[str]:
    notes = []
    if reader.internal_sources:
        names = ", ".join(reader.internal_sources[:3])
        more = len(reader.internal_sources) - 3
        notes.append(f"Read as the internal format of an old `kubectl cluster-info dump` "
                     f"(capitalised Go field names, no kind): {names}"
                     + (f" and {more} more" if more > 0 else "") + ".")
    if reader.duplicate_pods:
        notes.append(f"{_pods(reader.duplicate_pods)} appeared more than once (same UID) and "
                     "were counted once.")
    if reader.skipped:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(reader.skipped.items()))
        notes.append(f"Skipped objects that are neither Pods nor Events: {kinds}.")
    return notes
