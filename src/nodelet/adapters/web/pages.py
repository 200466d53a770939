"""The web UI's pages, rendered on the server from the API's own JSON (no I/O after start).

- pods: every pod with its phase, its conditions as badges and, while PodReadyToStartContainers
  is not True, the condition's message (which carries the sandbox error);
- pod: the start-up timeline (`svg.timeline` over `model.timeline`), the sandbox error, the
  conditions with precise transition times, the sandbox attempts and the events;
- node: the sandbox-ready latency histogram and sandbox failures by error class, read from the
  Prometheus exposition `/metrics` serves.

Everything that comes from a pod, an event or the metrics is escaped (`_e`); names in links are
URL-quoted. `Ui()` reads its template and static files from the package once.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import quote

from nodelet.adapters.web import exposition, svg
from nodelet.model import presenting
from nodelet.model import timeline as tl

JSON = Mapping[str, Any]

SANDBOX_READY_HISTOGRAM = "nodelet_pod_sandbox_ready_duration_seconds"
RUN_SANDBOX_HISTOGRAM = "kubelet_run_podsandbox_duration_seconds"
SANDBOX_FAILURES = "nodelet_sandbox_failures_total"

_STATIC_TYPES = {"ui.css": "text/css", "ui.js": "text/javascript"}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def pod_path(namespace: str, name: str) -> str:
    return f"/ui/pods/{quote(namespace, safe='')}/{quote(name, safe='')}"


class Ui:
    """Renders the pages; `static(name)` serves the stylesheet and the script."""

    def __init__(self) -> None:
        root = resources.files(__package__)
        self._layout = string.Template((root / "templates" / "layout.html").read_text("utf-8"))
        self._static = {name: (root / "static" / name).read_bytes() for name in _STATIC_TYPES}

    def static(self, name: str) -> tuple[bytes, str] | None:
        """(body, content type) of a static file, None for an unknown name."""
        body = self._static.get(name)
        return None if body is None else (body, _STATIC_TYPES[name])

    def _page(self, title: str, body: str, now: datetime) -> str:
        return self._layout.substitute(title=_e(title), body=body, now=_e(tl.format_time(now)))

    def pods_page(self, pods: Sequence[JSON], now: datetime) -> str:
        return self._page("Pods", _pods_body(pods), now)

    def pod_page(self, pod: JSON, events: JSON, now: datetime) -> str:
        t = tl.build(pod, events, now)
        return self._page(f"{t.namespace}/{t.name}", _pod_body(pod, events, t), now)

    def node_page(self, metrics_text: str, pods: Sequence[JSON], now: datetime) -> str:
        return self._page("Node", _node_body(metrics_text, pods, now), now)

    def not_found_page(self, namespace: str, name: str, now: datetime) -> str:
        body = (f"<h1>Pod not found</h1><p class=\"empty\">No pod {_e(namespace)}/{_e(name)} "
                f'on this node. <a href="/ui">All pods</a></p>')
        return self._page("Not found", body, now)


# --- helpers


def _meta(pod: JSON) -> JSON:
    value = pod.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _status(pod: JSON) -> JSON:
    value = pod.get("status")
    return value if isinstance(value, Mapping) else {}


def _conditions(pod: JSON) -> list[JSON]:
    value = _status(pod).get("conditions")
    return [c for c in value if isinstance(c, Mapping)] if isinstance(value, list) else []


def _badge(type_: str, cond: JSON | None) -> str:
    status = str(cond.get("status", "")) if cond is not None else ""
    cls = {"True": "true", "False": "false", "Unknown": "unknown"}.get(status, "absent")
    tip = f"{type_}={status or 'not reported'}"
    if cond is not None and cond.get("reason"):
        tip += f" ({cond['reason']})"
    return (f'<span class="badge {cls}" data-condition="{_e(type_)}" data-status="{_e(status)}" '
            f'title="{_e(tip)}">{_e(type_)}</span>')


def _badges(pod: JSON) -> str:
    by_type = {str(c.get("type")): c for c in _conditions(pod)}
    shown: list[str] = []
    for types in tl.PHASES:
        type_ = next((t for t in types if t in by_type), types[0])
        shown.append(_badge(type_, by_type.get(type_)))
    known = {t for types in tl.PHASES for t in types}
    shown += [_badge(t, c) for t, c in by_type.items() if t not in known]
    return "".join(shown)


def sandbox_error(pod: JSON) -> str:
    """The KEP-3085 condition's message while it is not True ('' otherwise)."""
    for c in _conditions(pod):
        if c.get("type") in tl.SANDBOX_TYPES and c.get("status") != "True":
            return str(c.get("message") or c.get("reason") or "")
    return ""


def _table(headers: Sequence[str], rows: Sequence[str], table_id: str, empty: str) -> str:
    if not rows:
        return f'<p class="empty" id="{table_id}">{_e(empty)}</p>'
    head = "".join(f'<th class="num">{_e(h[1:])}</th>' if h.startswith("#") else f"<th>{_e(h)}</th>"
                   for h in headers)
    return (f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>'
            + "\n".join(rows) + "</tbody></table>")


def _time(value: Any) -> str:
    return f'<span class="time">{_e(value or "-")}</span>'


# --- pods


def _pods_body(pods: Sequence[JSON]) -> str:
    ordered = sorted(pods, key=lambda p: (str(_meta(p).get("namespace")),
                                          str(_meta(p).get("name"))))
    rows = [_pod_row(p) for p in ordered]
    headers = ["Namespace", "Name", "Phase", "Status", "IP", "Conditions", "Sandbox error"]
    return f"<h1>Pods <span class=\"muted\">({len(rows)})</span></h1>" + _table(
        headers, rows, "pods", "No pods on this node.")


def _pod_row(pod: JSON) -> str:
    meta, status = _meta(pod), _status(pod)
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    return (
        f'<tr class="pod" data-pod="{_e(namespace)}/{_e(name)}">'
        f"<td>{_e(namespace)}</td>"
        f'<td class="name"><a href="{_e(pod_path(namespace, name))}">{_e(name)}</a></td>'
        f'<td class="phase">{_e(status.get("phase") or "Unknown")}</td>'
        f"<td>{_e(presenting.pod_status_reason(pod))}</td>"
        f'<td><span class="time">{_e(status.get("podIP") or "-")}</span></td>'
        f'<td class="conditions">{_badges(pod)}</td>'
        f'<td class="sandbox-error">{_e(sandbox_error(pod))}</td></tr>'
    )


# --- one pod


def _pod_body(pod: JSON, events: JSON, t: tl.Timeline) -> str:
    parts = [f'<h1>{_e(t.name)} <span class="muted">in {_e(t.namespace)}</span></h1>',
             _facts(pod, t), _error_box(t),
             "<h2>Start-up timeline</h2>", f'<div class="chart">{svg.timeline(t)}</div>',
             "<h2>Conditions</h2>", _conditions_table(pod, t),
             "<h2>Sandbox attempts</h2>", _attempts_table(t),
             "<h2>Events</h2>", _events_table(events)]
    return "\n".join(parts)


def _facts(pod: JSON, t: tl.Timeline) -> str:
    meta, status = _meta(pod), _status(pod)
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    facts = [
        ("Phase", _e(t.phase)), ("Status", _e(presenting.pod_status_reason(pod))),
        ("Pod IP", _e(status.get("podIP") or "-")),
        ("Node", _e(spec.get("nodeName") or "-") if isinstance(spec, Mapping) else "-"),
        ("UID", f"<code>{_e(meta.get('uid', ''))}</code>"),
        ("Start time", _time(status.get("startTime"))),
        ("Sandbox ready after", _e(tl.format_duration(t.sandbox_ready_latency))),
        ("Conditions", _badges(pod)),
    ]
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    return f'<dl class="facts">{items}</dl>'


def _error_box(t: tl.Timeline) -> str:
    if not t.sandbox_error:
        return ""
    sandbox = t.sandbox_ready
    since = tl.format_time(sandbox.last_transition)
    attempts = f"{t.failed_attempts} failed sandbox attempt(s). " if t.failed_attempts else ""
    return (f'<section class="alert" id="sandbox-error"><h2>Sandbox not ready</h2>'
            f"<p><b>{_e(sandbox.type)}={_e(sandbox.status)}</b> ({_e(sandbox.reason)}) "
            f'since <span class="time">{_e(since)}</span></p>'
            f'<p class="message">{_e(t.sandbox_error)}</p>'
            f'<p class="muted">{_e(attempts)}The pod cannot start containers until the '
            f"sandbox is created and has its IP.</p></section>")


def _conditions_table(pod: JSON, t: tl.Timeline) -> str:
    steps = {m.type: m for m in t.milestones}
    rank = {type_: i for i, types in enumerate(tl.PHASES) for type_ in types}
    rows = []
    for c in sorted(_conditions(pod), key=lambda c: rank.get(str(c.get("type")), len(rank))):
        m = steps.get(str(c.get("type")))
        since = tl.format_duration(m.since_start) if m and m.reached else ""
        step = f"{tl.format_duration(m.step)} after {m.step_from}" \
            if m and m.step is not None else ""
        status = str(c.get("status", ""))
        rows.append(
            f'<tr data-condition="{_e(c.get("type"))}"><td>{_e(c.get("type"))}</td>'
            f"<td>{_badge(status, c)}</td><td>{_time(c.get('lastTransitionTime'))}</td>"
            f'<td class="num">{_e(since)}</td><td>{_e(step)}</td>'
            f"<td>{_e(c.get('reason') or '')}</td><td>{_e(c.get('message') or '')}</td></tr>")
    headers = ["Type", "Status", "Last transition", "#+Scheduled", "Step", "Reason", "Message"]
    return _table(headers, rows, "conditions", "No conditions yet.")


def _attempts_table(t: tl.Timeline) -> str:
    rows = [
        f'<tr class="attempt {a.kind}"><td>{_time(tl.format_time(a.first))}</td>'
        f"<td>{_time(tl.format_time(a.last))}</td><td>{_e(a.reason)}</td>"
        f'<td class="num">{a.count}</td><td>{_e(a.message)}</td></tr>'
        for a in t.attempts
    ]
    return _table(["First", "Last", "Reason", "#Count", "Message"], rows, "attempts",
                  "No failed or replaced sandbox.")


def _events_table(events: JSON) -> str:
    items = events.get("items")
    listed = [e for e in items if isinstance(e, Mapping)] if isinstance(items, list) else []
    listed.sort(key=lambda e: str(e.get("lastTimestamp") or ""))
    rows = [
        f'<tr class="{_e(str(e.get("type", "")).lower())}"><td class="type">{_e(e.get("type"))}'
        f"</td><td>{_e(e.get('reason'))}</td><td class=\"num\">{_e(e.get('count', 1))}</td>"
        f"<td>{_time(e.get('firstTimestamp'))}</td><td>{_time(e.get('lastTimestamp'))}</td>"
        f"<td>{_e(str(e.get('message') or '').strip())}</td></tr>"
        for e in listed
    ]
    return _table(["Type", "Reason", "#Count", "First seen", "Last seen", "Message"], rows,
                  "events", "No events.")


# --- node


def _node_body(metrics_text: str, pods: Sequence[JSON], now: datetime) -> str:
    ready = sum(1 for p in pods if tl.build(p, None, now).sandbox_ready.reached)
    waiting = sum(1 for p in pods if sandbox_error(p))
    summary = (f'<div class="summary" id="node-summary"><div><b>{len(pods)}</b>pods</div>'
               f"<div><b>{ready}</b>sandbox ready</div>"
               f"<div><b>{waiting}</b>sandbox not ready</div></div>")
    parts = ["<h1>Node</h1>", summary,
             "<h2>Sandbox-ready latency</h2>",
             '<p class="muted">PodScheduled → PodReadyToStartContainers=True, first time '
             f"(<code>{SANDBOX_READY_HISTOGRAM}</code>)</p>",
             _histogram_section(metrics_text, SANDBOX_READY_HISTOGRAM, "sandbox-ready-histogram"),
             "<h2>RunPodSandbox duration</h2>",
             f'<p class="muted"><code>{RUN_SANDBOX_HISTOGRAM}</code>, all runtime handlers</p>',
             _histogram_section(metrics_text, RUN_SANDBOX_HISTOGRAM, "run-sandbox-histogram"),
             "<h2>Sandbox failures by error class</h2>", _failures_table(metrics_text)]
    return "\n".join(parts)


def _histogram_section(metrics_text: str, name: str, element_id: str) -> str:
    h = exposition.histogram(metrics_text, name)
    if h is None:
        return f'<p class="empty" id="{element_id}">Not exposed by this agent.</p>'
    stats = [("observations", f"{h.count:g}"), ("mean", _seconds(h.mean)),
             ("p50 (est.)", _seconds(h.quantile(0.5))), ("p90 (est.)", _seconds(h.quantile(0.9))),
             ("p99 (est.)", _seconds(h.quantile(0.99)))]
    summary = "".join(f"<div><b>{_e(v)}</b>{_e(k)}</div>" for k, v in stats)
    return (f'<div class="summary">{summary}</div>'
            f'<div class="chart">{svg.histogram(h, element_id)}</div>')


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return tl.format_duration(timedelta(seconds=value))


def _failures_table(metrics_text: str) -> str:
    counts = exposition.counter_by_label(metrics_text, SANDBOX_FAILURES, "error_class")
    rows = [f'<tr data-error-class="{_e(k)}"><td>{_e(k)}</td><td class="num">{v:g}</td></tr>'
            for k, v in counts.items() if v]
    return _table(["Error class", "#Failures"], rows, "failures",
                  "No sandbox failures since the agent started.")
