"""The walk of one pod sync (issue 27): which files of `src/nodelet` a reader follows through
the first sync of a plain pod, and how often the walk climbs back up a layer.

Measured, not read: a profiler records every call the pod's sync task makes from one nodelet
file into another, on real containerd. The walk counts the files of the layers that act
(services and adapters) — the pure decisions in `model/` and the `helpers/` are leaves a
reader takes as their docstrings and table tests say — and a *climb* is a call from a lower
layer (or service job, in the order of the import-linter contracts) into a higher one, which
only a callback can make.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from nodelet.model.core import status as st
from support.harness import Harness, cond, pod_manifest

pytestmark = pytest.mark.runtime

SRC = Path(__file__).resolve().parents[2] / "src" / "nodelet"
# Higher numbers are higher layers: pyproject.toml's layer contracts, the service jobs inside
# services (pod work above node health and serving, above pleg, status, sources, analysis).
_RANKS = {"app": 9, "services/podwork": 8, "services/cluster": 8, "services/nodehealth": 7,
          "services/serving": 7, "services": 6, "adapters": 5, "model": 4, "helpers": 3}
# Where the walk stands (docs/architecture.md, "One pod's sync, measured"): 21 files and 8
# climbs when this test was written, 18 and 3 since the wiring left the call path, 19 files
# since KubeletEnsureSecretPulledImages (an image check asks the pulled-image records,
# `podwork/pullmanager.py`, as the kubelet's image manager asks its pull manager), 20 since
# device plugins (admission asks the device manager, `services/devices/devicemanager.py`, and
# each container's start its device options, as the kubelet's syncPod asks cm/devicemanager).
# A walk that grows past these fails; lower them as the pod sync thins.
MAX_FILES = 20
MAX_CLIMBS = 3


def rank(relative: str) -> int:
    for prefix, value in _RANKS.items():
        if relative.startswith(prefix + "/") or relative == prefix + ".py":
            return value
    return 0  # settings.py and the package root: read by every layer


def acts(relative: str) -> bool:
    return relative.startswith(("services/", "adapters/")) or relative == "app.py"


class Walk:
    """The calls from one nodelet file into another made while the first `pod-sync:` task of
    the pod named `pod` runs (other tasks and threads interleave and are left out)."""

    def __init__(self, pod: str) -> None:
        self._prefix = f"pod-sync:default/{pod}"
        self._task: asyncio.Task[Any] | None = None
        self.calls: Counter[tuple[str, str]] = Counter()

    def __call__(self, frame: FrameType, event: str, _arg: object) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee, caller = frame.f_code.co_filename, frame.f_back.f_code.co_filename
        if callee == caller or not callee.startswith(str(SRC)) \
                or not caller.startswith(str(SRC)):
            return
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return
        if task is None or not task.get_name().startswith(self._prefix):
            return
        if self._task is None:
            self._task = task
        if task is self._task:
            self.calls[(str(Path(caller).relative_to(SRC)),
                        str(Path(callee).relative_to(SRC)))] += 1

    def files(self) -> set[str]:
        return {f for pair in self.calls for f in pair if acts(f)}

    def climbs(self) -> list[tuple[str, str]]:
        return sorted(pair for pair in self.calls if rank(pair[1]) > rank(pair[0]))


async def test_one_pod_sync_walks_few_files_and_rarely_climbs(agent: Harness) -> None:
    walk = Walk("walk")
    sys.setprofile(walk)
    try:
        agent.write("walk.yaml", pod_manifest("walk"))
        await agent.wait_status("walk", lambda s: (c := cond(s, st.READY)) is not None
                                and c.status == "True", what="walk Ready")
    finally:
        sys.setprofile(None)
    files, climbs = sorted(walk.files()), walk.climbs()
    report = "\n".join([f"{len(files)} files:", *files, f"{len(climbs)} climbs:",
                        *(f"{a} -> {b}" for a, b in climbs)])
    print(report)
    assert walk.calls, "the pod's sync task was not seen"
    assert len(files) <= MAX_FILES and len(climbs) <= MAX_CLIMBS, report
