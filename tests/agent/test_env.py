"""Container environments on real containerd: env valueFrom (ConfigMap, Secret, downward API),
envFrom with a prefix, `$(VAR)` in args, subPathExpr, and a missing ConfigMap that holds one
container back (CreateContainerConfigError) until its manifest is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import AgentFactory
from nodelet import settings as settings_
from nodelet.model.core import nodes
from nodelet.model.core import status as st
from support.harness import Harness, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

OBJECTS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {host: db.local, port: "5432", 1st: kept-with-prefix}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {user: admin, password: s3cret, 9lives: skipped}
"""

# Under `main`: every source, a `$(VAR)` in a value and in args, a subPathExpr mount.
ENV_CONTAINER = """\
args: ["$(GREETING), $(POD_NAME)! $$(POD_NAME)", "$(NOPE)"]
resources:
  limits: {memory: 64Mi, cpu: 500m}
env:
  - {name: DB_HOST, valueFrom: {configMapKeyRef: {name: settings, key: host}}}
  - {name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}}
  - {name: MISSING_OK, valueFrom: {configMapKeyRef: {name: nowhere, key: k, optional: true}}}
  - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
  - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
  - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
  - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
  - {name: TEST_LABEL, valueFrom: {fieldRef: {fieldPath: "metadata.labels['test']"}}}
  - {name: MEMORY_MI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
  - {name: CPU_MILLI, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
  - {name: GREETING, value: "hello from $(DB_HOST):$(CM_port)"}
envFrom:
  - {prefix: CM_, configMapRef: {name: settings}}
  - {secretRef: {name: creds}}
volumeMounts:
  - {name: scratch, mountPath: /scratch, subPathExpr: "$(POD_NAMESPACE)/$(POD_NAME)"}
"""


async def log_of(agent: Harness, name: str, container: str = "main") -> Path:
    pod, _ = await eventually(lambda: agent.find(name), within=30, what=f"pod {name} admitted")
    return (agent.settings.data_dir / "logs" / f"default_{pod.name}_{pod.uid}" / container
            / "0.log")


def log_text(path: Path) -> str:
    """The log's messages (CRI lines are `<time> <stream> <tag> <message>`)."""
    if not path.exists():
        return ""
    return "\n".join(line.split(" ", 3)[3] for line in path.read_text().splitlines()
                     if line.count(" ") >= 3)


async def test_env_sources_expansion_and_sub_path_expr(agent: Harness) -> None:
    agent.write("objects.yaml", OBJECTS)
    agent.write("pod.yaml", pod_manifest(
        "envpod", container_extra=ENV_CONTAINER,
        command='echo "arg0=$0"; echo "arg1=$1"; env | sort; touch /scratch/written-here; '
                'echo done; sleep 1000000',
        extra_spec="volumes:\n  - {name: scratch, emptyDir: {}}\n"))
    log = await log_of(agent, "envpod")
    await eventually(lambda: "done" in log_text(log).splitlines(), within=30, what="the env dump")
    lines = log_text(log).splitlines()
    pod_status = agent.status_of("envpod")
    assert pod_status is not None and pod_status.pod_ip
    pod_name = "envpod-testnode"
    # `sh -c SCRIPT ARGS...` makes the first arg $0. Known names are expanded, `$$` escapes,
    # unknown references stay as written.
    assert lines[:2] == [f"arg0=hello from db.local:5432, {pod_name}! $(POD_NAME)",
                         "arg1=$(NOPE)"]
    variables = dict(line.split("=", 1) for line in lines if "=" in line)
    expected = {
        "DB_HOST": "db.local", "DB_PASSWORD": "s3cret", "POD_NAME": pod_name,
        "POD_NAMESPACE": "default", "POD_IP": pod_status.pod_ip, "NODE_NAME": "testnode",
        "TEST_LABEL": "nodelet", "MEMORY_MI": "64", "CPU_MILLI": "500",
        "GREETING": "hello from db.local:5432", "CM_host": "db.local", "CM_port": "5432",
        "user": "admin", "password": "s3cret", "CM_1st": "kept-with-prefix",
    }
    assert {k: variables.get(k) for k in expected} == expected
    assert "MISSING_OK" not in variables and "9lives" not in variables
    assert any(e.reason == "InvalidEnvironmentVariableNames" and e.message == (
        "Keys [9lives] from the EnvFrom secret default/creds were skipped since they "
        "are considered invalid environment variable names.") for e in agent.events_of("envpod"))
    found = agent.find("envpod")
    assert found is not None
    volume = (agent.settings.data_dir / "pods" / found[0].uid / "volumes" /
              "kubernetes.io~empty-dir" / "scratch")
    assert (volume / "default" / pod_name / "written-here").exists()


MISSING_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: waits}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: needs-config
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "echo value=$LATE; sleep 1000000"]
      env:
        - {name: LATE, valueFrom: {configMapKeyRef: {name: late, key: k}}}
    - name: free
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "sleep 1000000"]
"""


def container_state(pod_status: st.PodStatus | None, name: str) -> st.ContainerStateValue | None:
    if pod_status is None:
        return None
    found = [c.state for c in pod_status.container_statuses if c.name == name]
    return found[0] if found else None


async def test_missing_config_map_holds_the_container_until_it_appears(agent: Harness) -> None:
    agent.write("pod.yaml", MISSING_POD)
    message = 'configmap "late" not found'

    def config_error(pod_status: st.PodStatus) -> bool:
        state = container_state(pod_status, "needs-config")
        free = container_state(pod_status, "free")
        return (isinstance(state, st.ContainerStateWaiting)
                and state.reason == "CreateContainerConfigError" and state.message == message
                and isinstance(free, st.ContainerStateRunning))

    pod_status = await agent.wait_status("waits", config_error,
                                         what="CreateContainerConfigError, the other running")
    assert pod_status.phase == "Pending"
    failed = [e for e in agent.events_of("waits") if e.reason == "Failed"]
    assert failed and failed[0].type == "Warning" and failed[0].message == f"Error: {message}"

    agent.write("late.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late}\n"
                             "data: {k: arrived}\n")
    await agent.wait_status(
        "waits", lambda s: isinstance(container_state(s, "needs-config"), st.ContainerStateRunning),
        what="the container started once the ConfigMap exists")
    log = await log_of(agent, "waits", "needs-config")
    await eventually(lambda: "value=arrived" in log_text(log), within=30,
                     what="the value in the log")


UNLIMITED_CONTAINER = """\
env:
  - {name: MEMORY_KI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Ki}}}
  - {name: CPU_MILLI, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
"""


async def test_an_unset_limit_is_the_nodes_allocatable(make_agent: AgentFactory) -> None:
    agent = await make_agent(node=settings_.NodeSettings(
        system_reserved=(("cpu", "300m"), ("memory", "200Mi"))))
    agent.write("pod.yaml", pod_manifest(
        "unlimited", container_extra=UNLIMITED_CONTAINER,
        command='env | sort; echo done; sleep 1000000'))
    log = await log_of(agent, "unlimited")
    await eventually(lambda: "done" in log_text(log).splitlines(), within=30, what="the env dump")
    variables = dict(line.split("=", 1) for line in log_text(log).splitlines() if "=" in line)
    spec = agent.agent_or_fail().node_spec
    allocatable, capacity = nodes.allocatable(spec), nodes.capacity(spec)
    # The kubelet's defaultPodLimitsForDownwardAPI: allocatable, not the machine's capacity.
    assert allocatable["memory"] < capacity["memory"] and allocatable["cpu"] < capacity["cpu"]
    assert variables["MEMORY_KI"] == str(-(-allocatable["memory"] // 1024))
    assert variables["CPU_MILLI"] == str(allocatable["cpu"])
