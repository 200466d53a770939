"""The end of a CRI log file as plain text (pure): for FallbackToLogsOnError messages.

CRI log lines are `<time> <stream> <P|F> <content>`; P marks a partial line continued by the
next entry.
"""

from __future__ import annotations


def contents(raw: str) -> list[str]:
    """The logged lines, partial entries joined; lines not in CRI format are kept as they are."""
    lines: list[str] = []
    pending = ""
    for entry in raw.splitlines():
        parts = entry.split(" ", 3)
        if len(parts) < 3 or parts[2] not in ("P", "F"):
            lines.append(entry)
            continue
        text = parts[3] if len(parts) == 4 else ""
        if parts[2] == "P":
            pending += text
            continue
        lines.append(pending + text)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def last_lines(raw: str, max_lines: int, max_bytes: int) -> str:
    """The last `max_lines` lines, cut to the last `max_bytes` bytes."""
    text = "\n".join(contents(raw)[-max_lines:])
    data = text.encode()
    return data[-max_bytes:].decode(errors="ignore") if len(data) > max_bytes else text
