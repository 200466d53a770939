"""Live progress lines of `nodelet run`, on a fake terminal (a rich Console writing to a
StringIO), driven by the status updates of a real agent running real pods."""

from __future__ import annotations

import argparse
import io
import re
import sys

import pytest

from conftest import Instance
from nodelet import app, cli
from nodelet.services.serving import progress
from support.harness import Harness, all_ready, pod_manifest
from support.polling import eventually

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RED = "\x1b[31m"


def fake_terminal() -> tuple[progress.Console, io.StringIO]:
    out = io.StringIO()
    return progress.Console(file=out, force_terminal=True, color_system="standard",
                            width=160), out


def last_frame(raw: str) -> str:
    """The last picture Live drew: Live starts each redraw with a carriage return."""
    return ANSI.sub("", raw.rsplit("\r", 1)[-1])


@pytest.mark.runtime
async def test_progress_lines_follow_real_pods(runtime: Instance) -> None:
    console, out = fake_terminal()
    harness = Harness(endpoint=runtime.containerd.endpoint)
    harness.agent = app.Agent(harness.settings, console=console)
    try:
        await harness.agent.start()
        assert "progress" in harness.agent._group.names
        harness.write("web.yaml", pod_manifest("web"))
        harness.write("vm.yaml", pod_manifest("vm", extra_spec="runtimeClassName: gvisor\n"))
        await harness.wait_status("web", all_ready, what="web Ready")
        await eventually(lambda: [e for e in harness.events_of("vm")
                                    if e.reason == "FailedCreatePodSandBox"],
                         within=30, what="vm sandbox error")
        await eventually(lambda: "✗ FailedCreatePodSandBox" in last_frame(out.getvalue())
                         and "✓Ready " in last_frame(out.getvalue()),
                         within=30, what="both pods drawn by the refresh task")
        frame = last_frame(out.getvalue())
        web = next(line for line in frame.splitlines() if line.startswith("web-testnode"))
        assert re.fullmatch(
            r"web-testnode  ✓Scheduled ✓Initialized ✓ReadyToStart ✓ContainersReady ✓Ready"
            r"  \d+\.\d\ds", web), web
        vm = frame.splitlines()
        at = next(i for i, line in enumerate(vm) if line.startswith("vm-testnode"))
        assert "✓Scheduled ✓Initialized ·ReadyToStart ·ContainersReady ·Ready" in vm[at]
        assert vm[at + 1].lstrip().startswith("✗ FailedCreatePodSandBox: no pod sandbox exists")
        assert 'no runtime for "gvisor"' in vm[at + 1]
        # The failure is red, the True conditions green.
        assert RED + "✗ FailedCreatePodSandBox" in out.getvalue()
        assert "\x1b[32m✓Ready\x1b[0m  " in out.getvalue()
        await harness.stop()  # pods terminated and forgotten: their lines go
        assert "no pods yet" in last_frame(out.getvalue())
    finally:
        await harness.stop()
        harness.cleanup()


@pytest.mark.parametrize(
    ("mode", "log_format", "tty", "shown"),
    [
        ("auto", "text", True, True),
        ("auto", "text", False, False),
        ("auto", "json", True, False),
        ("always", "text", False, True),
        ("never", "text", True, False),
    ],
)
def test_progress_flag(monkeypatch: pytest.MonkeyPatch, mode: str, log_format: str, tty: bool,
                       shown: bool) -> None:
    args = cli.build_parser().parse_args(["run", "--progress", mode, "--log-format", log_format])
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    assert (cli._progress_console(args) is not None) is shown
    assert isinstance(args, argparse.Namespace)
