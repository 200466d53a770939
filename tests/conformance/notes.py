"""What a [NodeConformance] test that did not pass found in nodelet, or why it does not apply.

Keys are substrings of the spec's full name; the first match is the note. Written by people
after reading the failure and the kubelet's code, never generated from a run.
"""

from __future__ import annotations

NOTES: dict[str, str] = {}


def note(name: str) -> str:
    return next((text for key, text in NOTES.items() if key in name), "")
