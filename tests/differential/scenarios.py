"""The catalogue: pods both agents run from a manifest dir, and when each has settled.

A `Scenario` is one static pod (`<name>-<node>`): the manifest's `spec`, and `settled`, a
check of the pod as `/pods` serves it (a v1 Pod) that holds once the state to compare is
reached — the same check for both agents. `after` names a scenario whose pod must have
settled before this one is written (a hostPort taken first). Every pod runs busybox from the
local image archive (`BUSYBOX`); none needs the network beyond its own sandbox.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BUSYBOX = "localhost/nodelet/busybox:latest"
Pod = dict[str, Any]
# Host directories the scenarios' `hostPath: {type: DirectoryOrCreate}` volumes make: on a
# private mount of the host's (/tmp here), so HostToContainer propagation is refused.
PRIVATE_HOST_DIR = "/tmp/nodelet-twin-private"
HOST_PATHS_MADE = (PRIVATE_HOST_DIR,)


@dataclass(frozen=True)
class Scenario:
    name: str
    spec: str
    settled: Callable[[Pod], bool]
    after: str = ""

    def manifest(self) -> str:
        head = f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {self.name}\n"
        head += "  labels: {app: twin}\n  annotations: {note: differential}\n"
        return head + "spec:\n" + textwrap.indent(textwrap.dedent(self.spec), "  ")


# -- checks of a v1 Pod -------------------------------------------------------------------------


def _status(pod: Pod) -> dict[str, Any]:
    return pod.get("status") or {}


def phase(*phases: str) -> Callable[[Pod], bool]:
    """The pod is in one of `phases`; a terminal one once its sandbox is stopped too (both
    agents report the phase first, then stop the sandbox)."""
    def check(pod: Pod) -> bool:
        now = _status(pod).get("phase")
        if now in ("Succeeded", "Failed") and condition("PodReadyToStartContainers", "True")(pod):
            return False
        return now in phases
    return check


def _containers(pod: Pod, init: bool) -> list[dict[str, Any]]:
    key = "initContainerStatuses" if init else "containerStatuses"
    return _status(pod).get(key) or []


def waiting(reason: str, *, init: bool = False, name: str = "") -> Callable[[Pod], bool]:
    """A container (`name`, or any) waits with `reason`."""
    def check(pod: Pod) -> bool:
        return any((c.get("state") or {}).get("waiting", {}).get("reason") == reason
                   for c in _containers(pod, init) if not name or c.get("name") == name)
    return check


def backing_off(*, init: bool = False) -> Callable[[Pod], bool]:
    """A container (an init container) has restarted and is not running: the kubelet shows
    it waiting with CrashLoopBackOff or, between two of its syncs, terminated (seen for a
    whole minute under load), so either counts."""
    def check(pod: Pod) -> bool:
        return any(int(c.get("restartCount") or 0) >= 1
                   and "running" not in (c.get("state") or {}) for c in _containers(pod, init))
    return check


init_backing_off = backing_off(init=True)


def condition(type_: str, status: str) -> Callable[[Pod], bool]:
    def check(pod: Pod) -> bool:
        return any(c.get("type") == type_ and c.get("status") == status
                   for c in _status(pod).get("conditions") or [])
    return check


def running(pod: Pod) -> bool:
    cs = _containers(pod, False)
    return bool(cs) and all("running" in (c.get("state") or {}) for c in cs)


def restarted(count: int = 1) -> Callable[[Pod], bool]:
    def check(pod: Pod) -> bool:
        return any(int(c.get("restartCount") or 0) >= count for c in _containers(pod, False))
    return check


def all_of(*checks: Callable[[Pod], bool]) -> Callable[[Pod], bool]:
    def check(pod: Pod) -> bool:
        return all(c(pod) for c in checks)
    return check


ready = condition("Ready", "True")


def main(command: str, extra: str = "", *, name: str = "main") -> str:
    """A busybox container running `sh -c command`; `extra` is YAML under it."""
    text = (f"- name: {name}\n  image: {BUSYBOX}\n  imagePullPolicy: IfNotPresent\n"
            f"  command: [sh, -c, {command!r}]\n")
    return text + textwrap.indent(textwrap.dedent(extra), "  ")


def exec_main(path: str, *, name: str = "main") -> str:
    """A busybox container whose command is `path` alone, run without a shell."""
    return (f"- name: {name}\n  image: {BUSYBOX}\n  imagePullPolicy: IfNotPresent\n"
            f"  command: [{path}]\n")


def spec(containers: str, extra: str = "", *, restart: str = "Always", init: str = "",
         grace: int = 1) -> str:
    text = f"restartPolicy: {restart}\nterminationGracePeriodSeconds: {grace}\n"
    if init:
        text += "initContainers:\n" + textwrap.indent(init, "  ")
    text += "containers:\n" + textwrap.indent(containers, "  ")
    return text + textwrap.dedent(extra)


SLEEP = "sleep 1000000"
HTTPD = "mkdir -p /w && echo ok > /w/index.html && exec httpd -f -p 8080 -h /w"
CPU = "resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 100m, memory: 32Mi}}\n"


def _probe(kind: str, body: str) -> str:
    return f"{kind}: {{{body}, periodSeconds: 1, failureThreshold: 1}}\n"


CATALOGUE: tuple[Scenario, ...] = (
    # -- phases and restart policies
    Scenario("running", spec(main(SLEEP)), all_of(running, ready)),
    Scenario("succeeded", spec(main("true"), restart="Never"), phase("Succeeded")),
    Scenario("failed", spec(main("exit 3"), restart="Never"), phase("Failed")),
    Scenario("onfailure-ok", spec(main("true"), restart="OnFailure"), phase("Succeeded")),
    Scenario("onfailure-crash", spec(main("exit 1"), restart="OnFailure"), backing_off()),
    Scenario("always-completes", spec(main("true")), backing_off()),
    Scenario("crashloop", spec(main("exit 2")), backing_off()),
    Scenario("two-one-fails",
             spec(main("exit 4") + main("true", name="other"), restart="Never"),
             phase("Failed")),
    Scenario("termination-message",
             spec(main("echo bye > /dev/termination-log; exit 1"), restart="Never"),
             phase("Failed")),
    Scenario("termination-log-fallback",
             spec(main("echo from-log; exit 1", "terminationMessagePolicy: "
                       "FallbackToLogsOnError\n"), restart="Never"), phase("Failed")),
    Scenario("killed-by-signal", spec(main("kill -9 $$"), restart="Never"), phase("Failed")),
    # -- a command that cannot start: the runtime's StartError (exit code 128)
    Scenario("start-error-never", spec(exec_main("/no-such-file"), restart="Never"),
             phase("Failed")),
    Scenario("start-not-executable", spec(exec_main("/etc/hosts"), restart="Never"),
             phase("Failed")),
    Scenario("start-error-always", spec(exec_main("/no-such-file")), backing_off()),
    # A container the runtime cannot create: propagation from a private host mount.
    Scenario("create-error", spec(
        main(SLEEP, "volumeMounts: [{name: h, mountPath: /h, mountPropagation: "
                    "HostToContainer}]\n"),
        f"volumes: [{{name: h, hostPath: {{path: {PRIVATE_HOST_DIR}, "
        "type: DirectoryOrCreate}}]\n", restart="Never"), waiting("CreateContainerError")),
    # -- init containers and sidecars
    Scenario("init-ok", spec(main(SLEEP), init=main("true", name="init")),
             all_of(running, ready)),
    Scenario("init-two", spec(main(SLEEP), init=main("true", name="a") + main("true", name="b")),
             all_of(running, ready)),
    Scenario("init-fails-never", spec(main(SLEEP), restart="Never",
                                      init=main("exit 1", name="init")), phase("Failed")),
    Scenario("init-fails-onfailure", spec(main(SLEEP), restart="OnFailure",
                                          init=main("exit 1", name="init")), init_backing_off),
    Scenario("init-fails-always", spec(main(SLEEP), init=main("exit 1", name="init")),
             init_backing_off),
    Scenario("sidecar", spec(main(SLEEP), init=main(SLEEP, "restartPolicy: Always\n",
                                                    name="side")),
             all_of(running, ready)),
    Scenario("sidecar-main-exits", spec(main("true"), restart="Never",
                                        init=main(SLEEP, "restartPolicy: Always\n",
                                                  name="side")), phase("Succeeded")),
    # -- probes
    Scenario("readiness-exec-ok", spec(main(SLEEP, _probe("readinessProbe",
                                                          "exec: {command: [true]}"))),
             ready),
    Scenario("readiness-exec-fails", spec(main(SLEEP, _probe("readinessProbe",
                                                             "exec: {command: [false]}"))),
             all_of(running, condition("Ready", "False"), restarted(0))),
    Scenario("readiness-http-ok", spec(main(HTTPD, _probe(
        "readinessProbe", "httpGet: {port: 8080, path: /index.html}"))), ready),
    Scenario("readiness-http-refused", spec(main(SLEEP, _probe(
        "readinessProbe", "httpGet: {port: 8081, path: /}"))),
        all_of(running, condition("Ready", "False"))),
    Scenario("readiness-tcp-ok", spec(main(HTTPD, _probe(
        "readinessProbe", "tcpSocket: {port: 8080}"))), ready),
    Scenario("readiness-tcp-refused", spec(main(SLEEP, _probe(
        "readinessProbe", "tcpSocket: {port: 8081}"))),
        all_of(running, condition("Ready", "False"))),
    Scenario("readiness-grpc-refused", spec(main(SLEEP, _probe(
        "readinessProbe", "grpc: {port: 8081}"))), all_of(running, condition("Ready", "False"))),
    Scenario("liveness-exec-fails", spec(main(SLEEP, _probe(
        "livenessProbe", "exec: {command: [false]}"))), restarted(1)),
    Scenario("startup-exec-fails", spec(main(SLEEP, _probe(
        "startupProbe", "exec: {command: [false]}"))), restarted(1)),
    Scenario("startup-then-ready", spec(main(SLEEP, _probe(
        "startupProbe", "exec: {command: [true]}") + _probe(
        "readinessProbe", "exec: {command: [true]}"))), ready),
    # -- lifecycle hooks
    Scenario("poststart-ok", spec(main(SLEEP, "lifecycle: {postStart: {exec: {command: "
                                              "[sh, -c, 'echo hi > /tmp/x']}}}\n")),
             all_of(running, ready)),
    Scenario("poststart-fails", spec(main(SLEEP, "lifecycle: {postStart: {exec: {command: "
                                                 "[sh, -c, 'exit 7']}}}\n")),
             all_of(restarted(1), waiting("CrashLoopBackOff"))),
    Scenario("poststart-fails-never", spec(main(SLEEP, "lifecycle: {postStart: {exec: "
                                                       "{command: [sh, -c, 'exit 7']}}}\n"),
                                           restart="Never"), phase("Failed")),
    # -- images
    Scenario("image-missing-never", spec(
        main(SLEEP).replace("imagePullPolicy: IfNotPresent", "imagePullPolicy: Never")
        .replace(BUSYBOX, "localhost/nodelet/absent:1")), waiting("ErrImageNeverPull")),
    Scenario("image-unreachable", spec(
        main(SLEEP).replace(BUSYBOX, "127.0.0.1:9/nodelet/absent:1")),
        waiting("ImagePullBackOff")),
    Scenario("image-bad-name", spec(main(SLEEP).replace(BUSYBOX, "Not//Valid")),
             waiting("InvalidImageName")),
    # Image volumes: pulled whether a container mounts them or not.
    Scenario("image-volume-missing", spec(
        main(SLEEP, "volumeMounts: [{name: i, mountPath: /i}]\n"),
        "volumes: [{name: i, image: {reference: localhost/nodelet/absent:2, "
        "pullPolicy: Never}}]\n"), waiting("ErrImageNeverPull")),
    Scenario("image-volume-unmounted", spec(
        main(SLEEP), "volumes: [{name: i, image: {reference: localhost/nodelet/absent:3, "
                     "pullPolicy: Never}}]\n"), all_of(running, ready)),
    Scenario("image-volume-present", spec(
        main(SLEEP, "volumeMounts: [{name: i, mountPath: /i}]\n"),
        f"volumes: [{{name: i, image: {{reference: {BUSYBOX}, pullPolicy: IfNotPresent}}}}]\n"),
        all_of(running, ready)),
    # -- volumes
    Scenario("configmap-missing", spec(main(SLEEP, "volumeMounts: [{name: c, mountPath: /c}]\n"),
                                       "volumes: [{name: c, configMap: {name: absent}}]\n"),
             condition("PodReadyToStartContainers", "False")),
    Scenario("secret-missing", spec(main(SLEEP, "volumeMounts: [{name: s, mountPath: /s}]\n"),
                                    "volumes: [{name: s, secret: {secretName: absent}}]\n"),
             condition("PodReadyToStartContainers", "False")),
    Scenario("configmap-optional", spec(
        main(SLEEP, "volumeMounts: [{name: c, mountPath: /c}]\n"),
        "volumes: [{name: c, configMap: {name: absent, optional: true}}]\n"),
        all_of(running, ready)),
    Scenario("downward-api", spec(
        main(SLEEP, "volumeMounts: [{name: d, mountPath: /d}]\n"),
        "volumes: [{name: d, downwardAPI: {items: [{path: labels, fieldRef: "
        "{fieldPath: metadata.labels}}]}}]\n"), all_of(running, ready)),
    Scenario("emptydir-subpath", spec(
        main(SLEEP, "volumeMounts: [{name: e, mountPath: /e, subPath: sub}]\n"),
        "volumes: [{name: e, emptyDir: {}}]\n"), all_of(running, ready)),
    Scenario("volume-mounts", spec(
        main(SLEEP, "volumeMounts: [{name: e, mountPath: /e}, {name: r, mountPath: /r, "
                    "readOnly: true}, {name: r, mountPath: /rr, readOnly: true, "
                    "recursiveReadOnly: IfPossible}]\n"),
        "volumes: [{name: e, emptyDir: {}}, {name: r, emptyDir: {}}]\n",
        init=main("true", "volumeMounts: [{name: r, mountPath: /r, readOnly: true}]\n",
                  name="init")
        + main(SLEEP, "restartPolicy: Always\nvolumeMounts: [{name: e, mountPath: /e}]\n",
               name="side")),
        all_of(running, ready)),
    Scenario("hostpath-type-missing", spec(
        main(SLEEP, "volumeMounts: [{name: h, mountPath: /h}]\n"),
        "volumes: [{name: h, hostPath: {path: /nonexistent-twin, type: Directory}}]\n"),
        condition("PodReadyToStartContainers", "False")),
    # -- environment
    Scenario("env-configmap-missing", spec(main(SLEEP, "env: [{name: X, valueFrom: "
                                                       "{configMapKeyRef: {name: absent, "
                                                       "key: k}}}]\n")),
             waiting("CreateContainerConfigError")),
    Scenario("env-secret-optional", spec(main(SLEEP, "env: [{name: X, valueFrom: "
                                                     "{secretKeyRef: {name: absent, key: k, "
                                                     "optional: true}}}]\n")),
             all_of(running, ready)),
    Scenario("env-field-and-resource", spec(main(SLEEP, (
        "env:\n- {name: NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}\n"
        "- {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}\n"
        "- {name: MEMORY, valueFrom: {resourceFieldRef: {resource: limits.memory}}}\n"))),
        all_of(running, ready)),
    # -- security
    Scenario("run-as-non-root-refused", spec(main(SLEEP, "securityContext: "
                                                         "{runAsNonRoot: true}\n")),
             waiting("CreateContainerConfigError")),
    # A user namespace: the mapped user must traverse the runtime's state (the embedded
    # containerd keeps it under /run, wherever the data dir is).
    Scenario("host-users-false", spec(main(SLEEP), "hostUsers: false\n"),
             all_of(running, ready)),
    Scenario("run-as-non-root-uid", spec(main(SLEEP, "securityContext: "
                                                     "{runAsNonRoot: true, runAsUser: 1000}\n")),
             all_of(running, ready)),
    Scenario("unsafe-sysctl", spec(main(SLEEP), "securityContext: {sysctls: "
                                                "[{name: kernel.msgmax, value: '65536'}]}\n"),
             phase("Failed")),
    Scenario("node-selector-unmatched", spec(main(SLEEP), "nodeSelector: {twin: absent}\n"),
             phase("Failed")),
    # -- resources and QoS
    Scenario("qos-guaranteed", spec(main(SLEEP, CPU)), all_of(running, ready)),
    Scenario("qos-burstable", spec(main(SLEEP, "resources: {requests: {memory: 16Mi}}\n")),
             all_of(running, ready)),
    # Written once the one other pod requesting cpu runs: what the refusal says is short
    # counts it on both agents.
    Scenario("out-of-cpu", spec(main(SLEEP, "resources: {requests: {cpu: '1000'}}\n")),
             phase("Failed"), after="qos-guaranteed"),
    Scenario("oom-killed", spec(main("tail /dev/zero", "resources: {limits: {memory: 16Mi}}\n"),
                                restart="Never"), phase("Failed")),
    Scenario("hostport-first", spec(main(SLEEP, "ports: [{containerPort: 80, "
                                                "hostPort: 18481}]\n")), all_of(running, ready)),
    Scenario("hostport-taken", spec(main(SLEEP, "ports: [{containerPort: 80, "
                                                "hostPort: 18481}]\n")), phase("Failed"),
             after="hostport-first"),
    # -- time rules, gates, network
    Scenario("active-deadline", spec(main(SLEEP), "activeDeadlineSeconds: 3\n"),
             phase("Failed")),
    Scenario("readiness-gate", spec(main(SLEEP), "readinessGates: "
                                                 "[{conditionType: example.com/gate}]\n"),
             all_of(running, condition("ContainersReady", "True"))),
    Scenario("host-network", spec(main(SLEEP), "hostNetwork: true\n"), all_of(running, ready)),
    Scenario("dns-too-many-nameservers", spec(main(SLEEP), (
        "dnsPolicy: None\ndnsConfig: {nameservers: [192.0.2.1, 192.0.2.2, 192.0.2.3, "
        "192.0.2.4]}\n")), all_of(running, ready)),
)
