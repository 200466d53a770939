"""Health checks and manifest reports: what the local API shows about the agent itself (pure).

`HealthCheck` is one named check of `/healthz` (the runtime answers, the manifest directory is
readable...); `ManifestReport` says how one document of a static pod manifest file was read.
`healthz_text` renders checks the way kube-apiserver does. No exceptions of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HealthCheck:
    """One health check: `message` says why it failed (may be empty when `ok`)."""

    name: str
    ok: bool
    message: str = ""


@dataclass(frozen=True)
class ManifestReport:
    """How one manifest document was read.

    `document` is the 0-based index in a multi-document file (None: the whole file, e.g. it
    could not be read); `pod` is the resulting `namespace/name` when it parsed; `error` says
    what is wrong when not `ok`.
    """

    file: str
    document: int | None
    pod: str | None
    ok: bool
    error: str = ""


def manifest_report_to_api(report: ManifestReport) -> dict[str, Any]:
    """The JSON object of `report` served by `/manifests`."""
    return {
        "file": report.file,
        "document": report.document,
        "pod": report.pod,
        "ok": report.ok,
        "error": report.error,
    }


def healthy(checks: Sequence[HealthCheck]) -> bool:
    """True when every check passed (also when there are none)."""
    return all(c.ok for c in checks)


def healthz_text(checks: Sequence[HealthCheck], *, verbose: bool,
                 gates: Sequence[tuple[str, bool]] = ()) -> str:
    """The `/healthz` body, as kube-apiserver writes it.

    Healthy and not verbose: `ok`. Otherwise one line per check (`[+]name ok` or
    `[-]name failed: reason`), then `healthz check passed` or `healthz check failed`.
    Verbose, the feature `gates` come before that last line, one `feature-gate NAME=VALUE`
    line each (they never fail the check).
    """
    ok = healthy(checks)
    if ok and not verbose:
        return "ok"
    lines = [_check_line(c) for c in checks]
    if verbose:
        lines += [f"feature-gate {name}={str(on).lower()}" for name, on in gates]
    lines.append("healthz check passed" if ok else "healthz check failed")
    return "\n".join(lines) + "\n"


def _check_line(check: HealthCheck) -> str:
    if check.ok:
        return f"[+]{check.name} ok"
    return f"[-]{check.name} failed: {check.message or 'reason withheld'}"
