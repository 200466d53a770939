"""Which changes of the manifest directory matter, and when to read them (pure).

The watch (`adapters/dirwatch.py`) reports a name per inotify event, or "the directory itself"
when it appeared, vanished or events were lost, and whether the change is *finished* (a file
closed after writing, renamed in or out, deleted) or a write still in progress (created,
modified, attributes changed, not closed yet). Changes are collected in `Pending`, and:
- when every pending change is finished, they are read at once — a write is noticed in
  milliseconds — but no sooner than `quiet` seconds after the previous read, so a burst (`cp`
  of 50 files, hundreds of events) costs one read per `quiet`, not one per event;
- while a file is still being written, the read waits until no change came for `quiet`
  seconds (its close usually comes first and finishes it), and never longer than `longest`
  seconds after the first change, so a writer that never pauses still gets its files read.
An atomic write (a dot-temp file written, then renamed over the manifest) is one finished
change: the temp file's events are dropped (below), the rename finishes it. A file deleted (or
renamed away) is noted in `removed` even if it is back by the read: the kubelet handles each
event on its own, so a manifest removed and written again terminates its pod and starts it
again, while one replaced by a rename over it is only an update.

Names that are never manifests are dropped here, before they can wake anything: hidden files
(the kubelet ignores names starting with `.`: editors' and `kubectl`-style temp files), Emacs
lock and autosave files (`#`), and editors' backup, swap and partial-download suffixes.
Times are monotonic seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

# Backups (`x~`, `x.bak`), vim swap files (`.x.swp`, `.x.swx`), temp and partial downloads.
IGNORED_SUFFIXES = ("~", ".swp", ".swx", ".tmp", ".bak", ".part")


def ignored_name(name: str) -> bool:
    """True for a file name that is never read as a manifest."""
    return name.startswith((".", "#")) or name.endswith(IGNORED_SUFFIXES)


@dataclass(frozen=True)
class Pending:
    """Changes noticed and not read yet. `names`: files to read again even if their stamp
    looks the same (a change of the directory itself adds none: every read lists it whole);
    `writing`: those whose latest change is a write in progress; `first`/`last`: when the
    first and the latest change came; `removed`: files deleted or renamed away since the
    last read (they may be back)."""

    names: frozenset[str] = frozenset()
    writing: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    first: float | None = None
    last: float | None = None


def noted(pending: Pending, name: str | None, now: float, *, finished: bool,
          removed: bool = False) -> Pending:
    """`pending` with one more change: of the file `name` (`removed`: it was deleted or
    renamed away), or (None) of the directory itself. A change of an ignored name leaves it
    as it was: it must not delay or cause a read."""
    if name is not None and ignored_name(name):
        return pending
    writing = pending.writing
    if name is not None:
        writing = writing - {name} if finished else writing | {name}
    return Pending(
        names=pending.names if name is None else pending.names | {name},
        writing=writing,
        removed=pending.removed | {name} if removed and name is not None else pending.removed,
        first=now if pending.first is None else pending.first,
        last=now,
    )


def due_at(pending: Pending, *, last_read: float, quiet: float, longest: float) -> float | None:
    """When to read the pending changes (None: nothing pending). Finished changes: `quiet` s
    after the previous read ended at `last_read` (at once, unless a read just happened);
    a write in progress: `quiet` s after the latest change, at most `longest` s after the
    first."""
    if pending.first is None or pending.last is None:
        return None
    if pending.writing:
        return min(pending.last + quiet, pending.first + longest)
    return last_read + quiet
