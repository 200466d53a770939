"""The node server's serving certificate: the given pair, or a self-signed one made once.

As the kubelet without --tls-cert-file (client-go's GenerateSelfSignedCertKey): at the first
start a throwaway CA signs a serving certificate for the node's hostname, `localhost`, its IPs
and loopback; `<data dir>/pki/nodelet.crt` holds the serving certificate followed by that CA's
(so a client pins the file with `--certificate-authority`), `nodelet.key` the serving key. The
pair is reused at later starts, and made again when it is about to expire (what is made and
when it is made again: `adapters/selfsigned.py`).

`ensure_self_signed` checks and makes the pair in a child process (`adapters/selfsigned.py`):
`cryptography` and OpenSSL's key generation take about 12 MiB, which the agent would keep
for its whole life for a file it reads once per start (issue 26, measured with `nodelet run`).

`write_local_token` makes the node-local credential of the agent's own CLI (a random token in
`<data dir>/pki/node-local.token`, 0600) at every start.

Errors: `CertificateError`, naming the file.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nodelet import settings as settings_
from nodelet.helpers import privatefiles

# The directory that holds the nodelet package: put first on the child's PYTHONPATH, so it
# runs this nodelet, installed or not.
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# The child's exit status for a CertificateError, its message the last line of its stderr
# (any other failure exits 1 with a traceback).
REFUSED = 3


class CertificateError(Exception):
    """The serving certificate or key cannot be read or written."""


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


def self_signed_paths(data_dir: Path) -> CertPair:
    return CertPair(data_dir / "pki" / "nodelet.crt", data_dir / "pki" / "nodelet.key")


def local_token_path(data_dir: Path) -> Path:
    """The node-local credential (model/core/nodeauth.LocalToken): root-only, made anew at
    every start of the agent, read by its own CLI."""
    return data_dir / "pki" / "node-local.token"


def write_local_token(data_dir: Path) -> str:
    """A new random node-local token, written to `local_token_path` (mode 0600, in the 0700
    pki dir); the one of the previous start stops working. Raises CertificateError."""
    path = local_token_path(data_dir)
    token = secrets.token_urlsafe(32)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        privatefiles.write(path, token.encode() + b"\n", mode=0o600)
    except OSError as exc:
        raise CertificateError(f"cannot write the node-local token to {path}: "
                               f"{exc.strerror}") from exc
    return token


def ensure_self_signed(
    pair: CertPair, *, hostname: str, ips: Sequence[str],
    timeout: float = settings_.NodeServerSettings.self_signed_timeout,
) -> CertPair:
    """`pair` as it is when both files exist and the certificate is still good, else a new
    self-signed pair written there (the key readable by its owner only), by a child process
    (`python -m nodelet.adapters.selfsigned`, see the module doc) given `timeout` seconds.
    Blocking (a child process): call it on a thread or at start-up."""
    # -P: the working directory is not put on the child's path (root must not import a
    # `nodelet` planted there).
    argv = [sys.executable, "-P", "-m", "nodelet.adapters.selfsigned", str(pair.cert),
            str(pair.key), hostname, *ips]
    path = os.pathsep.join(filter(None, (str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH"))))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": path}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CertificateError(
            f"cannot make the serving certificate {pair.cert}: {exc}") from exc
    if done.returncode == 0:
        return pair
    last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    if done.returncode == REFUSED:  # the child's CertificateError, its message as it is
        raise CertificateError(last)
    raise CertificateError(f"cannot make the serving certificate {pair.cert}: {last}")
