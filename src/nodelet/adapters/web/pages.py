"""The web UI's pages, rendered on the server from the agent's own values (no I/O after start).

- pods: every pod with its phase, its conditions as badges and, while PodReadyToStartContainers
  is not True, the condition's message (which carries the sandbox error);
- pod: the start-up timeline (`svg.timeline` over `model.reports.timeline`), the sandbox error, the
  conditions with precise transition times, the sandbox attempts and the events;
- node: the sandbox-ready latency histogram and sandbox failures by error class, as the agent's
  metrics give them (`histograms.SandboxMetrics`), and the agent's feature gates.

Pods are `(Pod, PodStatus | None)` pairs (None: no status generated yet, shown as a freshly
admitted pod) and events `events.Event` values, as the agent holds them. Two things are computed
as the CLI computes them, from the v1 form the API serves (built in process, not parsed): the
timeline (`timeline.of_pod`) and kubectl's STATUS column (`presenting.pod_status_reason`).

Everything that comes from a pod, an event or the metrics is escaped (`_e`); names in links are
URL-quoted. `Ui()` reads its template and static files from the package once.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from datetime import datetime, timedelta
from html import escape
from importlib import resources
from urllib.parse import quote

from nodelet.adapters.web import svg
from nodelet.model.core import events as ev
from nodelet.model.core import podjson, pods
from nodelet.model.core import status as st
from nodelet.model.reports import histograms as hg
from nodelet.model.reports import presenting
from nodelet.model.reports import timeline as tl

Listed = tuple[pods.Pod, st.PodStatus | None]

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

    def pods_page(self, listed: Sequence[Listed], now: datetime) -> str:
        return self._page("Pods", _pods_body(listed), now)

    def pod_page(self, pod: pods.Pod, status: st.PodStatus | None,
                 events: Sequence[ev.Event], now: datetime) -> str:
        t = tl.of_pod(pod, status, events, now)
        body = _pod_body(pod, status or st.PodStatus(), events, t)
        return self._page(f"{t.namespace}/{t.name}", body, now)

    def node_page(self, metrics: hg.SandboxMetrics, listed: Sequence[Listed],
                  now: datetime, *, gates: Sequence[tuple[str, bool]] = ()) -> str:
        body = _node_body(metrics, listed) + "\n<h2>Feature gates</h2>\n" + _gates_table(gates)
        return self._page("Node", body, now)

    def not_found_page(self, namespace: str, name: str, now: datetime) -> str:
        body = (f"<h1>Pod not found</h1><p class=\"empty\">No pod {_e(namespace)}/{_e(name)} "
                f'on this node. <a href="/ui">All pods</a></p>')
        return self._page("Not found", body, now)


# --- helpers


def _sandbox_condition(status: st.PodStatus) -> st.PodCondition | None:
    """The KEP-3085 condition, under its current name or its 1.25-1.27 one."""
    return next((c for c in map(status.condition, tl.SANDBOX_TYPES) if c is not None), None)


def sandbox_error(status: st.PodStatus) -> str:
    """The KEP-3085 condition's message while it is not True ('' otherwise)."""
    c = _sandbox_condition(status)
    return c.message or c.reason if c is not None and c.status != "True" else ""


def _status_reason(pod: pods.Pod, status: st.PodStatus) -> str:
    """kubectl's STATUS column, computed as `nodelet get pods` computes it."""
    return presenting.pod_status_reason(podjson.pod_to_api(pod, status))


def _badge(type_: str, cond: st.PodCondition | None) -> str:
    status = cond.status if cond is not None else ""
    cls = {"True": "true", "False": "false", "Unknown": "unknown"}.get(status, "absent")
    tip = f"{type_}={status or 'not reported'}"
    if cond is not None and cond.reason:
        tip += f" ({cond.reason})"
    return (f'<span class="badge {cls}" data-condition="{_e(type_)}" data-status="{_e(status)}" '
            f'title="{_e(tip)}">{_e(type_)}</span>')


def _badges(status: st.PodStatus) -> str:
    by_type = {c.type: c for c in status.conditions}
    shown: list[str] = []
    for types in tl.PHASES:
        type_ = next((t for t in types if t in by_type), types[0])
        shown.append(_badge(type_, by_type.get(type_)))
    known = {t for types in tl.PHASES for t in types}
    shown += [_badge(t, c) for t, c in by_type.items() if t not in known]
    return "".join(shown)


def _table(headers: Sequence[str], rows: Sequence[str], table_id: str, empty: str) -> str:
    if not rows:
        return f'<p class="empty" id="{table_id}">{_e(empty)}</p>'
    head = "".join(f'<th class="num">{_e(h[1:])}</th>' if h.startswith("#") else f"<th>{_e(h)}</th>"
                   for h in headers)
    return (f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>'
            + "\n".join(rows) + "</tbody></table>")


def _time(value: datetime | None) -> str:
    """A precise time (RFC 3339 with microseconds), `-` when not known."""
    return f'<span class="time">{_e(tl.format_time(value))}</span>'


# --- pods


def _pods_body(listed: Sequence[Listed]) -> str:
    ordered = sorted(listed, key=lambda p: (p[0].namespace, p[0].name))
    rows = [_pod_row(pod, status or st.PodStatus()) for pod, status in ordered]
    headers = ["Namespace", "Name", "Phase", "Status", "IP", "Conditions", "Sandbox error"]
    return f"<h1>Pods <span class=\"muted\">({len(rows)})</span></h1>" + _table(
        headers, rows, "pods", "No pods on this node.")


def _pod_row(pod: pods.Pod, status: st.PodStatus) -> str:
    namespace, name = pod.namespace, pod.name
    return (
        f'<tr class="pod" data-pod="{_e(namespace)}/{_e(name)}">'
        f"<td>{_e(namespace)}</td>"
        f'<td class="name"><a href="{_e(pod_path(namespace, name))}">{_e(name)}</a></td>'
        f'<td class="phase">{_e(status.phase)}</td>'
        f"<td>{_e(_status_reason(pod, status))}</td>"
        f'<td><span class="time">{_e(status.pod_ip or "-")}</span></td>'
        f'<td class="conditions">{_badges(status)}</td>'
        f'<td class="sandbox-error">{_e(sandbox_error(status))}</td></tr>'
    )


# --- one pod


def _pod_body(pod: pods.Pod, status: st.PodStatus, events: Sequence[ev.Event],
              t: tl.Timeline) -> str:
    parts = [f'<h1>{_e(t.name)} <span class="muted">in {_e(t.namespace)}</span></h1>',
             _facts(pod, status, t), _error_box(t),
             "<h2>Start-up timeline</h2>", f'<div class="chart">{svg.timeline(t)}</div>',
             "<h2>Conditions</h2>", _conditions_table(status, t),
             "<h2>Sandbox attempts</h2>", _attempts_table(t),
             "<h2>Events</h2>", _events_table(events)]
    return "\n".join(parts)


def _facts(pod: pods.Pod, status: st.PodStatus, t: tl.Timeline) -> str:
    facts = [
        ("Phase", _e(t.phase)), ("Status", _e(_status_reason(pod, status))),
        ("Pod IP", _e(status.pod_ip or "-")),
        ("Node", _e(pod.spec.node_name or "-")),
        ("UID", f"<code>{_e(pod.uid)}</code>"),
        ("Start time", _time(status.start_time)),
        ("Sandbox ready after", _e(tl.format_duration(t.sandbox_ready_latency))),
        *((("Termination", _e(tl.termination_label(t))),) if t.termination else ()),
        ("Conditions", _badges(status)),
    ]
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    return f'<dl class="facts">{items}</dl>'


def _error_box(t: tl.Timeline) -> str:
    if not t.sandbox_error:
        return ""
    sandbox = t.sandbox_ready
    attempts = f"{t.failed_attempts} failed sandbox attempt(s). " if t.failed_attempts else ""
    return (f'<section class="alert" id="sandbox-error"><h2>Sandbox not ready</h2>'
            f"<p><b>{_e(sandbox.type)}={_e(sandbox.status)}</b> ({_e(sandbox.reason)}) "
            f"since {_time(sandbox.last_transition)}</p>"
            f'<p class="message">{_e(t.sandbox_error)}</p>'
            f'<p class="muted">{_e(attempts)}The pod cannot start containers until the '
            f"sandbox is created and has its IP.</p></section>")


def _conditions_table(status: st.PodStatus, t: tl.Timeline) -> str:
    steps = {m.type: m for m in t.milestones}
    rank = {type_: i for i, types in enumerate(tl.PHASES) for type_ in types}
    rows = []
    for c in sorted(status.conditions, key=lambda c: rank.get(c.type, len(rank))):
        m = steps.get(c.type)
        since = tl.format_duration(m.since_start) if m and m.reached else ""
        step = f"{tl.format_duration(m.step)} after {m.step_from}" \
            if m and m.step is not None else ""
        rows.append(
            f'<tr data-condition="{_e(c.type)}"><td>{_e(c.type)}</td>'
            f"<td>{_badge(c.status, c)}</td><td>{_time(c.last_transition_time)}</td>"
            f'<td class="num">{_e(since)}</td><td>{_e(step)}</td>'
            f"<td>{_e(c.reason)}</td><td>{_e(c.message)}</td></tr>")
    headers = ["Type", "Status", "Last transition", "#+Scheduled", "Step", "Reason", "Message"]
    return _table(headers, rows, "conditions", "No conditions yet.")


def _attempts_table(t: tl.Timeline) -> str:
    rows = [
        f'<tr class="attempt {a.kind}"><td>{_time(a.first)}</td>'
        f"<td>{_time(a.last)}</td><td>{_e(a.reason)}</td>"
        f'<td class="num">{a.count}</td><td>{_e(a.message)}</td></tr>'
        for a in t.attempts
    ]
    return _table(["First", "Last", "Reason", "#Count", "Message"], rows, "attempts",
                  "No failed or replaced sandbox.")


def _events_table(events: Sequence[ev.Event]) -> str:
    rows = [
        f'<tr class="{_e(e.type.lower())}"><td class="type">{_e(e.type)}</td>'
        f'<td>{_e(e.reason)}</td><td class="num">{e.count}</td>'
        f"<td>{_time(e.first_timestamp)}</td><td>{_time(e.last_timestamp)}</td>"
        f"<td>{_e(e.message.strip())}</td></tr>"
        for e in sorted(events, key=lambda e: e.last_timestamp)
    ]
    return _table(["Type", "Reason", "#Count", "First seen", "Last seen", "Message"], rows,
                  "events", "No events.")


# --- node


def _node_body(metrics: hg.SandboxMetrics, listed: Sequence[Listed]) -> str:
    statuses = [status or st.PodStatus() for _, status in listed]
    ready = sum(1 for s in statuses
                if (c := _sandbox_condition(s)) is not None and c.status == "True")
    waiting = sum(1 for s in statuses if sandbox_error(s))
    summary = (f'<div class="summary" id="node-summary"><div><b>{len(listed)}</b>pods</div>'
               f"<div><b>{ready}</b>sandbox ready</div>"
               f"<div><b>{waiting}</b>sandbox not ready</div></div>")
    latency, run = metrics.ready_latency, metrics.run_duration
    parts = ["<h1>Node</h1>", summary,
             "<h2>Sandbox-ready latency</h2>",
             '<p class="muted">PodScheduled → PodReadyToStartContainers=True, first time '
             f"(<code>{_e(latency.name)}</code>)</p>",
             _histogram_section(latency, "sandbox-ready-histogram"),
             "<h2>RunPodSandbox duration</h2>",
             f'<p class="muted"><code>{_e(run.name)}</code>, all runtime handlers</p>',
             _histogram_section(run, "run-sandbox-histogram"),
             "<h2>Sandbox failures by error class</h2>", _failures_table(metrics.failures)]
    return "\n".join(parts)


def _histogram_section(h: hg.Histogram, element_id: str) -> str:
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


def _gates_table(gates: Sequence[tuple[str, bool]]) -> str:
    rows = [f'<tr data-gate="{_e(name)}" data-enabled="{str(on).lower()}"><td>{_e(name)}</td>'
            f"<td>{str(on).lower()}</td></tr>" for name, on in gates]
    return _table(["Gate", "Enabled"], rows, "feature-gates", "No feature gates reported.")


def _failures_table(failures: Sequence[tuple[str, float]]) -> str:
    rows = [f'<tr data-error-class="{_e(k)}"><td>{_e(k)}</td><td class="num">{v:g}</td></tr>'
            for k, v in failures if v]
    return _table(["Error class", "#Failures"], rows, "failures",
                  "No sandbox failures since the agent started.")
