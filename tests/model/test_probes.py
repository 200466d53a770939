"""Probe parsing/validation and the kubelet's result-threshold machine (pure, table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from nodelet.model.core import handlers, pods, probes
from nodelet.model.parsing import manifests, probespecs

EXEC = {"exec": {"command": ["cat", "/tmp/healthy"]}}


# --- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(EXEC, handlers.Probe(handlers.ExecAction(("cat", "/tmp/healthy"))),
                     id="defaults"),
        pytest.param(
            {**EXEC, "initialDelaySeconds": 5, "periodSeconds": 2, "timeoutSeconds": 3,
             "successThreshold": 2, "failureThreshold": 7},
            handlers.Probe(handlers.ExecAction(("cat", "/tmp/healthy")), 5, 2, 3, 2, 7),
            id="all-timings",
        ),
        pytest.param(
            # The API's defaulting: an explicit 0 reads as "not set".
            {**EXEC, "periodSeconds": 0, "timeoutSeconds": 0, "failureThreshold": 0},
            handlers.Probe(handlers.ExecAction(("cat", "/tmp/healthy"))),
            id="zero-is-default",
        ),
        pytest.param(
            {"httpGet": {"port": 8080}},
            handlers.Probe(handlers.HTTPGetAction(port=8080)),
            id="http-defaults",
        ),
        pytest.param(
            {"httpGet": {"port": "web", "path": "healthz", "host": "10.1.2.3", "scheme": "HTTPS",
                         "httpHeaders": [{"name": "X-Probe", "value": "1"}]}},
            handlers.Probe(handlers.HTTPGetAction(
                port="web", path="/healthz", host="10.1.2.3", scheme="HTTPS",
                headers=(("X-Probe", "1"),),
            )),
            id="http-everything",
        ),
        pytest.param(
            {"tcpSocket": {"port": "db"}},
            handlers.Probe(handlers.TCPSocketAction(port="db")),
            id="tcp-named-port",
        ),
        pytest.param(
            {"grpc": {"port": 9090, "service": "ready"}},
            handlers.Probe(handlers.GRPCAction(port=9090, service="ready")),
            id="grpc",
        ),
    ],
)
def test_parse_fills_in_the_defaults(raw: dict[str, Any], expected: handlers.Probe) -> None:
    assert probespecs.parse_probe(raw, "readiness") == expected


@pytest.mark.parametrize(
    ("raw", "kind", "path", "message"),
    [
        ({}, "liveness", "livenessProbe", "must specify a handler type"),
        ({**EXEC, "tcpSocket": {"port": 1}}, "liveness", "livenessProbe.tcpSocket",
         "may not specify more than 1 handler type (found exec, tcpSocket)"),
        ({"exec": {"command": []}}, "liveness", "livenessProbe.exec.command", "required"),
        ({"exec": {"command": "cat /x"}}, "liveness", "livenessProbe.exec.command",
         "expected a list of strings"),
        ({"exec": "cat"}, "liveness", "livenessProbe.exec", "expected a mapping"),
        ({**EXEC, "periodSeconds": -1}, "liveness", "livenessProbe.periodSeconds",
         "must be greater than or equal to 0"),
        ({**EXEC, "timeoutSeconds": "1s"}, "liveness", "livenessProbe.timeoutSeconds",
         "expected an integer"),
        ({**EXEC, "successThreshold": 2}, "liveness", "livenessProbe.successThreshold",
         "must be 1 (for liveness probes)"),
        ({**EXEC, "successThreshold": 3}, "startup", "startupProbe.successThreshold",
         "must be 1 (for startup probes)"),
        ({**EXEC, "terminationGracePeriodSeconds": 5}, "readiness",
         "readinessProbe.terminationGracePeriodSeconds", "must not be set for readinessProbes"),
        ({**EXEC, "terminationGracePeriodSeconds": 0}, "liveness",
         "livenessProbe.terminationGracePeriodSeconds", "greater than 0"),
        ({**EXEC, "periodSecond": 5}, "liveness", "livenessProbe.periodSecond",
         'unknown field "periodSecond"'),
        ({"httpGet": {}}, "readiness", "readinessProbe.httpGet.port", "required"),
        ({"httpGet": {"port": 70000}}, "readiness", "readinessProbe.httpGet.port",
         "between 1 and 65535"),
        ({"httpGet": {"port": "8080"}}, "readiness", "readinessProbe.httpGet.port",
         "is not a valid port name: must contain at least one letter (a-z)"),
        ({"httpGet": {"port": 80, "scheme": "FTP"}}, "readiness",
         "readinessProbe.httpGet.scheme", 'unsupported value "FTP"'),
        ({"httpGet": {"port": 80, "httpHeaders": [{"name": "bad name", "value": ""}]}},
         "readiness", "readinessProbe.httpGet.httpHeaders[0].name", "not a valid HTTP header"),
        ({"httpGet": {"port": 80, "query": "x"}}, "readiness", "readinessProbe.httpGet.query",
         "unknown field"),
        ({"grpc": {"port": "grpc"}}, "readiness", "readinessProbe.grpc.port",
         "expected an integer"),
    ],
)
def test_parse_rejects_with_the_field_path(
    raw: dict[str, Any], kind: probes.ProbeKind, path: str, message: str
) -> None:
    with pytest.raises(probes.ProbeError) as caught:
        probespecs.parse_probe(raw, kind)
    assert caught.value.path == path
    assert message in caught.value.message


def test_container_probes_list_kinds_startup_first() -> None:
    container = pods.Container(
        name="app", image="busybox",
        readiness_probe=probespecs.parse_probe({"tcpSocket": {"port": 80}}, "readiness"),
        startup_probe=probespecs.parse_probe(EXEC, "startup"),
    )
    parsed = probes.container_probes(container)
    assert parsed.kinds == ("startup", "readiness")
    assert parsed.liveness is None


def test_probe_errors_in_a_manifest_name_the_container_field() -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "app", "image": "busybox",
                                    "livenessProbe": {"grpc": {}}}]}}
    with pytest.raises(manifests.InvalidValueError) as caught:
        manifests.pod_from_object(obj, node_name="n")
    assert caught.value.path == "spec.containers[0].livenessProbe.grpc.port"


# --- ports and URLs ------------------------------------------------------------------------

WEB = pods.Container(
    name="web", image="busybox",
    ports=(pods.ContainerPort(8080, name="http"), pods.ContainerPort(9000)),
)


@pytest.mark.parametrize(("port", "expected"), [(8080, 8080), (81, 81), ("http", 8080)])
def test_resolve_port(port: int | str, expected: int) -> None:
    assert probes.resolve_port(port, WEB) == expected


def test_resolve_unknown_port_name_names_the_container() -> None:
    with pytest.raises(probes.ProbeError, match='container "web" has no port named "grpc"'):
        probes.resolve_port("grpc", WEB)


@pytest.mark.parametrize(
    ("action", "pod_ip", "url"),
    [
        (handlers.HTTPGetAction(port=80), "10.0.0.5", "http://10.0.0.5:80/"),
        (handlers.HTTPGetAction(port=80, path="/healthz?full=1"), "10.0.0.5",
         "http://10.0.0.5:80/healthz?full=1"),
        (handlers.HTTPGetAction(port=443, host="example.test", scheme="HTTPS"), "10.0.0.5",
         "https://example.test:443/"),
        (handlers.HTTPGetAction(port=80), "fd00::5", "http://[fd00::5]:80/"),
    ],
)
def test_http_url(action: handlers.HTTPGetAction, pod_ip: str, url: str) -> None:
    assert probes.http_url(action, pod_ip=pod_ip, port=action.port) == url  # type: ignore[arg-type]


# --- the threshold machine -----------------------------------------------------------------


def _run(
    kind: probes.ProbeKind, outcomes: str, *, success: int = 1, failure: int = 3
) -> list[tuple[str | None, bool]]:
    """(reported result, on hold) after each attempt; outcomes: s(uccess) f(ailure) e(rror)."""
    probe = handlers.Probe(handlers.ExecAction(("true",)), success_threshold=success,
                         failure_threshold=failure)
    names: dict[str, probes.Outcome] = {"s": "success", "f": "failure", "e": "error"}
    state = probes.initial_state(kind)
    seen: list[tuple[str | None, bool]] = []
    for letter in outcomes:
        state = probes.observe(state, names[letter], kind=kind, probe=probe)
        seen.append((state.result[0] if state.result else None, state.on_hold))
    return seen


S, F, N = ("s", False), ("f", False), (None, False)
HOLD = ("f", True)


@pytest.mark.parametrize(
    ("kind", "outcomes", "success", "failure", "expected"),
    [
        # Readiness starts not ready, turns ready after successThreshold successes in a row.
        ("readiness", "s", 1, 3, [S]),
        ("readiness", "sfs", 2, 3, [F, F, F]),
        ("readiness", "ss", 2, 3, [F, S]),
        # ... and unready after failureThreshold failures in a row; it keeps probing.
        ("readiness", "sfffs", 1, 3, [S, S, S, F, S]),
        ("readiness", "sffsff", 1, 3, [S, S, S, S, S, S]),
        # Errored attempts neither count nor break a run.
        ("readiness", "ffeef", 1, 3, [F, F, F, F, F]),
        ("readiness", "sseff", 1, 2, [S, S, S, S, F]),
        # Liveness starts alive; after failureThreshold failures it fails and holds.
        ("liveness", "ff", 1, 3, [S, S]),
        ("liveness", "fff", 1, 3, [S, S, HOLD]),
        ("liveness", "fffss", 1, 3, [S, S, HOLD, HOLD, HOLD]),
        ("liveness", "ffsff", 1, 3, [S, S, S, S, S]),
        ("liveness", "f", 1, 1, [HOLD]),
        # Startup is unknown until it succeeds once, or fails failureThreshold times.
        ("startup", "ffs", 1, 3, [N, N, S]),
        ("startup", "fff", 1, 3, [N, N, HOLD]),
        ("startup", "e", 1, 3, [N]),
    ],
)
def test_threshold_machine(
    kind: probes.ProbeKind, outcomes: str, success: int, failure: int,
    expected: list[tuple[str | None, bool]],
) -> None:
    assert _run(kind, outcomes, success=success, failure=failure) == expected


@pytest.mark.parametrize(
    ("kind", "output", "errored", "message"),
    [
        ("liveness", "cat: can't open '/tmp/healthy'\n", False,
         "Liveness probe failed: cat: can't open '/tmp/healthy'"),
        ("readiness", "HTTP probe failed with statuscode: 500", False,
         "Readiness probe failed: HTTP probe failed with statuscode: 500"),
        ("startup", "no port", True, "Startup probe errored: no port"),
    ],
)
def test_failure_message(
    kind: probes.ProbeKind, output: str, errored: bool, message: str
) -> None:
    assert probes.failure_message(kind, output, errored=errored) == message


def test_a_warning_counts_as_a_success_and_has_the_kubelets_words() -> None:
    probe = handlers.Probe(handlers.ExecAction(("true",)), period_seconds=1)
    state = probes.observe(probes.initial_state("readiness"), "warning", kind="readiness",
                           probe=probe)
    assert state.result == "success"
    assert probes.warning_message("liveness", "Probe terminated redirects, Response body: x\n") \
        == "Liveness probe warning: Probe terminated redirects, Response body: x"
