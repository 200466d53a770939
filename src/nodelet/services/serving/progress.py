"""Live progress of `nodelet run` on a terminal: one line per pod, its conditions turning True.

`ProgressService` subscribes to the status manager and the event recorder (sinks only read),
keeps the latest status and latest Warning event of each pod, and redraws a rich `Live` region
every `refresh` seconds from a named task of the agent's task group. The lines themselves are
laid out by the pure `model.reports.progress_lines`; this module only maps their styles onto
colours.

Log records printed on the same `Console` (the CLI routes logging there) appear above the live
lines. Pods the status manager forgot (terminated and gone) drop out of the display.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from rich.console import Console
from rich.live import Live
from rich.text import Text

from nodelet.helpers import tasks
from nodelet.model.core import events as ev
from nodelet.model.core import pods, status
from nodelet.model.reports import progress_lines
from nodelet.services.status import recording, statuses

__all__ = ["Console", "ProgressService"]

_COLOURS: dict[progress_lines.Style, str] = {
    "": "", "name": "bold", "ok": "green", "pending": "dim", "fail": "red", "time": "cyan",
}
# Normal events that show the pod moved on, so an earlier warning no longer explains it.
_PROGRESS_REASONS = frozenset({ev.PULLING, ev.PULLED, ev.CREATED, ev.STARTED})


class ProgressService:
    def __init__(
        self,
        *,
        statuses: statuses.StatusManager,
        recorder: recording.EventRecorder,
        console: Console,
        clock: Callable[[], datetime],
        refresh: float = 0.2,
    ) -> None:
        self._statuses = statuses
        self._recorder = recorder
        self._console = console
        self._clock = clock
        self._refresh = refresh
        self._pods: dict[pods.PodUID, tuple[pods.Pod, status.PodStatus]] = {}
        self._warnings: dict[pods.PodUID, progress_lines.WarningEvent] = {}
        self._unsubscribe: list[Callable[[], None]] = []
        self._live: Live | None = None

    def start(self, group: tasks.TaskGroup) -> None:
        """Subscribe, show what is known already, and start redrawing (task `progress`)."""
        for pod, pod_status in self._statuses.pods():
            self._pods[pod.uid] = (pod, pod_status)
        for event in self._recorder.events():
            self._on_event(event)
        self._unsubscribe = [self._statuses.subscribe(self._on_status),
                             self._recorder.subscribe(self._on_event)]
        self._live = Live(self.renderable(), console=self._console, auto_refresh=False,
                          redirect_stdout=False, redirect_stderr=False)
        self._live.start(refresh=True)
        group.spawn("progress", self._run())

    def stop(self) -> None:
        """Unsubscribe and leave the last picture on the terminal."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        if self._live is not None:
            self.redraw()
            self._live.stop()
            self._live = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._refresh)
            self.redraw()

    def redraw(self) -> None:
        for uid in [uid for uid in self._pods if self._statuses.get(uid) is None]:
            del self._pods[uid]  # forgotten: the pod is gone
            self._warnings.pop(uid, None)
        if self._live is not None:
            self._live.update(self.renderable(), refresh=True)

    # -- subscribers --------------------------------------------------------------------------

    def _on_status(self, pod: pods.Pod, pod_status: status.PodStatus) -> None:
        self._pods[pod.uid] = (pod, pod_status)

    def _on_event(self, event: ev.Event) -> None:
        if event.type == "Warning":
            self._warnings[event.pod_uid] = progress_lines.WarningEvent(event.reason,
                                                                        event.message)
        elif event.reason in _PROGRESS_REASONS:
            self._warnings.pop(event.pod_uid, None)

    # -- rendering ----------------------------------------------------------------------------

    def lines(self) -> list[progress_lines.PodProgress]:
        now = self._clock()
        return [
            progress_lines.pod_progress(pod.name, pod_status, first_seen=pod.creation_timestamp,
                                        now=now, warning=self._warnings.get(uid))
            for uid, (pod, pod_status) in self._pods.items()
        ]

    def renderable(self) -> Text:
        lines = self.lines()
        if not lines:
            return Text("no pods yet", style="dim")
        name_width = max(len(line.name) for line in lines)
        # A line wider than the terminal is cut, not wrapped: wrapping breaks the columns.
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(lines):
            if i:
                text.append("\n")
            for part, style in progress_lines.segments(line, name_width=name_width,
                                                       width=self._console.width):
                text.append(part, style=_COLOURS[style])
        return text
