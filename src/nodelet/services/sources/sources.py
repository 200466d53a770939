"""The static pod source: a directory of manifests, read when it changes.

`scan` compares the directory listing (name, inode, mtime, size) with the last one and parses
changed files again, in a worker thread so that a big file never blocks the event loop; when to
scan is `services/sources/manifestwatching.py`'s (inotify, a slow resync, polling as a
fallback). The result is the complete desired set of pods plus a report per document — a
broken file is reported (file, document index, what is wrong) and only its own pods are
missing from the desired set; it never stops the others. Files whose names start with a dot
or end like editor temp files are ignored, as the kubelet does
(`model/core/manifestchanges.ignored_name`).

Input is bounded (`settings.ManifestLimits`): a file over the size limit is refused from its
`stat` without being read; nesting and YAML alias limits are `manifests.parse_documents`'s.
A pod, ConfigMap or Secret defined in two places is refused in both (`duplicates`). Each problem
is logged once, when it appears.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from nodelet import settings
from nodelet.model.core import health, manifestchanges, pods
from nodelet.model.parsing import duplicates, manifests

log = logging.getLogger(__name__)



class _Stamp(NamedTuple):
    """What tells a file changed without reading it. The inode changes on an atomic rename
    over the file even when size and mtime (coarse: one clock tick) look the same."""

    inode: int
    mtime_ns: int
    size: int


@dataclass(frozen=True)
class SourceSnapshot:
    pods: Mapping[pods.PodUID, pods.Pod] = field(default_factory=dict)
    # ConfigMaps and Secrets by (kind, namespace, name), for volumes.
    objects: Mapping[tuple[str, str, str], Any] = field(default_factory=dict)
    reports: tuple[health.ManifestReport, ...] = ()


@dataclass(frozen=True)
class _Entry:
    """A pod, ConfigMap or Secret that a document defines. `name` is what /manifests shows;
    `key` is the (kind, namespace, name) of a ConfigMap or Secret (None for pods)."""

    definition: duplicates.Definition
    name: str
    value: Any
    key: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class _FileResult:
    entries: tuple[_Entry, ...]
    reports: tuple[health.ManifestReport, ...]


def _ignored(path: Path) -> bool:
    return manifestchanges.ignored_name(path.name) or not path.is_file()


class ManifestSource:
    def __init__(
        self,
        *,
        directory: Path,
        node_name: str,
        on_update: Callable[[SourceSnapshot], None],
        clock: Callable[[], datetime],
        limits: settings.ManifestLimits | None = None,
    ) -> None:
        self._directory = directory
        self._node_name = node_name
        self._on_update = on_update
        self._clock = clock
        self._limits = limits or settings.ManifestLimits()
        # When each pod UID was first seen: its creationTimestamp (and config.seen annotation).
        self._first_seen: dict[pods.PodUID, datetime] = {}
        self._files: dict[Path, tuple[_Stamp, _FileResult]] = {}
        # Something changed that `on_update` was not told yet (stays set if telling it failed,
        # so a restarted `run` tells it again).
        self._dirty = True
        self._logged: set[health.ManifestReport] = set()
        self.snapshot = SourceSnapshot()
        self.scans = 0

    async def scan(self, changed: Collection[str] = (), *,
                   removed: Collection[str] = ()) -> bool:
        """Rescan the directory; tell `on_update` and return True when anything changed. Files
        named in `changed` (an inotify event said so) are read again even when their stamp
        looks the same: two writes within one mtime tick leave the same size and mtime.
        Files named in `removed` were deleted since the last scan: if they are there again,
        `on_update` first hears the set without them (`_removed_and_back`)."""
        self.scans += 1
        try:
            listing = await asyncio.to_thread(self._list)
        except OSError as exc:
            report = health.ManifestReport(
                file=str(self._directory), document=None, pod=None, ok=False,
                error=f"cannot read manifest directory: {exc.strerror or exc}",
            )
            self._dirty = True  # the files' pods come back as soon as it is readable again
            return self._publish(SourceSnapshot(reports=(report,)))
        self._removed_and_back(listing, removed)
        differs = set(self._files) != set(listing)
        stale = {path: stamp for path, stamp in listing.items()
                 if self._stale(path, stamp, force=path.name in changed)}
        # One worker-thread hop for every changed file, not one each: a burst of manifests
        # reaches the pod workers sooner.
        results = await asyncio.to_thread(self._read_all, stale) if stale else {}
        for path, result in results.items():
            cached = self._files.get(path)
            self._files[path] = (stale[path], result)
            # A save that rewrote the same text is no change.
            differs |= cached is None or cached[1] != result
        for gone in set(self._files) - set(listing):
            del self._files[gone]
        self._dirty |= differs
        if not self._dirty:
            return False
        self._publish(self._merge(list(listing)))
        self._dirty = False
        return True

    def _removed_and_back(self, listing: Mapping[Path, _Stamp],
                          removed: Collection[str]) -> None:
        """Files deleted since the last scan and written again before it: their pods leave
        the desired set before they come back, as the kubelet's file source handles the
        removal on its own (a pod of the same UID then terminates and starts again)."""
        back = [path for path in self._files if path.name in removed and path in listing]
        if not back:
            return
        for path in back:
            del self._files[path]
        self._publish(self._merge([path for path in listing if path in self._files]))
        self._dirty = True  # the files come back in this scan's publish

    def _list(self) -> dict[Path, _Stamp]:
        """The manifest files, sorted, with their stamps; a file removed while listing is left
        out. Raises OSError when the directory cannot be read."""
        found: dict[Path, _Stamp] = {}
        for path in sorted(self._directory.iterdir()):
            if _ignored(path):
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            found[path] = _Stamp(stat.st_ino, stat.st_mtime_ns, stat.st_size)
        return found

    def _stale(self, path: Path, stamp: _Stamp, *, force: bool) -> bool:
        """Whether `path` must be read again: new, its stamp changed, or `force`."""
        cached = self._files.get(path)
        return cached is None or cached[0] != stamp or force

    def _read_all(self, stale: dict[Path, _Stamp]) -> dict[Path, _FileResult]:
        """Parse every file of `stale` (in a worker thread, like `_parse`)."""
        return {path: self._read_one(path, stamp) for path, stamp in stale.items()}

    def _read_one(self, path: Path, stamp: _Stamp) -> _FileResult:
        if stamp.size > self._limits.max_bytes:  # refused unread
            return _FileResult((), (_too_large(path, self._limits.max_bytes, stamp.size),))
        return self._parse(path)

    def _parse(self, path: Path) -> _FileResult:
        """Read and validate one file (runs in a worker thread: no shared state is touched)."""
        try:
            text = _read(path, self._limits.max_bytes)
        except (OSError, UnicodeDecodeError) as exc:
            return _FileResult((), (_problem(path, None, f"cannot read file: {exc}"),))
        if text is None:
            return _FileResult((), (_too_large(path, self._limits.max_bytes, None),))
        entries: list[_Entry] = []
        reports: list[health.ManifestReport] = []
        for item in manifests.parse_documents(text, filename=str(path), limits=self._limits):
            if isinstance(item, manifests.ManifestProblem):
                reports.append(_problem(path, item.index, _located(item)))
                continue
            reports.append(self._accept(path, item, entries))
        return _FileResult(tuple(entries), tuple(reports))

    def _accept(
        self, path: Path, doc: manifests.ParsedDocument, entries: list[_Entry]
    ) -> health.ManifestReport:
        try:
            entry = self._entry(path, doc)
        except manifests.ManifestError as exc:
            return _problem(path, doc.index, str(exc))
        except Exception as exc:  # one document must never stop the source
            log.error("unexpected error reading %s (document %d)", path, doc.index,
                      exc_info=exc)
            return _problem(path, doc.index, (
                f"cannot read this document: {type(exc).__name__} (a bug in nodelet, the log "
                "has the details); the other documents and files are not affected"))
        entries.append(entry)
        return health.ManifestReport(file=str(path), document=doc.index, pod=entry.name,
                                     ok=True, error="")

    def _entry(self, path: Path, doc: manifests.ParsedDocument) -> _Entry:
        if doc.kind in ("ConfigMap", "Secret"):
            obj = manifests.config_object_from_object(doc.obj)
            name = f"{doc.kind}/{obj.namespace}/{obj.name}"
            definition = duplicates.Definition(str(path), doc.index, name,
                                               (("kind/namespace/name", name),))
            return _Entry(definition, name, obj, (doc.kind, obj.namespace, obj.name))
        pod = manifests.pod_from_object(doc.obj, node_name=self._node_name)
        keys = (("namespace/name", f"Pod/{pod.full_name}"), ("UID", str(pod.uid)))
        definition = duplicates.Definition(str(path), doc.index, f"pod {pod.full_name}", keys)
        return _Entry(definition, pod.full_name, pod)

    def _merge(self, paths: list[Path]) -> SourceSnapshot:
        """The desired pods and objects of all files; what is defined twice is refused."""
        entries = [e for path in paths for e in self._files[path][1].entries]
        refused = duplicates.refusals([e.definition for e in entries])
        desired: dict[pods.PodUID, pods.Pod] = {}
        objects: dict[tuple[str, str, str], Any] = {}
        for entry in entries:
            if entry.definition in refused:
                continue
            if entry.key is not None:
                objects[entry.key] = entry.value
            else:
                desired[entry.value.uid] = self._stamp(entry.value)
        why = {(d.file, d.document): message for d, message in refused.items()}
        reports = tuple(_refused(report, why) for path in paths
                        for report in self._files[path][1].reports)
        return SourceSnapshot(pods=desired, objects=objects, reports=reports)

    def _stamp(self, pod: pods.Pod) -> pods.Pod:
        seen = self._first_seen.setdefault(pod.uid, self._clock())
        annotations = {**pod.annotations,
                       pods.ANNOTATION_CONFIG_SEEN: seen.isoformat().replace("+00:00", "Z")}
        return dataclasses.replace(pod, creation_timestamp=seen, annotations=annotations)

    def _publish(self, snapshot: SourceSnapshot) -> bool:
        for gone in set(self._first_seen) - set(snapshot.pods):
            del self._first_seen[gone]
        self._log_new_problems(snapshot.reports)
        self.snapshot = snapshot
        self._on_update(snapshot)
        return True

    def _log_new_problems(self, reports: tuple[health.ManifestReport, ...]) -> None:
        """Log each problem once, when it appears (again after it was gone)."""
        for report in reports:
            if not report.ok and report not in self._logged:
                where = report.file if report.document is None else \
                    f"{report.file} (document {report.document})"
                log.error("invalid manifest %s: %s", where, report.error)
        self._logged = {r for r in reports if not r.ok}


def _problem(path: Path, document: int | None, message: str) -> health.ManifestReport:
    return health.ManifestReport(file=str(path), document=document, pod=None, ok=False,
                                 error=message)


def _read(path: Path, max_bytes: int) -> str | None:
    """The file's text, None when it is over `max_bytes` (it may have grown since its stat:
    never more than `max_bytes` + 1 bytes are read)."""
    with path.open("rb") as file:
        data = file.read(max_bytes + 1)
    return data.decode("utf-8") if len(data) <= max_bytes else None


def _too_large(path: Path, limit: int, size: int | None) -> health.ManifestReport:
    what = f"{size} bytes" if size is not None else f"more than {limit} bytes"
    return _problem(path, None, (
        f"refused: the file is {what}, over the limit of {limit} bytes (setting "
        "manifest_limits.max_bytes; the kubelet refuses static pod files over 10 MiB too); "
        "split it into smaller files"))


def _refused(
    report: health.ManifestReport, why: Mapping[tuple[str, int], str]
) -> health.ManifestReport:
    """`report`, turned into an error when its document's object is defined twice."""
    message = why.get((report.file, report.document)) if report.document is not None else None
    if message is None or not report.ok:
        return report
    return dataclasses.replace(report, ok=False, error=message)


def _located(problem: manifests.ManifestProblem) -> str:
    where = f"line {problem.line}: " if problem.line is not None else ""
    return f"{where}{problem.message}"
