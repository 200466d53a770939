"""Pulled-image records on disk, in the kubelet's layout (its fs_pullrecords.go), so they
outlive a restart of the agent.

Under `<data-dir>/image_manager/`: `pulling/` holds one file per image being pulled (an
`ImagePullIntent`), `pulled/` one per image ID (an `ImagePulledRecord`); each file is named
`sha256-<hex of the image or image ID>` and holds the JSON of `model.core.pullrecords`. A file
is written to `<name>.tmp` and renamed into place, so a crash leaves the old file or the new
one; `.tmp` files and files of other names are skipped. Directories and files are private to
root (0700 / 0600): they name the Secrets that pulled each image.

Calls are synchronous and small; the agent runs them in a thread (`services.podwork.
pullmanager`). Exceptions: `OSError` from writes, and from `load` when a directory cannot be
listed. `load` reads what it can: a file that cannot be read or decoded is logged and its name
returned in `Loaded.unreadable_*`, so one bad file hides no other, and the caller can fail safe
for its image (the kubelet then verifies it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from nodelet.model.core import pullrecords

log = logging.getLogger(__name__)

DIRECTORY = "image_manager"
_T = TypeVar("_T")


@dataclass(frozen=True)
class Loaded:
    intents: tuple[str, ...]  # the images of the pulling intents
    records: tuple[pullrecords.PulledRecord, ...]
    unreadable_intents: frozenset[str]  # file names
    unreadable_records: frozenset[str]


class PullRecordFiles:
    """The `pulling/` and `pulled/` directories under `root` (`<data-dir>/image_manager`)."""

    def __init__(self, root: Path) -> None:
        self._pulling = root / "pulling"
        self._pulled = root / "pulled"

    def load(self) -> Loaded:
        intents, bad_intents = _read_all(self._pulling, pullrecords.decode_intent)
        records, bad_records = _read_all(self._pulled, pullrecords.decode_record)
        return Loaded(tuple(intents), tuple(records), bad_intents, bad_records)

    def write_intent(self, image: str) -> None:
        _write(self._pulling, pullrecords.file_name(image), pullrecords.encode_intent(image))

    def delete_intent(self, image: str) -> None:
        (self._pulling / pullrecords.file_name(image)).unlink(missing_ok=True)

    def write_record(self, record: pullrecords.PulledRecord) -> None:
        _write(self._pulled, pullrecords.file_name(record.image_ref),
               pullrecords.encode_record(record))

    def delete_record(self, image_ref: str) -> None:
        (self._pulled / pullrecords.file_name(image_ref)).unlink(missing_ok=True)


def _write(directory: Path, name: str, content: bytes) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / name
    temporary = directory / (name + ".tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.replace(temporary, target)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def _read_all(directory: Path, decode: Callable[[bytes], _T]
              ) -> tuple[list[_T], frozenset[str]]:
    """The decoded files of `directory`, and the names of those that could not be."""
    try:
        paths = sorted(directory.iterdir())
    except FileNotFoundError:  # nothing written yet
        return [], frozenset()
    found: list[_T] = []
    unreadable: set[str] = set()
    for path in paths:
        if not path.name.startswith("sha256-") or path.name.endswith(".tmp"):
            continue
        try:
            found.append(decode(path.read_bytes()))
        except (OSError, ValueError) as exc:
            log.warning("pulled-image record %s cannot be read: %s", path, exc)
            unreadable.add(path.name)
    return found, frozenset(unreadable)
