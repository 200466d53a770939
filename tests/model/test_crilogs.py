"""CRI log records → lines, and which container / attempt `nodelet logs` reads (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodelet.model.core import crilogs

T1 = "2024-05-01T12:00:00.123456789Z"
T2 = "2024-05-01T12:00:01.5+02:00"


def lines_of(data: bytes) -> list[tuple[str, str, bytes]]:
    joiner = crilogs.PartialJoiner()
    out = [line for raw in data.split(b"\n")[:-1]
           for line in joiner.push(crilogs.parse_line(raw))]
    return [(line.timestamp, line.stream, line.content) for line in out + joiner.flush()]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (f"{T1} stdout F hello".encode(), crilogs.LogLine(b"hello", T1, "stdout", False)),
        (f"{T1} stderr F oops\n".encode(), crilogs.LogLine(b"oops", T1, "stderr", False)),
        (f"{T2} stdout P part".encode(), crilogs.LogLine(b"part", T2, "stdout", True)),
        # Content keeps its own spaces, tabs and carriage returns.
        (f"{T1} stdout F  two  spaces\t\r".encode(),
         crilogs.LogLine(b" two  spaces\t\r", T1, "stdout", False)),
        (f"{T1} stdout F ".encode(), crilogs.LogLine(b"", T1, "stdout", False)),
        (f"{T1} stdout F".encode(), crilogs.LogLine(b"", T1, "stdout", False)),
        (f"{T1} stdout F \xff\xfe".encode("latin-1"),
         crilogs.LogLine(b"\xff\xfe", T1, "stdout", False)),
        # Malformed records are kept verbatim, without a time.
        (b"just text", crilogs.LogLine(b"just text")),
        (b"", crilogs.LogLine(b"")),
        (f"{T1} stdin F x".encode(), crilogs.LogLine(f"{T1} stdin F x".encode())),
        (f"{T1} stdout X x".encode(), crilogs.LogLine(f"{T1} stdout X x".encode())),
        (b"yesterday stdout F x", crilogs.LogLine(b"yesterday stdout F x")),
        (f"{T1} stdout".encode(), crilogs.LogLine(f"{T1} stdout".encode())),
    ],
)
def test_parse_line(raw: bytes, expected: crilogs.LogLine) -> None:
    assert crilogs.parse_line(raw) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", []),
        (f"{T1} stdout F one\n{T2} stderr F two\n".encode(),
         [(T1, "stdout", b"one"), (T2, "stderr", b"two")]),
        # A long line split by containerd: fragments join, the first fragment's time is kept.
        (f"{T1} stdout P aaa\n{T1} stdout P bbb\n{T2} stdout F ccc\n".encode(),
         [(T1, "stdout", b"aaabbbccc")]),
        # stdout and stderr fragments interleave; each stream joins its own.
        (f"{T1} stdout P out-\n{T1} stderr F err\n{T2} stdout F end\n".encode(),
         [(T1, "stderr", b"err"), (T1, "stdout", b"out-end")]),
        # A malformed record between lines passes through as it is.
        (f"{T1} stdout F a\ngarbage here\n{T2} stdout F b\n".encode(),
         [(T1, "stdout", b"a"), ("", "", b"garbage here"), (T2, "stdout", b"b")]),
        # A fragment whose line never finished is printed at the end of the file.
        (f"{T1} stdout F a\n{T2} stdout P unfinished\n".encode(),
         [(T1, "stdout", b"a"), (T2, "stdout", b"unfinished")]),
    ],
)
def test_lines(data: bytes, expected: list[tuple[str, str, bytes]]) -> None:
    assert lines_of(data) == expected


@pytest.mark.parametrize(
    ("line", "timestamps", "text"),
    [
        (crilogs.LogLine(b"hi", T1, "stdout"), False, b"hi\n"),
        (crilogs.LogLine(b"hi", T1, "stderr"), True, f"{T1} hi\n".encode()),
        (crilogs.LogLine(b"raw record"), True, b"raw record\n"),
    ],
)
def test_render(line: crilogs.LogLine, timestamps: bool, text: bytes) -> None:
    assert crilogs.render(line, timestamps=timestamps) == text


def pod(containers: list[str], init: list[str] | None = None,
        restarts: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-node", "namespace": "prod", "uid": "u-1"},
        "spec": {"containers": [{"name": c} for c in containers],
                 "initContainers": [{"name": c} for c in init or []]},
        "status": {"containerStatuses": [{"name": n, "restartCount": r}
                                         for n, r in (restarts or {}).items()]},
    }


@pytest.mark.parametrize(
    ("the_pod", "asked", "chosen"),
    [
        (pod(["main"]), None, "main"),
        (pod(["main"]), "main", "main"),
        (pod(["main"], ["setup"]), None, "main"),
        (pod(["main"], ["setup"]), "setup", "setup"),
        (pod(["a", "b"]), "b", "b"),
    ],
)
def test_choose_container(the_pod: dict[str, Any], asked: str | None, chosen: str) -> None:
    assert crilogs.choose_container(the_pod, asked) == chosen


@pytest.mark.parametrize(
    ("the_pod", "asked", "message"),
    [
        (pod(["a", "b"]), None,
         "a container name must be specified for pod web-node, choose one of: [a b]"),
        (pod(["a", "b"], ["setup"]), None,
         "a container name must be specified for pod web-node, choose one of: [a b] "
         "or one of the init containers: [setup]"),
        (pod(["main"]), "nope", "container nope is not valid for pod web-node"),
    ],
)
def test_choose_container_errors(the_pod: dict[str, Any], asked: str | None,
                                 message: str) -> None:
    with pytest.raises(crilogs.LogsError) as err:
        crilogs.choose_container(the_pod, asked)
    assert str(err.value) == message


NOT_FOUND = 'previous terminated container "main" in pod "web-node" not found'


@pytest.mark.parametrize(
    ("restarts", "present", "previous", "result"),
    [
        ({"main": 0}, [0], False, 0),
        ({"main": 2}, [0, 1, 2], False, 2),
        ({}, [0, 1], False, 1),  # no status yet: the newest file
        ({}, [], False, 0),
        ({"main": 1}, [0, 1, 2], False, 2),  # restarted after the status was written
        ({"main": 2}, [0, 1, 2], True, 1),
        ({"main": 3}, [0, 1, 3], True, 1),  # attempt 2 never got to write a file
        ({"main": 1}, [0], True, 0),  # the new run has no file yet
        ({"main": 0}, [0], True, NOT_FOUND),
        ({}, [], True, NOT_FOUND),
    ],
)
def test_choose_attempt(restarts: dict[str, int], present: list[int], previous: bool,
                        result: int | str) -> None:
    the_pod = pod(["main"], restarts=restarts)
    if isinstance(result, int):
        assert crilogs.choose_attempt(the_pod, "main", present, previous=previous) == result
    else:
        with pytest.raises(crilogs.LogsError) as err:
            crilogs.choose_attempt(the_pod, "main", present, previous=previous)
        assert str(err.value) == result


def test_previous_while_backing_off_is_the_run_that_exited() -> None:
    """CrashLoopBackOff: the kubelet's --previous is lastState.terminated, the newest run
    (the collector keeps one dead run, so the one before it may be gone)."""
    the_pod = pod(["main"], restarts={"main": 3})
    the_pod["status"]["containerStatuses"][0].update(
        state={"waiting": {"reason": "CrashLoopBackOff"}},
        lastState={"terminated": {"exitCode": 3}})
    assert crilogs.choose_attempt(the_pod, "main", [3], previous=True) == 3
    assert crilogs.choose_attempt(the_pod, "main", [2, 3], previous=True) == 3
    assert crilogs.choose_attempt(the_pod, "main", [3], previous=False) == 3
    # The next run started before the status said so: still the run that exited.
    assert crilogs.choose_attempt(the_pod, "main", [3, 4], previous=True) == 3


def test_log_path() -> None:
    assert crilogs.log_path(Path("/data"), pod(["main"]), "main", 3) == \
        Path("/data/logs/prod_web-node_u-1/main/3.log")


@pytest.mark.parametrize(
    ("name", "attempt"),
    [("0.log", 0), ("12.log", 12), ("1.log.tmp", None), ("x.log", None), ("3", None)],
)
def test_attempt_of(name: str, attempt: int | None) -> None:
    assert crilogs.attempt_of(name) == attempt


@pytest.mark.parametrize(
    ("raw", "max_lines", "max_bytes", "expected"),
    [
        (b"2026-01-01T00:00:00.1Z stdout F one\n2026-01-01T00:00:00.2Z stderr F two\n",
         80, 2048, "one\ntwo\n"),
        (b"2026-01-01T00:00:00.1Z stdout P par\n2026-01-01T00:00:00.2Z stdout F tial\n",
         80, 2048, "partial\n"),
        (b"2026-01-01T00:00:00.1Z stdout F a\n2026-01-01T00:00:00.2Z stdout F b\n", 1, 2048, "b\n"),
        (b"2026-01-01T00:00:00.1Z stdout F abcdef\n", 80, 3, "ef\n"),
        (b"2026-01-01T00:00:00.1Z stdout P never-ended\n", 80, 2048, "never-ended"),
        (b"", 80, 2048, ""),
    ],
    ids=["two-streams", "partial-joined", "last-line-only", "byte-limit", "unfinished",
         "empty"],
)
def test_last_lines_for_termination_messages(
    raw: bytes, max_lines: int, max_bytes: int, expected: str
) -> None:
    assert crilogs.last_lines(raw, max_lines, max_bytes) == expected


CID = "0123456789abcdef" * 4  # a 64-character container ID


def test_link_name_is_the_kubelets() -> None:
    assert crilogs.link_name("log-pod-1", "e2e-ns", "logger", CID) == (
        f"log-pod-1_e2e-ns_logger-{CID}.log")


def test_a_long_link_name_is_cut_to_255_bytes_keeping_log() -> None:
    name = crilogs.link_name("p" * 200, "ns", "c", CID)
    assert len(name) == 255 and name.endswith(".log")
    assert name == f"{'p' * 200}_ns_c-{CID}"[:251] + ".log"
    cut = crilogs.link_container_id(name)
    assert cut is not None and CID.startswith(cut) and len(cut) < len(CID)


@pytest.mark.parametrize(
    ("name", "container_id"),
    [
        (f"web_default_main-{CID}.log", CID),
        # Pod and container names may hold "-": the ID follows the last one.
        (f"my-web_default_side-car-{CID}.log", CID),
        ("web_default_main-abcdef.log", "abcdef"),
        ("web_default_main-abcde.log", None),  # shorter than the kubelet reads
        (f"web_default_main-{CID}.log.gz", None),
        ("no-dash", None),
        ("nodash.log", None),
    ],
)
def test_link_container_id(name: str, container_id: str | None) -> None:
    assert crilogs.link_container_id(name) == container_id
