"""Env files (`env[].valueFrom.fileKeyRef`) on real containerd: an init container writes an env
file into an emptyDir, the containers after it see its keys (a multi-line value, a symlink
inside the volume, an optional key that is missing, an init container reading it too); a
missing key and a missing file hold a container back with the kubelet's words
(CreateContainerConfigError) until the file is there, as the kubelet reads it at each start.
And the reader itself on a directory: paths resolved inside the volume as securejoin does."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from nodelet.adapters import mounts
from nodelet.model.core import envfiles, pods
from nodelet.model.core import status as st
from nodelet.services.podwork import fileenv
from support.harness import Harness
from support.polling import eventually

BUSYBOX = {"image": "localhost/nodelet/busybox:latest", "imagePullPolicy": "IfNotPresent"}
CONFIG = {"name": "config", "emptyDir": {}}
MOUNT = [{"name": "config", "mountPath": "/data"}]


def file_ref(name: str, key: str, path: str = "config.env", optional: bool = False) -> Any:
    ref = {"volumeName": "config", "path": path, "key": key}
    return {"name": name, "valueFrom": {"fileKeyRef": {**ref, "optional": True} if optional
                                        else ref}}


def container(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, **BUSYBOX, "command": ["sh", "-c", script], **extra}


def pod_manifest(name: str, spec: dict[str, Any]) -> str:
    """The pod as JSON, which is YAML too."""
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"terminationGracePeriodSeconds": 1, "volumes": [CONFIG],
                                **spec}})


# `printf` writes the file as the e2e specs' `echo` does, with a comment, a multi-line value,
# a CRLF line and a symlink to it in a directory.
WRITER = (
    "printf '%s\\n' '# written by setup' \"CONFIG_1='value1'\" \"CONFIG_2='two words'\" "
    "\"MULTI='line one\" \"line two'\" > /data/config.env && "
    "printf \"CRLF='dos'\\r\\n\" >> /data/config.env && "
    "mkdir /data/sub && ln -s ../config.env /data/sub/link.env"
)

CONSUMER_POD = pod_manifest("envfiles", {
    "restartPolicy": "Never",
    "initContainers": [
        container("setup-envfile", WRITER, volumeMounts=MOUNT),
        container("init-reads", 'echo "init sees $CONFIG_1"',
                  env=[file_ref("CONFIG_1", "CONFIG_1")]),
    ],
    "containers": [container(
        "use-envfile",
        "env | grep -E '^(CONFIG|CRLF|LINKED|OPTIONAL)' | sort; printf 'MULTI=%s|\\n' \"$MULTI\"",
        env=[file_ref("CONFIG_1", "CONFIG_1"), file_ref("CONFIG_2", "CONFIG_2"),
             file_ref("MULTI", "MULTI"), file_ref("CRLF", "CRLF"),
             file_ref("LINKED", "CONFIG_1", path="sub/link.env"),
             file_ref("OPTIONAL_MISSING_KEY", "NOPE", optional=True)])],
})


async def log_lines(agent: Harness, name: str, container: str) -> list[str]:
    found = await eventually(lambda: agent.find(name), within=30, what=f"pod {name} admitted")
    pod = found[0]
    path = (agent.settings.data_dir / "logs" / f"default_{pod.name}_{pod.uid}" / container
            / "0.log")
    # CRI lines are `<time> <stream> <tag> <message>`.
    return [line.split(" ", 3)[3] for line in path.read_text().splitlines()
            if line.count(" ") >= 3]


@pytest.mark.runtime
async def test_containers_see_the_keys_an_init_container_wrote(agent: Harness) -> None:
    agent.write("pod.yaml", CONSUMER_POD)
    await agent.wait_status("envfiles", lambda s: s.phase == "Succeeded",
                            what="the pod Succeeded")
    assert await log_lines(agent, "envfiles", "init-reads") == ["init sees value1"]
    assert await log_lines(agent, "envfiles", "use-envfile") == [
        "CONFIG_1=value1", "CONFIG_2=two words", "CRLF=dos", "LINKED=value1",
        "MULTI=line one", "line two|",
    ]


BLOCKED_POD = pod_manifest("blocked", {
    "initContainers": [container("setup-envfile",
                                 "echo EXISTING_KEY=\\'value\\' > /data/config.env",
                                 volumeMounts=MOUNT)],
    "containers": [
        container("needs-key", 'echo "late=$LATE"; sleep 1000000',
                  env=[file_ref("LATE", "LATE_KEY")]),
        container("needs-file", 'echo "other=$OTHER"; sleep 1000000',
                  env=[file_ref("OTHER", "OTHER", path="later.env", optional=True)]),
        container("free", "sleep 1000000"),
    ],
})


def state_of(pod_status: st.PodStatus, name: str) -> st.ContainerStateValue | None:
    found = [c.state for c in pod_status.container_statuses if c.name == name]
    return found[0] if found else None


def waiting_with(pod_status: st.PodStatus, name: str, message: str) -> bool:
    state = state_of(pod_status, name)
    return (isinstance(state, st.ContainerStateWaiting)
            and state.reason == "CreateContainerConfigError" and state.message == message)


@pytest.mark.runtime
async def test_a_missing_key_or_file_holds_the_container_until_it_is_there(
    agent: Harness,
) -> None:
    agent.write("pod.yaml", BLOCKED_POD)
    found = await eventually(lambda: agent.find("blocked"), within=30, what="pod admitted")
    volume = (agent.settings.data_dir / "pods" / found[0].uid / "volumes" /
              "kubernetes.io~empty-dir" / "config")
    missing_key = (f'environment variable key "LATE_KEY" not found in file '
                   f'"{volume / "config.env"}"')
    # A file that is not there is an error even for an optional ref, in the kubelet's words.
    missing_file = "couldn't parse env file"

    await agent.wait_status(
        "blocked", lambda s: waiting_with(s, "needs-key", missing_key)
        and waiting_with(s, "needs-file", missing_file)
        and isinstance(state_of(s, "free"), st.ContainerStateRunning),
        what="both waiting with CreateContainerConfigError, the other running")
    failed = {e.message for e in agent.events_of("blocked")
              if e.reason == "Failed" and e.type == "Warning"}
    assert {f"Error: {missing_key}", f"Error: {missing_file}"} <= failed

    # The kubelet reads the file each time it tries to start the container.
    with (volume / "config.env").open("a") as file:
        file.write("LATE_KEY='arrived'\n")
    (volume / "later.env").write_text("# no OTHER here\n")
    await agent.wait_status(
        "blocked", lambda s: all(isinstance(state_of(s, name), st.ContainerStateRunning)
                                 for name in ("needs-key", "needs-file")),
        what="both running once the key and the file are there")
    await eventually(lambda: log_lines(agent, "blocked", "needs-key"),
                     until=lambda lines: lines == ["late=arrived"], within=30,
                     what="the late value in the log")
    await eventually(lambda: log_lines(agent, "blocked", "needs-file"),
                     until=lambda lines: lines == ["other="], within=30,
                     what="the optional key left out")


# -- the reader on a directory (no runtime) ------------------------------------------------------

POD = pods.Pod(uid=pods.PodUID("uid-1"), name="p", namespace="default", spec=pods.PodSpec(
    containers=(pods.Container(name="c", image="i"),),
    volumes=(pods.Volume(name="config", source_type="emptyDir", source={}),)))


def read(volume: Path, path: str, key: str = "A") -> envfiles.FileValue:
    ref = envfiles.FileKeyRef("config", path, key)
    return fileenv.read_values(POD, (ref,), {"config": volume})[ref]


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    """A volume beside a file outside it with the same names, which must never be read."""
    (tmp_path / "outside").write_text("A='outside'\n")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd.env").write_text("A='host file'\n")
    root = tmp_path / "volume"
    (root / "dir").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc" / "passwd.env").write_text("A='inside'\n")
    (root / "dir" / "real.env").write_text("A='real'\n")
    (root / "dir" / "rel").symlink_to("real.env")
    (root / "up").symlink_to("../../outside")  # clamped at the volume: /outside in it
    (root / "abs").symlink_to(str(tmp_path / "etc" / "passwd.env"))
    (root / "root-abs").symlink_to("/etc/passwd.env")
    (root / "loop").symlink_to("loop")
    os.mkfifo(root / "fifo")
    return root


@pytest.mark.parametrize(("path", "value", "resolved"), [
    ("dir/real.env", "real", "dir/real.env"),
    ("dir/rel", "real", "dir/real.env"),
    ("/dir/real.env", "real", "dir/real.env"),  # absolute: inside the volume
    ("root-abs", "inside", "etc/passwd.env"),  # an absolute target starts at the volume
    ("./dir/./real.env", "real", "dir/real.env"),
])
def test_paths_resolve_inside_the_volume(volume: Path, path: str, value: str,
                                         resolved: str) -> None:
    assert read(volume, path) == envfiles.FileValue(value, str(volume / resolved))


@pytest.mark.parametrize("path", [
    "up",  # ../../outside, clamped at the volume: /outside is not in it
    "abs",  # the host path, taken inside the volume: not there
    "nowhere.env",
    "dir/real.env/x",  # a file as a directory
    "dir",  # a directory
    "fifo",  # a FIFO would block a read: refused
])
def test_what_cannot_be_read_is_the_kubelets_parse_error(volume: Path, path: str) -> None:
    assert read(volume, path).error == "couldn't parse env file"


def test_a_symlink_loop_is_securejoins_error(volume: Path) -> None:
    assert read(volume, "loop").error == \
        f"SecureJoin {volume}/loop: too many levels of symbolic links"


def test_a_volume_the_pod_does_not_have(volume: Path) -> None:
    ref = envfiles.FileKeyRef("other", "x.env", "A")
    assert fileenv.read_values(POD, (ref,), {"config": volume})[ref].error == \
        'cannot find the volume "other" referenced by FileKeyRef'


def test_malformed_and_overlong_files(volume: Path) -> None:
    (volume / "bad.env").write_text("A 'x'\n")
    assert read(volume, "bad.env").error == "couldn't parse env file"
    (volume / "long.env").write_bytes(b"B='" + b"x" * envfiles.READ_LIMIT + b"'\nA='a'\n")
    assert read(volume, "long.env").error == "couldn't parse env file"
    # The key's line before an overlong one: the kubelet does not read further.
    (volume / "first.env").write_bytes(b"A='a'\nB='" + b"x" * envfiles.READ_LIMIT + b"'\n")
    assert read(volume, "first.env").value == "a"


def test_open_in_root_returns_a_descriptor_of_the_file(volume: Path) -> None:
    fd, path = mounts.open_in_root(str(volume), "dir/rel")
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(volume / "dir" / "real.env"))
        assert path == str(volume / "dir" / "real.env")
    finally:
        os.close(fd)
    with pytest.raises(FileNotFoundError):
        mounts.open_in_root(str(volume), "missing/../../dir/nothing")
    fd, path = mounts.open_in_root(str(volume), "missing/../dir/real.env")  # as securejoin
    os.close(fd)
    assert path == str(volume / "dir" / "real.env")
