"""Go durations (pure): seconds written as Go's `time.Duration.String()` writes them
(`go_duration`), and a Go duration read back into seconds (`duration_seconds`), as the
kubelet writes and reads them in a KubeletConfiguration, its flags and its messages.
"""

from __future__ import annotations

import re

_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6,
                 "ns": 1e-9}


def go_duration(seconds: float) -> str:
    """Seconds as Go's time.Duration.String(): 0s, 500ms, 10s, 1m0s, 1h2m3s, 1m30.5s."""
    if seconds == 0:
        return "0s"
    if 0 < seconds < 1:
        return f"{_trim(seconds * 1000)}ms"
    whole_hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{int(whole_hours)}h" if whole_hours else ""
    if whole_hours or minutes:
        out += f"{int(minutes)}m"
    return out + f"{_trim(secs)}s"


def _trim(value: float) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def duration_seconds(text: str) -> float | None:
    """Seconds of a non-negative Go duration ("1m30s", "0"), None if `text` is not one."""
    text = text.strip()
    if text == "0":
        return 0.0
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
