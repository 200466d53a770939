"""What a pod worker tells measuring sinks (metrics, benchmarks), as plain values.

The worker calls a `SyncObserver`; sinks implement it without importing the worker, so they
only read. `NoObserver` observes nothing.
"""

from __future__ import annotations

from typing import Protocol

from nodelet.model.core import pods


class SyncObserver(Protocol):
    def sandbox_starting(self, pod: pods.Pod) -> None:
        """RunPodSandbox is about to be called for the pod."""

    def sandbox_created(self, pod: pods.Pod, seconds: float) -> None:
        """RunPodSandbox returned after `seconds`."""

    def sandbox_failed(self, pod: pods.Pod, message: str, code: str, seconds: float) -> None:
        """RunPodSandbox failed after `seconds` with the runtime's `message` and gRPC `code`
        name ("" when there was none)."""

    def sandbox_ready(self, pod: pods.Pod, returned_at: float | None) -> None:
        """The status with the new sandbox ready was published; `returned_at` is the monotonic
        time RunPodSandbox returned (None when not known)."""

    def volume_failed(self, pod: pods.Pod, message: str) -> None:
        """Setting up a volume failed (the FailedMount event's message)."""


class NoObserver:
    def sandbox_starting(self, pod: pods.Pod) -> None:
        return None

    def sandbox_created(self, pod: pods.Pod, seconds: float) -> None:
        return None

    def sandbox_failed(self, pod: pods.Pod, message: str, code: str, seconds: float) -> None:
        return None

    def sandbox_ready(self, pod: pods.Pod, returned_at: float | None) -> None:
        return None

    def volume_failed(self, pod: pods.Pod, message: str) -> None:
        return None
