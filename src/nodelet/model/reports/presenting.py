"""Rendering the local API's JSON for humans, kubectl-style (pure: JSON in, text out).

`pods_table` is `kubectl get pods` plus a SANDBOX column (PodReadyToStartContainers, or
PodHasNetwork under its old name); `describe_pod` is `kubectl describe pod` with the conditions'
transition times, reasons and messages, so a stuck pod explains itself. Both read the v1 JSON
the API serves (they work on any kubelet-compatible PodList / EventList), tolerate missing
fields, and raise no exceptions of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from nodelet.model.core import apijson, pods
from nodelet.model.core import status as st

JSON = apijson.JSON

_SANDBOX_TYPES = (st.POD_READY_TO_START_CONTAINERS, st.POD_HAS_NETWORK)
_GUTTER = "   "


# --- generic helpers


def human_duration(delta: timedelta) -> str:
    """kubectl's `duration.HumanDuration`: 5s, 119s, 3m20s, 15m, 125m, 5h5m, 10h, 3d4h, 20d, 2y."""
    seconds = int(delta.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return _two_units(minutes, "m", seconds % 60, "s")
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return _two_units(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return _two_units(days, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return _two_units(days // 365, "y", days % 365, "d")
    return f"{days // 365}y"


def _two_units(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big}{big_unit}" if small == 0 else f"{big}{big_unit}{small}{small_unit}"


def _age(value: str | None, now: datetime) -> str:
    when = st.parse_time_lenient(value)
    return "<unknown>" if when is None else human_duration(now - when)


def _table(rows: Sequence[Sequence[str]], indent: str = "", gutter: str = _GUTTER) -> list[str]:
    """Left-aligned columns, like kubectl's tabwriter (3 spaces for get, 2 for describe)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (indent + gutter.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]


# --- kubectl get pods


def pods_table(pod_list: JSON, now: datetime, *, all_namespaces: bool = False) -> str:
    """`kubectl get pods` columns NAME READY STATUS RESTARTS AGE IP SANDBOX (+NAMESPACE first)."""
    items = apijson.objs(pod_list.get("items"))
    if not items:
        return "No resources found.\n"
    header = ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "SANDBOX"]
    rows = [_pod_row(pod, now) for pod in items]
    if all_namespaces:
        header.insert(0, "NAMESPACE")
        for pod, row in zip(items, rows, strict=True):
            row.insert(0, str(apijson.obj(pod.get("metadata")).get("namespace", "")))
    return "\n".join(_table([header, *rows])) + "\n"


def _pod_row(pod: JSON, now: datetime) -> list[str]:
    meta, status = apijson.obj(pod.get("metadata")), apijson.obj(pod.get("status"))
    ready, total = _ready_counts(pod)
    return [
        str(meta.get("name", "")),
        f"{ready}/{total}",
        pod_status_reason(pod),
        _restarts(status, now),
        # A static pod has no creationTimestamp: when the node first saw it, then.
        _age(meta.get("creationTimestamp") or apijson.obj(meta.get("annotations")).get(
            pods.ANNOTATION_CONFIG_SEEN), now),
        str(status.get("podIP") or "<none>"),
        sandbox_summary(status),
    ]


def _restartable_init_names(pod: JSON) -> set[str]:
    spec = apijson.obj(pod.get("spec"))
    return {
        str(c.get("name"))
        for c in apijson.objs(spec.get("initContainers"))
        if c.get("restartPolicy") == "Always"
    }


def _ready_counts(pod: JSON) -> tuple[int, int]:
    spec, status = apijson.obj(pod.get("spec")), apijson.obj(pod.get("status"))
    sidecars = _restartable_init_names(pod)
    total = len(apijson.objs(spec.get("containers"))) + len(sidecars)
    ready = sum(
        1
        for c in apijson.objs(status.get("containerStatuses"))
        if c.get("ready") and "running" in apijson.obj(c.get("state"))
    )
    ready += sum(
        1
        for c in apijson.objs(status.get("initContainerStatuses"))
        if c.get("name") in sidecars and c.get("ready")
    )
    return ready, total


def _restarts(status: JSON, now: datetime) -> str:
    statuses = [*apijson.objs(status.get("containerStatuses")),
                *apijson.objs(status.get("initContainerStatuses"))]
    count = sum(int(c.get("restartCount", 0) or 0) for c in statuses)
    terminated = [apijson.obj(apijson.obj(c.get("lastState")).get("terminated")) for c in statuses]
    finished = [st.parse_time_lenient(t.get("finishedAt")) for t in terminated]
    last = max((f for f in finished if f is not None), default=None)
    if count and last is not None:
        return f"{count} ({human_duration(now - last)} ago)"
    return str(count)


def sandbox_summary(status: JSON) -> str:
    """The KEP-3085 condition: `True`, `False (PodSandboxNotReady)`, or `-` if absent."""
    conditions = {str(c.get("type")): c for c in apijson.objs(status.get("conditions"))}
    for type_ in _SANDBOX_TYPES:
        cond = conditions.get(type_)
        if cond is not None:
            reason = cond.get("reason")
            return f"{cond.get('status')} ({reason})" if reason else str(cond.get("status"))
    return "-"


def pod_status_reason(pod: JSON) -> str:
    """kubectl's STATUS column (printPod): the most telling container reason, else the phase."""
    meta, status = apijson.obj(pod.get("metadata")), apijson.obj(pod.get("status"))
    reason = str(status.get("reason") or status.get("phase") or "Unknown")
    initializing, init_reason = _init_reason(pod)
    if initializing:
        reason = init_reason
    if not initializing or _condition_true(status, st.INITIALIZED):
        reason = _containers_reason(status, reason)
    if meta.get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason


def _init_reason(pod: JSON) -> tuple[bool, str]:
    spec, status = apijson.obj(pod.get("spec")), apijson.obj(pod.get("status"))
    sidecars = _restartable_init_names(pod)
    total = len(apijson.objs(spec.get("initContainers")))
    for i, c in enumerate(apijson.objs(status.get("initContainerStatuses"))):
        if c.get("name") in sidecars:
            continue
        state = apijson.obj(c.get("state"))
        terminated = apijson.obj(state.get("terminated"))
        waiting = apijson.obj(state.get("waiting"))
        if "terminated" in state and terminated.get("exitCode", 0) == 0:
            continue
        if "terminated" in state:
            return True, "Init:" + _terminated_reason(terminated)
        if waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            return True, f"Init:{waiting['reason']}"
        return True, f"Init:{i}/{total}"
    return False, ""


def _terminated_reason(terminated: JSON) -> str:
    if terminated.get("reason"):
        return str(terminated["reason"])
    if terminated.get("signal"):
        return f"Signal:{terminated['signal']}"
    return f"ExitCode:{terminated.get('exitCode', 0)}"


def _containers_reason(status: JSON, reason: str) -> str:
    has_running = False
    for c in reversed(apijson.objs(status.get("containerStatuses"))):
        state = apijson.obj(c.get("state"))
        waiting = apijson.obj(state.get("waiting"))
        if waiting.get("reason"):
            reason = str(waiting["reason"])
        elif "terminated" in state:
            reason = _terminated_reason(apijson.obj(state["terminated"]))
        elif c.get("ready") and "running" in state:
            has_running = True
    if reason == "Completed" and has_running:
        reason = "Running" if _condition_true(status, st.READY) else "NotReady"
    return reason


def _condition_true(status: JSON, type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in apijson.objs(status.get("conditions"))
    )


def find_pod(pod_list: JSON, name: str, namespace: str | None = None) -> JSON | None:
    """The pod called `name`, or a static pod by its manifest name (`<name>-<node>`), in
    `namespace` (any namespace when None), else None.

    Without a namespace, a pod in `default` wins over same-named pods elsewhere.
    """
    pods = apijson.objs(pod_list.get("items"))
    nodes = sorted({str(n) for p in pods if (n := apijson.obj(p.get("spec")).get("nodeName"))})
    for candidate in [name, *(f"{name}-{node}" for node in nodes)]:
        matches = [
            pod for pod in pods
            if apijson.obj(pod.get("metadata")).get("name") == candidate
            and namespace in (None, apijson.obj(pod.get("metadata")).get("namespace"))
        ]
        matches.sort(
            key=lambda pod: apijson.obj(pod.get("metadata")).get("namespace") != "default")
        if matches:
            return matches[0]
    return None


# --- kubectl get events / manifests


def events_table(event_list: JSON, now: datetime) -> str:
    """`kubectl get events` columns LAST SEEN TYPE REASON OBJECT MESSAGE, oldest first."""
    items = _sorted_events(apijson.objs(event_list.get("items")))
    if not items:
        return "No resources found.\n"
    rows = [["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]]
    for e in items:
        obj = apijson.obj(e.get("involvedObject"))
        rows.append(
            [
                _age(e.get("lastTimestamp") or e.get("firstTimestamp"), now),
                str(e.get("type", "")),
                str(e.get("reason", "")),
                f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}",
                str(e.get("message", "")).strip(),
            ]
        )
    return "\n".join(_table(rows)) + "\n"


def manifests_table(reports: Sequence[JSON]) -> str:
    """The `/manifests` list as FILE DOC POD STATUS ERROR rows."""
    if not reports:
        return "No manifests found.\n"
    rows = [["FILE", "DOC", "POD", "STATUS", "ERROR"]]
    for r in reports:
        document = r.get("document")
        rows.append(
            [
                str(r.get("file", "")),
                "-" if document is None else str(document),
                str(r.get("pod") or "-"),
                "ok" if r.get("ok") else "error",
                str(r.get("error", "")),
            ]
        )
    return "\n".join(_table(rows)) + "\n"


def _sorted_events(items: list[JSON]) -> list[JSON]:
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(items, key=lambda e: st.parse_time_lenient(e.get("lastTimestamp")) or epoch)


# --- kubectl describe pod


def describe_pod(pod: JSON, events: JSON, now: datetime) -> str:
    """`kubectl describe pod`: identity, status, containers, conditions (with transition times,
    reasons, messages) and the pod's events (`events` is an EventList; other pods' are skipped).
    """
    lines = _describe_header(pod)
    status, spec = apijson.obj(pod.get("status")), apijson.obj(pod.get("spec"))
    init = apijson.objs(status.get("initContainerStatuses"))
    if apijson.objs(spec.get("initContainers")):
        lines += _describe_containers("Init Containers", spec.get("initContainers"), init)
    lines += _describe_containers(
        "Containers", spec.get("containers"), status.get("containerStatuses")
    )
    lines += _describe_conditions(status)
    lines += _describe_events(pod, events, now)
    return "\n".join(lines) + "\n"


def _field(key: str, value: str, indent: str = "", width: int = 18) -> str:
    return f"{indent}{(key + ':').ljust(width)}{value}".rstrip()


def _mapping_lines(key: str, values: Any) -> list[str]:
    items = sorted(apijson.obj(values).items())
    if not items:
        return [_field(key, "<none>")]
    first, *rest = [f"{k}={v}" for k, v in items]
    return [_field(key, first)] + [" " * 18 + line for line in rest]


def _describe_header(pod: JSON) -> list[str]:
    meta, spec, status = (
        apijson.obj(pod.get("metadata")),
        apijson.obj(pod.get("spec")),
        apijson.obj(pod.get("status")),
    )
    node = spec.get("nodeName") or "<none>"
    if status.get("hostIP"):
        node = f"{node}/{status['hostIP']}"
    lines = [
        _field("Name", str(meta.get("name", ""))),
        _field("Namespace", str(meta.get("namespace", ""))),
        _field("Node", str(node)),
        _field("Start Time", _long_time(status.get("startTime"))),
        *_mapping_lines("Labels", meta.get("labels")),
        *_mapping_lines("Annotations", meta.get("annotations")),
        _field("Status", _describe_status(meta, status)),
    ]
    for key in ("reason", "message"):
        if status.get(key):
            lines.append(_field(key.capitalize(), str(status[key])))
    return lines + _describe_ips(status)


def _describe_status(meta: JSON, status: JSON) -> str:
    phase = str(status.get("phase") or "Unknown")
    if meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        return "Terminating"
    return phase


def _describe_ips(status: JSON) -> list[str]:
    ips = [str(i.get("ip")) for i in apijson.objs(status.get("podIPs"))]
    lines = [_field("IP", ips[0] if ips else "")]
    if not ips:
        return [*lines, _field("IPs", "<none>")]
    return [*lines, "IPs:", *(f"  IP:  {ip}" for ip in ips)]


def _long_time(value: Any) -> str:
    """kubectl's describe time (RFC 1123 with numeric zone), `<none>` if absent."""
    when = st.parse_time_lenient(value)
    return "<none>" if when is None else when.strftime("%a, %d %b %Y %H:%M:%S %z")


def _transition_time(value: Any) -> str:
    """RFC 3339, keeping the microseconds when the API served precise times."""
    when = st.parse_time_lenient(value)
    if when is None:
        return "<none>"
    return (st.format_precise if "." in str(value) else st.format_time)(when) or ""


def _describe_containers(title: str, specs: Any, statuses: Any) -> list[str]:
    by_name = {str(s.get("name")): s for s in apijson.objs(statuses)}
    lines = [f"{title}:"]
    for spec in apijson.objs(specs):
        name = str(spec.get("name", ""))
        lines += [f"  {name}:", *_describe_container(spec, by_name.get(name, {}))]
    return lines if len(lines) > 1 else [f"{title}:  <none>"]


def _describe_container(spec: JSON, status: JSON) -> list[str]:
    lines = [
        _field("Container ID", str(status.get("containerID", "")), "    ", 16),
        _field("Image", str(spec.get("image", "")), "    ", 16),
        _field("Image ID", str(status.get("imageID", "")), "    ", 16),
    ]
    lines += _describe_state("State", apijson.obj(status.get("state")))
    if apijson.obj(status.get("lastState")):
        lines += _describe_state("Last State", apijson.obj(status.get("lastState")))
    lines += [
        _field("Ready", str(bool(status.get("ready", False))), "    ", 16),
        _field("Restart Count", str(status.get("restartCount", 0)), "    ", 16),
    ]
    return lines


def _describe_state(key: str, state: JSON) -> list[str]:
    def sub(k: str, v: Any) -> str:
        return _field(k, str(v), "      ", 14)

    if "running" in state:
        started = apijson.obj(state["running"]).get("startedAt")
        return [_field(key, "Running", "    ", 16), sub("Started", _long_time(started))]
    if "terminated" in state:
        t = apijson.obj(state["terminated"])
        lines = [_field(key, "Terminated", "    ", 16)]
        lines += [sub("Reason", t["reason"])] if t.get("reason") else []
        lines += [sub("Message", t["message"])] if t.get("message") else []
        lines += [sub("Exit Code", t.get("exitCode", 0))]
        lines += [sub("Started", _long_time(t.get("startedAt")))]
        return [*lines, sub("Finished", _long_time(t.get("finishedAt")))]
    waiting = apijson.obj(state.get("waiting"))
    lines = [_field(key, "Waiting", "    ", 16)]
    lines += [sub("Reason", waiting["reason"])] if waiting.get("reason") else []
    return lines + ([sub("Message", waiting["message"])] if waiting.get("message") else [])


def _describe_conditions(status: JSON) -> list[str]:
    conditions = apijson.objs(status.get("conditions"))
    if not conditions:
        return ["Conditions:  <none>"]
    rows = [["Type", "Status", "LastTransitionTime", "Reason", "Message"]]
    rows.append(["----", "------", "------------------", "------", "-------"])
    for c in conditions:
        rows.append(
            [
                str(c.get("type", "")),
                str(c.get("status", "")),
                _transition_time(c.get("lastTransitionTime")),
                str(c.get("reason", "")),
                str(c.get("message", "")),
            ]
        )
    return ["Conditions:", *_table(rows, "  ", "  ")]


def _describe_events(pod: JSON, events: JSON, now: datetime) -> list[str]:
    mine = _pod_events(pod, events)
    if not mine:
        return ["Events:  <none>"]
    rows = [["Type", "Reason", "Age", "From", "Message"]]
    rows.append(["----", "------", "----", "----", "-------"])
    for e in mine:
        source = apijson.obj(e.get("source"))
        rows.append(
            [
                str(e.get("type", "")),
                str(e.get("reason", "")),
                _event_age(e, now),
                str(source.get("component") or e.get("reportingComponent") or ""),
                str(e.get("message", "")).strip(),
            ]
        )
    return ["Events:", *_table(rows, "  ", "  ")]


def _pod_events(pod: JSON, events: JSON) -> list[JSON]:
    mine = [e for e in apijson.objs(events.get("items")) if apijson.about_pod(pod, e)]
    return _sorted_events(mine)


def _event_age(event: JSON, now: datetime) -> str:
    """`20s`, or `3s (x3 over 20s)` for an aggregated event, as kubectl describe writes it."""
    count = int(event.get("count", 1) or 1)
    first = _age(event.get("firstTimestamp"), now)
    if count > 1:
        return f"{_age(event.get('lastTimestamp'), now)} (x{count} over {first})"
    return first
