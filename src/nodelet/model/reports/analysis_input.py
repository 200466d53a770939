"""Reading a cluster dump for `nodelet analyze`: PodList / EventList JSON into small records.

Pure: bytes or parsed JSON in, values out. Accepted documents:

- pods: a v1 `PodList` (`kubectl get pods -A -o json` on older kubectl, the API server, the
  kubelet's and nodelet's `/pods`) or a `List` whose items are Pods (what kubectl usually prints);
- events: a v1 `EventList` or a `List` of Events (`kubectl get events -A -o json`).

Every problem raises `AnalysisError` (a `ValueError`) whose message names the source, the item
(`items[12] (default/web)`) and the field, e.g.
`pods.json: items[3] (default/web): status.conditions[1] (PodScheduled).lastTransitionTime:
not an RFC 3339 time: 'yesterday'`. Nothing is silently skipped except conditions that the
kubelet does not own and events that are not about pods or not about sandboxes.

Performance (a 100 000-pod dump must take seconds, bench/analyze.py): one pass over the items
with plain dict access, and timestamps parsed by a memoising hand parser (`TimeParser`) — a dump
repeats the same whole-second stamps thousands of times.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, NamedTuple

from nodelet.model.core import events as ev
from nodelet.model.core import status as st


class AnalysisError(ValueError):
    """Input that cannot be analysed; the message says which file, item and field, and why."""


# Phases of a pod's start, in the KEP-3085 order; indexes into `PodRecord.times`.
PHASES = ("scheduled", "readyToStart", "initialized", "containersReady", "ready")
PHASE_LABELS = ("scheduled", "ready-to-start-containers", "initialized", "containers-ready",
                "ready")
SCHEDULED, READY_TO_START, INITIALIZED, CONTAINERS_READY, READY = range(5)

# Both names of the KEP-3085 condition, the current one first (preferred if a pod has both).
SANDBOX_CONDITIONS = (st.POD_READY_TO_START_CONTAINERS, st.POD_HAS_NETWORK)
_PHASE_OF_CONDITION = {
    st.POD_SCHEDULED: SCHEDULED,
    st.POD_READY_TO_START_CONTAINERS: READY_TO_START,
    st.POD_HAS_NETWORK: READY_TO_START,
    st.INITIALIZED: INITIALIZED,
    st.CONTAINERS_READY: CONTAINERS_READY,
    st.READY: READY,
}

NO_NODE = "<none>"
DEFAULT_RUNTIME_CLASS = "<default>"
SANDBOX_EVENT_REASONS = (ev.FAILED_CREATE_POD_SANDBOX, ev.FAILED_MOUNT)

_POD_LIST_KINDS = ("PodList", "List")
_EVENT_LIST_KINDS = ("EventList", "List")


class SandboxCondition(NamedTuple):
    """The pod's PodReadyToStartContainers (or PodHasNetwork) condition as it was written."""

    type: str
    status: str
    reason: str
    message: str
    since: str | None  # lastTransitionTime as written (RFC 3339)


class PodRecord(NamedTuple):
    """What the analysis needs of one pod.

    A NamedTuple rather than a frozen dataclass: 100 000 of them are built per run, and a
    frozen dataclass's `__init__` (object.__setattr__ per field) made parsing ~25 % slower.
    `times` and `raw_times` are indexed by phase (`SCHEDULED`...): the lastTransitionTime of the
    condition when it is True (POSIX seconds / the string as written), else None.
    """

    namespace: str
    name: str
    uid: str
    node: str
    runtime_class: str
    phase: str
    terminating: bool
    sandbox: SandboxCondition | None
    times: tuple[float | None, ...]
    raw_times: tuple[str | None, ...]


@dataclass(frozen=True)
class EventRecord:
    """A FailedCreatePodSandBox / FailedMount event about a pod."""

    namespace: str
    pod_name: str
    pod_uid: str
    reason: str
    message: str
    count: int
    last_seen: float | None  # POSIX seconds
    last_seen_raw: str | None


# --- time


_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d\d):(\d\d))",
    re.ASCII,
)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


class TimeParser:
    """RFC 3339 text to POSIX seconds (float), memoised per text.

    Faster than `datetime.fromisoformat(...).timestamp()` on dumps (most stamps repeat) and
    stricter: only RFC 3339 (a date, `T`, a time, an offset or `Z`) is accepted — fromisoformat
    would take `2024-05-01` or a local time without offset. `saw_fraction` records whether any
    stamp had sub-second digits (API dumps have whole seconds; nodelet's `?precise` does not).
    """

    def __init__(self) -> None:
        self._cache: dict[str, float] = {}
        # The hot path: the value of a text parsed before, else None; a bound C method, so
        # no Python frame per lookup (480 000 per 100 000-pod dump).
        self.cached = self._cache.get
        self._days: dict[str, int] = {}
        self.saw_fraction = False

    def __call__(self, text: str) -> float:
        """POSIX seconds of `text`; ValueError when it is not an RFC 3339 time."""
        value = self._cache.get(text)
        if value is None:
            value = self._cache[text] = self._parse(text)
        return value

    def _parse(self, text: str) -> float:
        match = _RFC3339.fullmatch(text)
        if match is None:
            raise ValueError(text)
        _, _, _, hh, mm, ss, frac, sign, oh, om = match.groups()
        hour, minute, second = int(hh), int(mm), int(ss)
        if hour > 23 or minute > 59 or second > 60:
            raise ValueError(text)
        value = float(self._day_seconds(text[:10]) + hour * 3600 + minute * 60 + second)
        if frac:
            self.saw_fraction = True
            value += int(frac) / 10 ** len(frac)
        if sign:
            offset = int(oh) * 3600 + int(om) * 60
            value -= offset if sign == "+" else -offset
        return value

    def _day_seconds(self, day: str) -> int:
        seconds = self._days.get(day)
        if seconds is None:
            ordinal = date.fromisoformat(day).toordinal()  # ValueError for 2024-02-30
            seconds = self._days[day] = (ordinal - _EPOCH_ORDINAL) * 86400
        return seconds


# --- documents


def decode(data: bytes, source: str, what: str) -> Any:
    """The JSON value in `data`; `what` names the expected document in the error message."""
    if not data.strip():
        raise AnalysisError(f"{source}: empty input; expected a v1 {what} in JSON")
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:
        raise AnalysisError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                            f"expected a v1 {what} in JSON") from exc
    except json.JSONDecodeError as exc:
        raise AnalysisError(f"{source}: not JSON ({exc.msg} at line {exc.lineno} column "
                            f"{exc.colno}); expected a v1 {what}, e.g. from "
                            f"`kubectl get {what[:-4].lower()}s -A -o json`") from exc


def list_items(doc: Any, source: str, kinds: Sequence[str], what: str) -> list[Any]:
    """The `items` of a list document whose kind is one of `kinds`."""
    a_what = f"an {what}" if what[0] in "AEIOU" else f"a {what}"
    if not isinstance(doc, dict):
        raise AnalysisError(f"{source}: not {a_what}: the document is {_describe(doc)}, "
                            "not an object")
    kind = doc.get("kind")
    if kind not in kinds:
        raise AnalysisError(f"{source}: not {a_what}: kind is {kind!r}; expected "
                            f"{' or '.join(repr(k) for k in kinds)}")
    items = doc.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise AnalysisError(f"{source}: {kind}.items is {_describe(items)}, not a list")
    return items


def _describe(value: Any) -> str:
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    return f"{type(value).__name__} {value!r}"[:60]


# --- pods


def pod_records(doc: Any, source: str, parse: TimeParser) -> list[PodRecord]:
    """One record per item of a PodList (or a List of Pods), in order."""
    items = list_items(doc, source, _POD_LIST_KINDS, "PodList")
    return [_pod_record(item, i, source, parse) for i, item in enumerate(items)]


def _pod_record(item: Any, index: int, source: str, parse: TimeParser) -> PodRecord:
    if type(item) is not dict:
        raise AnalysisError(f"{source}: items[{index}]: {_describe(item)}, not a Pod object")
    meta = item.get("metadata")
    if type(meta) is not dict:
        raise AnalysisError(f"{source}: items[{index}]: no metadata; every item must be a Pod "
                            "with metadata.name")
    name, namespace = meta.get("name"), meta.get("namespace") or "default"
    if type(name) is not str or not name or type(namespace) is not str:
        raise AnalysisError(f"{source}: items[{index}]: metadata.name and metadata.namespace "
                            "must be non-empty strings")
    where = f"{source}: items[{index}] ({namespace}/{name})"
    kind = item.get("kind")
    if kind is not None and kind != "Pod":
        raise AnalysisError(f"{where}: kind is {kind!r}; only Pods can be analysed")
    spec, status = _object(item, "spec", where), _object(item, "status", where)
    times, raw_times, sandbox = _condition_times(status, where, parse)
    # Positional: this runs 100 000 times per dump (field order as in PodRecord).
    return PodRecord(
        namespace, name, str(meta.get("uid") or ""), str(spec.get("nodeName") or NO_NODE),
        str(spec.get("runtimeClassName") or DEFAULT_RUNTIME_CLASS),
        str(status.get("phase") or ""), bool(meta.get("deletionTimestamp")), sandbox,
        times, raw_times,
    )


def _object(item: dict[str, Any], field: str, where: str) -> dict[str, Any]:
    value = item.get(field)
    if value is None:
        return {}
    if type(value) is not dict:
        raise AnalysisError(f"{where}: {field} is {_describe(value)}, not an object")
    return value


def _condition_times(
    status: dict[str, Any], where: str, parse: TimeParser
) -> tuple[tuple[float | None, ...], tuple[str | None, ...], SandboxCondition | None]:
    """Hot loop (500 000 conditions per dump): dict lookups only, error text built on error."""
    conditions = status.get("conditions")
    if conditions is None:
        conditions = []
    elif type(conditions) is not list:
        raise AnalysisError(f"{where}: status.conditions is {_describe(conditions)}, not a list")
    times: list[float | None] = [None] * len(PHASES)
    raw: list[str | None] = [None] * len(PHASES)
    sandbox: SandboxCondition | None = None
    for j, cond in enumerate(conditions):
        if type(cond) is not dict:
            raise AnalysisError(f"{where}: status.conditions[{j}] is {_describe(cond)}, "
                                "not an object")
        ctype = cond.get("type")
        phase = _PHASE_OF_CONDITION.get(ctype) if type(ctype) is str else None
        if phase is None:
            continue  # not kubelet-owned (readiness gates, DisruptionTarget...)
        ltt = cond.get("lastTransitionTime")
        at = parse.cached(ltt) if type(ltt) is str else None
        if at is None and ltt is not None:
            at = _time(ltt, parse, f"{where}: status.conditions[{j}] ({ctype})"
                       ".lastTransitionTime")
        if phase == READY_TO_START and (sandbox is None or ctype == SANDBOX_CONDITIONS[0]):
            sandbox = SandboxCondition(str(ctype), str(cond.get("status")),
                                       str(cond.get("reason") or ""),
                                       str(cond.get("message") or ""), ltt)
        if at is not None and cond.get("status") == "True":
            times[phase], raw[phase] = at, ltt
    return tuple(times), tuple(raw), sandbox


def _time(value: Any, parse: TimeParser, where: str) -> float | None:
    if value is None:
        return None
    if type(value) is not str:
        raise AnalysisError(f"{where}: {_describe(value)} is not an RFC 3339 time")
    try:
        return parse(value)
    except ValueError:
        raise AnalysisError(f"{where}: not an RFC 3339 time: {value!r} (expected e.g. "
                            "'2024-05-01T12:00:07Z')") from None


# --- events


def event_records(doc: Any, source: str, parse: TimeParser) -> list[EventRecord]:
    """The FailedCreatePodSandBox / FailedMount events about pods of an EventList."""
    items = list_items(doc, source, _EVENT_LIST_KINDS, "EventList")
    records = []
    for index, item in enumerate(items):
        record = _event_record(item, f"{source}: items[{index}]", parse)
        if record is not None:
            records.append(record)
    return records


def _event_record(item: Any, where: str, parse: TimeParser) -> EventRecord | None:
    if type(item) is not dict:
        raise AnalysisError(f"{where}: {_describe(item)}, not an Event object")
    kind = item.get("kind")
    if kind is not None and kind != "Event":
        raise AnalysisError(f"{where}: kind is {kind!r}; an EventList holds Events")
    involved = item.get("involvedObject") or item.get("regarding")  # core/v1 or events/v1
    if type(involved) is not dict:
        raise AnalysisError(f"{where}: no involvedObject; every Event names the object it is "
                            "about")
    if item.get("reason") not in SANDBOX_EVENT_REASONS or involved.get("kind", "Pod") != "Pod":
        return None
    series = item.get("series")
    series = series if type(series) is dict else {}  # events/v1 repeats live in `series`
    raw = _event_time(item, series)
    count = item.get("count") or series.get("count") or 1
    if type(count) is not int:
        raise AnalysisError(f"{where}: count is {_describe(count)}, not an integer")
    return EventRecord(
        namespace=str(involved.get("namespace") or "default"),
        pod_name=str(involved.get("name") or ""),
        pod_uid=str(involved.get("uid") or ""),
        reason=str(item["reason"]),
        message=str(item.get("message") or item.get("note") or ""),
        count=count,
        last_seen=_time(raw, parse, f"{where}: event time"),
        last_seen_raw=raw,
    )


def _event_time(item: dict[str, Any], series: dict[str, Any]) -> str | None:
    """The last time the event was seen, in the order kubectl's `LAST SEEN` uses."""
    for value in (item.get("lastTimestamp"), series.get("lastObservedTime"),
                  item.get("eventTime"), item.get("firstTimestamp"),
                  (item.get("metadata") or {}).get("creationTimestamp")):
        if value:
            return value  # type: ignore[no-any-return]
    return None
