"""The static pod source: a directory of manifests, watched by polling.

Every `period` the directory listing is compared (name, mtime, size) with the last one; changed
files are parsed again. The result is the complete desired set of pods plus a report per
document — a broken file is reported (file, document index, what is wrong) and only its own pods
are missing from the desired set; it never stops the others. Files whose names start with a dot
or end like editor temp files are ignored, as the kubelet does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nodelet.model import health, manifests, pods

logger = logging.getLogger(__name__)

_IGNORED_SUFFIXES = ("~", ".swp", ".swx", ".tmp", ".bak", ".part")


@dataclass(frozen=True)
class SourceSnapshot:
    pods: Mapping[pods.PodUID, pods.Pod] = field(default_factory=dict)
    # ConfigMaps and Secrets by (kind, namespace, name), for volumes.
    objects: Mapping[tuple[str, str, str], Any] = field(default_factory=dict)
    reports: tuple[health.ManifestReport, ...] = ()


@dataclass(frozen=True)
class _FileResult:
    pods: tuple[pods.Pod, ...]
    objects: tuple[tuple[tuple[str, str, str], Any], ...]
    reports: tuple[health.ManifestReport, ...]


def _ignored(path: Path) -> bool:
    name = path.name
    return name.startswith((".", "#")) or name.endswith(_IGNORED_SUFFIXES) or not path.is_file()


class ManifestSource:
    def __init__(
        self,
        *,
        directory: Path,
        node_name: str,
        on_update: Callable[[SourceSnapshot], None],
        clock: Callable[[], datetime],
    ) -> None:
        self._directory = directory
        self._node_name = node_name
        self._on_update = on_update
        self._clock = clock
        # When each pod UID was first seen: its creationTimestamp (and config.seen annotation).
        self._first_seen: dict[pods.PodUID, datetime] = {}
        self._files: dict[Path, tuple[tuple[int, int], _FileResult]] = {}
        self.snapshot = SourceSnapshot()
        self.scans = 0

    async def run(self, period: float) -> None:
        while True:
            self.scan()
            await asyncio.sleep(period)

    def scan(self) -> bool:
        """Rescan the directory; tell `on_update` and return True when anything changed."""
        self.scans += 1
        try:
            paths = sorted(p for p in self._directory.iterdir() if not _ignored(p))
        except OSError as exc:
            report = health.ManifestReport(
                file=str(self._directory), document=None, pod=None, ok=False,
                error=f"cannot read manifest directory: {exc.strerror or exc}",
            )
            return self._publish(SourceSnapshot(reports=(report,)))
        changed = set(self._files) != set(paths)
        for path in paths:
            changed |= self._refresh(path)
        for gone in set(self._files) - set(paths):
            del self._files[gone]
        if not changed and self.scans > 1:
            return False
        return self._publish(self._merge(paths))

    def _refresh(self, path: Path) -> bool:
        try:
            stat = path.stat()
        except OSError:
            return False
        key = (stat.st_mtime_ns, stat.st_size)
        cached = self._files.get(path)
        if cached is not None and cached[0] == key:
            return False
        self._files[path] = (key, self._parse(path))
        return True

    def _parse(self, path: Path) -> _FileResult:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return _FileResult((), (), (_problem(path, None, f"cannot read file: {exc}"),))
        found_pods: list[pods.Pod] = []
        objects: list[tuple[tuple[str, str, str], Any]] = []
        reports: list[health.ManifestReport] = []
        for item in manifests.parse_documents(text, filename=str(path)):
            if isinstance(item, manifests.ManifestProblem):
                reports.append(_problem(path, item.index, _located(item)))
                continue
            reports.append(self._accept(path, item, found_pods, objects))
        return _FileResult(tuple(found_pods), tuple(objects), tuple(reports))

    def _accept(
        self,
        path: Path,
        doc: manifests.ParsedDocument,
        found_pods: list[pods.Pod],
        objects: list[tuple[tuple[str, str, str], Any]],
    ) -> health.ManifestReport:
        try:
            if doc.kind in ("ConfigMap", "Secret"):
                obj = manifests.config_object_from_object(doc.obj)
                objects.append(((doc.kind, obj.namespace, obj.name), obj))
                return health.ManifestReport(file=str(path), document=doc.index,
                                             pod=f"{doc.kind}/{obj.namespace}/{obj.name}",
                                             ok=True, error="")
            pod = manifests.pod_from_object(doc.obj, node_name=self._node_name)
        except manifests.ManifestError as exc:
            return _problem(path, doc.index, str(exc))
        found_pods.append(pod)
        return health.ManifestReport(file=str(path), document=doc.index, pod=pod.full_name,
                                     ok=True, error="")

    def _merge(self, paths: list[Path]) -> SourceSnapshot:
        desired: dict[pods.PodUID, pods.Pod] = {}
        names: dict[str, Path] = {}
        objects: dict[tuple[str, str, str], Any] = {}
        reports: list[health.ManifestReport] = []
        for path in paths:
            result = self._files[path][1]
            objects.update(result.objects)
            reports.extend(r for r in result.reports if not r.ok or r.pod is None
                           or r.pod not in names)
            for pod in result.pods:
                if pod.full_name in names:
                    reports.append(_problem(path, None, (
                        f"duplicate pod {pod.full_name}: already defined in {names[pod.full_name]}"
                        "; this definition is ignored")))
                    continue
                names[pod.full_name] = path
                desired[pod.uid] = self._stamp(pod)
        return SourceSnapshot(pods=desired, objects=objects, reports=tuple(reports))

    def _stamp(self, pod: pods.Pod) -> pods.Pod:
        seen = self._first_seen.setdefault(pod.uid, self._clock())
        annotations = {**pod.annotations,
                       pods.ANNOTATION_CONFIG_SEEN: seen.isoformat().replace("+00:00", "Z")}
        return dataclasses.replace(pod, creation_timestamp=seen, annotations=annotations)

    def _publish(self, snapshot: SourceSnapshot) -> bool:
        for gone in set(self._first_seen) - set(snapshot.pods):
            del self._first_seen[gone]
        for report in snapshot.reports:
            if not report.ok:
                where = report.file if report.document is None else \
                    f"{report.file} (document {report.document})"
                logger.error("invalid manifest %s: %s", where, report.error)
        self.snapshot = snapshot
        self._on_update(snapshot)
        return True


def _problem(path: Path, document: int | None, message: str) -> health.ManifestReport:
    return health.ManifestReport(file=str(path), document=document, pod=None, ok=False,
                                 error=message)


def _located(problem: manifests.ManifestProblem) -> str:
    where = f"line {problem.line}: " if problem.line is not None else ""
    return f"{where}{problem.message}"
