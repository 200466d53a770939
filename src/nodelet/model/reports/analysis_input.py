"""Reading a cluster dump for `nodelet analyze`: Kubernetes objects into small records.

Pure: parsed documents in (`model.parsing.dumps` turns bytes into them), values out. A
`DumpReader` takes any number of documents from any number of sources and keeps:

- Pods: a single Pod, a `PodList`, or the Pods of a `List` of anything (`kubectl get
  pods,events -o json`, `kubectl get pods -A -o json|yaml`, the API server, the kubelet's and
  nodelet's `/pods`, the `pods.json` files of a `kubectl cluster-info dump` tree). Items of a
  PodList may omit `kind`. A pod seen twice (same UID, e.g. in two files) is counted once.
- Events (`Event`, core/v1 or events.k8s.io/v1): the sandbox events (FailedCreatePodSandBox,
  FailedMount) and SandboxChanged (a re-created sandbox), from an `EventList`, a `List`, a
  single Event or a cluster-info dump's `events.json`.
- Other kinds (Nodes, ReplicaSets, Services…): counted per kind and skipped (a note says so).
- The internal format of old `kubectl cluster-info dump` (Go field names with capitals, no
  `kind`): read as v1, and noted.

Every problem raises `AnalysisError` (a `ValueError`) whose message names the source, the item
(`items[12] (default/web)`) and the field, e.g.
`pods.json: items[3] (default/web): status.conditions[1] (PodScheduled).lastTransitionTime:
not an RFC 3339 time: 'yesterday'`. Times may be RFC 3339 text or `datetime` values (what
YAML loaders make of unquoted timestamps).

Performance (a 100 000-pod dump must take seconds, bench/analyze.py): one pass over the items
with plain dict access, and timestamps parsed by a memoising hand parser (`TimeParser`) — a dump
repeats the same whole-second stamps thousands of times.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, NamedTuple

from nodelet.model.core import events as ev
from nodelet.model.core import extraconditions as xc
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
SANDBOX_CHANGED = ev.SANDBOX_CHANGED
_KEPT_EVENT_REASONS = frozenset((*SANDBOX_EVENT_REASONS, SANDBOX_CHANGED))


class SandboxCondition(NamedTuple):
    """The pod's PodReadyToStartContainers (or PodHasNetwork) condition as it was written."""

    type: str
    status: str
    reason: str
    message: str
    since: str | None  # lastTransitionTime as written (RFC 3339)


# nodelet's alpha conditions beyond KEP-3085 (docs/kep3085.md "Beyond the KEP"), when present.
EXTRA_CONDITIONS = (xc.VOLUMES_READY, xc.IPV4_READY, xc.IPV6_READY)
FAMILY_CONDITIONS = {xc.IPV4_READY: "IPv4", xc.IPV6_READY: "IPv6"}
_EXTRA = frozenset(EXTRA_CONDITIONS)


class ContainerStart(NamedTuple):
    """The earliest start of any of the pod's containers the status remembers."""

    container: str
    at: float  # POSIX seconds
    raw: str


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
    start_time: float | None = None  # status.startTime: the kubelet's first sync of the pod
    restarts: int = 0  # sum of the containers' restartCount
    first_container: ContainerStart | None = None
    deletion_requested: float | None = None  # deletionTimestamp - deletionGracePeriodSeconds
    untimed: int = 0  # kubelet conditions True without a lastTransitionTime
    # nodelet.dev/VolumesReady, IPv4Ready, IPv6Ready as written (SandboxCondition's fields);
    # empty for every pod of a cluster without those alpha gates.
    extra: tuple[SandboxCondition, ...] = ()


@dataclass(frozen=True)
class EventRecord:
    """A FailedCreatePodSandBox / FailedMount / SandboxChanged event about a pod."""

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


def time_text(value: Any) -> Any:
    """A `datetime` (YAML's unquoted timestamp; naive means UTC, as YAML says) as RFC 3339
    text; anything else unchanged (checked where it is parsed)."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value


# --- documents


# Kinds an item of a list is taken for when it has no `kind` of its own.
_ITEM_KIND = {"PodList": "Pod", "EventList": "Event"}


def _describe(value: Any) -> str:
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    return f"{type(value).__name__} {value!r}"[:60]


def _guess_kind(item: dict[str, Any]) -> str | None:
    """The kind of an object written without one (a List's items, nodelet's /pods)."""
    if "involvedObject" in item or "regarding" in item:
        return "Event"
    spec, status = item.get("spec"), item.get("status")
    if (type(spec) is dict and "containers" in spec) or \
            (type(status) is dict and ("conditions" in status or "phase" in status)):
        return "Pod"
    return None


class DumpReader:
    """Pods, events and the rest of any number of documents (see the module docstring)."""

    def __init__(self) -> None:
        self.parse = TimeParser()
        self.pods: list[PodRecord] = []
        self.events: list[EventRecord] = []
        self.skipped: Counter[str] = Counter()  # kind -> objects neither Pod nor Event
        self.duplicate_pods = 0
        self.duplicate_events = 0
        self.internal_sources: list[str] = []  # read as old cluster-info dump's format
        self.event_lists = 0  # EventLists (or Events) seen, even empty: events were given
        # uid -> (index in pods, resourceVersion): a pod seen again (two files, a directory
        # and a file, `kubectl get -w -o json`) keeps its newest state.
        self._pod_uids: dict[str, tuple[int, int]] = {}
        self._event_uids: set[str] = set()

    def add(self, doc: Any, source: str) -> None:
        """Take one parsed document; AnalysisError when it is malformed."""
        if type(doc) is not dict:
            raise AnalysisError(f"{source}: the document is {_describe(doc)}, not a "
                                "Kubernetes object or list")
        if "kind" not in doc and _is_internal(doc):
            doc = _from_internal(doc)
            self.internal_sources.append(source)
        kind = doc.get("kind")
        if "items" in doc and (kind is None or (type(kind) is str and kind.endswith("List"))):
            self._add_list(doc, source, kind)
            return
        self._add_item(doc, kind if type(kind) is str else _guess_kind(doc), source)

    def _add_list(self, doc: dict[str, Any], source: str, kind: str | None) -> None:
        items = doc.get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise AnalysisError(f"{source}: {kind or 'list'}.items is {_describe(items)}, "
                                "not a list")
        default = _ITEM_KIND.get(kind or "") or (kind[:-4] if kind and kind != "List" else None)
        if default == "Event":
            self.event_lists += 1
        add_item = self._add_item
        for index, item in enumerate(items):
            if type(item) is not dict:
                raise AnalysisError(f"{source}: items[{index}]: {_describe(item)}, not an "
                                    "object")
            item_kind = item.get("kind") or default or _guess_kind(item)
            add_item(item, item_kind, f"{source}: items[{index}]")

    def _add_item(self, item: dict[str, Any], kind: Any, where: str) -> None:
        if kind == "Pod":
            record = _pod_record(item, where, self.parse)
            if record.uid:
                version = _version(item)
                known = self._pod_uids.get(record.uid)
                if known is not None:
                    self.duplicate_pods += 1
                    if version >= known[1]:  # the same or newer: the later one
                        self.pods[known[0]] = record
                        self._pod_uids[record.uid] = (known[0], version)
                    return
                self._pod_uids[record.uid] = (len(self.pods), version)
            self.pods.append(record)
        elif kind == "Event":
            if not self.event_lists:
                self.event_lists = 1
            self._add_event(item, where)
        else:
            self.skipped[str(kind) if kind else "objects without a kind"] += 1

    def _add_event(self, item: dict[str, Any], where: str) -> None:
        record = _event_record(item, where, self.parse)
        if record is None:
            return
        meta = item.get("metadata")
        uid = meta.get("uid") if type(meta) is dict else None
        if uid:
            if uid in self._event_uids:
                self.duplicate_events += 1
                return
            self._event_uids.add(uid)
        self.events.append(record)


def _version(item: dict[str, Any]) -> int:
    """metadata.resourceVersion as a number (etcd's revision; -1 when absent or opaque)."""
    rv = item["metadata"].get("resourceVersion")
    return int(rv) if type(rv) is str and rv.isdigit() else -1


# --- the internal format of old `kubectl cluster-info dump`

# Its objects are Go structs marshalled without their JSON tags: ObjectMeta's fields (tagged)
# inline at the top, everything else with Go's capitalised names, and no `kind`.
_META_FIELDS = ("name", "namespace", "uid", "deletionTimestamp", "deletionGracePeriodSeconds",
                "creationTimestamp", "labels", "annotations", "resourceVersion")
_OPAQUE = ("Labels", "Annotations", "labels", "annotations", "NodeSelector", "Data")


def _is_internal(doc: dict[str, Any]) -> bool:
    return "Items" in doc or "Spec" in doc or "Status" in doc or "InvolvedObject" in doc


def _from_internal(value: Any) -> Any:
    if isinstance(value, list):
        return [_from_internal(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        name = _json_name(key) if type(key) is str else key
        out[name] = item if key in _OPAQUE else _from_internal(item)
    if "metadata" not in out and ("spec" in out or "status" in out or "involvedObject" in out):
        out["metadata"] = {k: out.pop(k) for k in _META_FIELDS if k in out}
    return out


def _json_name(key: str) -> str:
    """`Spec` → `spec`, `UID` → `uid`, `PodIP` → `podIP`, `ObjectMeta` → `metadata`."""
    if key in ("ObjectMeta", "ListMeta"):
        return "metadata"
    if key == "LastTerminationState":  # v1 renamed it in its JSON tag
        return "lastState"
    if key.isupper():
        return key.lower()
    return key[:1].lower() + key[1:]


# --- pods


def _pod_record(item: dict[str, Any], where: str, parse: TimeParser) -> PodRecord:
    meta = item.get("metadata")
    if type(meta) is not dict:
        raise AnalysisError(f"{where}: no metadata; every Pod has metadata.name")
    name, namespace = meta.get("name"), meta.get("namespace") or "default"
    if type(name) is not str or not name or type(namespace) is not str:
        raise AnalysisError(f"{where}: metadata.name and metadata.namespace must be non-empty "
                            "strings")
    where = f"{where} ({namespace}/{name})"
    spec, status = _object(item, "spec", where), _object(item, "status", where)
    times, raw_times, sandbox, untimed, extra = _condition_times(status, where, parse)
    deletion = meta.get("deletionTimestamp")
    start = status.get("startTime")
    restarts, first = _container_starts(status, where, parse) if sandbox is not None and \
        sandbox.status == "True" else (0, None)
    # Positional: this runs 100 000 times per dump (field order as in PodRecord).
    return PodRecord(
        namespace, name, str(meta.get("uid") or ""), str(spec.get("nodeName") or NO_NODE),
        str(spec.get("runtimeClassName") or DEFAULT_RUNTIME_CLASS),
        str(status.get("phase") or ""), bool(deletion), sandbox, times, raw_times,
        None if start is None else (parse.cached(start) if type(start) is str else None)
        or _time(start, parse, f"{where}: status.startTime"),
        restarts, first,
        None if not deletion else _deletion_requested(meta, deletion, where, parse), untimed,
        extra,
    )


def _deletion_requested(meta: dict[str, Any], deletion: Any, where: str,
                        parse: TimeParser) -> float | None:
    """When deletion was asked for: the API sets deletionTimestamp to that + the grace period."""
    at = _time(deletion, parse, f"{where}: metadata.deletionTimestamp")
    grace = meta.get("deletionGracePeriodSeconds")
    return None if at is None else at - (grace if type(grace) is int else 0)


def _container_starts(status: dict[str, Any], where: str,
                      parse: TimeParser) -> tuple[int, ContainerStart | None]:
    """Sum of restartCount, and the earliest startedAt any container status remembers
    (running or terminated now, or terminated last time)."""
    restarts, first = 0, None
    for field in ("initContainerStatuses", "containerStatuses"):
        statuses = status.get(field)
        if type(statuses) is not list:
            continue
        for cs in statuses:
            if type(cs) is not dict:
                continue
            count = cs.get("restartCount")
            restarts += count if type(count) is int else 0
            for state in (cs.get("state"), cs.get("lastState")):
                for detail in (state or {}).values() if type(state) is dict else ():
                    raw = time_text(detail.get("startedAt")) if type(detail) is dict else None
                    if type(raw) is not str:
                        continue
                    at = parse.cached(raw) or _time(raw, parse, f"{where}: status.{field} "
                                                    "startedAt")
                    if at is not None and (first is None or at < first.at):
                        first = ContainerStart(str(cs.get("name") or "?"), at, raw)
    return restarts, first


def _object(item: dict[str, Any], field: str, where: str) -> dict[str, Any]:
    value = item.get(field)
    if value is None:
        return {}
    if type(value) is not dict:
        raise AnalysisError(f"{where}: {field} is {_describe(value)}, not an object")
    return value


def _condition_times(
    status: dict[str, Any], where: str, parse: TimeParser
) -> tuple[tuple[float | None, ...], tuple[str | None, ...], SandboxCondition | None, int,
           tuple[SandboxCondition, ...]]:
    """Hot loop (500 000 conditions per dump): dict lookups only, error text built on error."""
    conditions = status.get("conditions")
    if conditions is None:
        conditions = []
    elif type(conditions) is not list:
        raise AnalysisError(f"{where}: status.conditions is {_describe(conditions)}, not a list")
    times: list[float | None] = [None] * len(PHASES)
    raw: list[str | None] = [None] * len(PHASES)
    sandbox: SandboxCondition | None = None
    untimed = 0
    extra: tuple[SandboxCondition, ...] = ()
    for j, cond in enumerate(conditions):
        if type(cond) is not dict:
            raise AnalysisError(f"{where}: status.conditions[{j}] is {_describe(cond)}, "
                                "not an object")
        ctype = cond.get("type")
        phase = _PHASE_OF_CONDITION.get(ctype) if type(ctype) is str else None
        if phase is None:
            if ctype in _EXTRA:  # nodelet's own; anything else is not kubelet-owned
                extra += (_extra_condition(cond, where, j, parse),)
            continue
        ltt = cond.get("lastTransitionTime")
        at = parse.cached(ltt) if type(ltt) is str else None
        if at is None and ltt is not None:
            ltt = time_text(ltt)
            at = _time(ltt, parse, f"{where}: status.conditions[{j}] ({ctype})"
                       ".lastTransitionTime")
        if phase == READY_TO_START and (sandbox is None or ctype == SANDBOX_CONDITIONS[0]):
            sandbox = SandboxCondition(str(ctype), str(cond.get("status")),
                                       str(cond.get("reason") or ""),
                                       str(cond.get("message") or ""), ltt)
        if cond.get("status") == "True":
            if at is not None:
                times[phase], raw[phase] = at, ltt
            else:
                untimed += 1
    return tuple(times), tuple(raw), sandbox, untimed, extra


def _extra_condition(cond: dict[str, Any], where: str, j: int,
                     parse: TimeParser) -> SandboxCondition:
    ltt = cond.get("lastTransitionTime")
    if ltt is not None:
        ltt = time_text(ltt)
        _time(ltt, parse, f"{where}: status.conditions[{j}] ({cond.get('type')})"
              ".lastTransitionTime")  # validated like the kubelet's
    return SandboxCondition(str(cond.get("type")), str(cond.get("status")),
                            str(cond.get("reason") or ""), str(cond.get("message") or ""), ltt)


def _time(value: Any, parse: TimeParser, where: str) -> float | None:
    if value is None:
        return None
    value = time_text(value)
    if type(value) is not str:
        raise AnalysisError(f"{where}: {_describe(value)} is not an RFC 3339 time")
    try:
        return parse(value)
    except ValueError:
        raise AnalysisError(f"{where}: not an RFC 3339 time: {value!r} (expected e.g. "
                            "'2024-05-01T12:00:07Z')") from None


# --- events


def _event_record(item: dict[str, Any], where: str, parse: TimeParser) -> EventRecord | None:
    involved = item.get("involvedObject") or item.get("regarding")  # core/v1 or events/v1
    if type(involved) is not dict:
        raise AnalysisError(f"{where}: no involvedObject; every Event names the object it is "
                            "about")
    if item.get("reason") not in _KEPT_EVENT_REASONS or involved.get("kind", "Pod") != "Pod":
        return None
    series = item.get("series")
    series = series if type(series) is dict else {}  # events/v1 repeats live in `series`
    raw = time_text(_event_time(item, series))
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


def _event_time(item: dict[str, Any], series: dict[str, Any]) -> Any:
    """The last time the event was seen, in the order kubectl's `LAST SEEN` uses."""
    for value in (item.get("lastTimestamp"), series.get("lastObservedTime"),
                  item.get("eventTime"), item.get("firstTimestamp"),
                  (item.get("metadata") or {}).get("creationTimestamp")):
        if value:
            return value
    return None
