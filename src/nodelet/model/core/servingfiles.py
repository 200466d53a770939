"""Which of the node server's TLS files are read again while it runs, and when (pure).

As the kubelet 1.37 (pkg/kubelet/kubelet.go, NewMainKubelet's TLS set-up):
- `ReloadKubeletServerCertificateFile` (beta, on by default since 1.31): a serving pair given
  as files (`tlsCertFile`, `tlsPrivateKeyFile`) is read again when the files change
  (pkg/kubelet/certificate/kubelet.go, NewKubeletServerCertificateDynamicFileManager over
  k8s.io/apiserver's dynamiccertificates.DynamicCertKeyPairContent). nodelet's own
  self-signed pair is not watched (nothing rewrites it while the agent runs);
- `ReloadKubeletClientCAFile` (beta, on by default since 1.36): the client CA file
  (`authentication.x509.clientCAFile`) likewise (a DynamicServingCertificateController over
  the CA's DynamicFileCAContent), its certificates replacing the old set;
- with a gate off, that part stays what was read at start.

New content is used only once it loads: a pair whose certificate and key do not match yet,
an empty, missing or half-written file leaves what is served, and is tried again at every
check until it loads (upstream retries with a back-off). Content equal to what is served
changes nothing. A stat misses a rewrite that keeps the inode, the size and (within the
filesystem's time granularity) the mtime, so the files are also read every `RESYNC_PERIOD`
whatever their stamps say, as upstream's periodic resync (dynamiccertificates'
FileRefreshDuration) catches what fsnotify missed.

- `watch(gates, pair_given=..., client_ca_given=...)`: what is reloaded (`Watch`);
- `Stamp`: what a stat says of a file; `resync_checks(period)` how many checks apart the
  files are read anyway; `due(seen, now, failing=..., since_read=..., resync=...)` whether to
  read the files again; `changed(seen, now)` which ones changed (for the log).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from nodelet import settings as settings_


@dataclass(frozen=True)
class Watch:
    """What the node server reads again when it changes."""

    pair: bool = False  # the serving certificate and key
    client_ca: bool = False

    @property
    def any(self) -> bool:
        return self.pair or self.client_ca


def watch(gates: settings_.FeatureGates, *, pair_given: bool, client_ca_given: bool) -> Watch:
    """`pair_given`: the serving pair is the operator's files (not the self-signed one);
    `client_ca_given`: a client CA file is set."""
    return Watch(pair=pair_given and gates.reload_kubelet_server_certificate_file,
                 client_ca=client_ca_given and gates.reload_kubelet_client_ca_file)


@dataclass(frozen=True)
class Stamp:
    """A file as stat sees it: replaced (another inode), rewritten in place (mtime, size)."""

    device: int
    inode: int
    mtime_ns: int
    size: int


# By path; None: the file cannot be stat'ed (missing, no permission).
Stamps = Mapping[str, Stamp | None]

# Seconds between two reads of the files whatever their stamps say: upstream's resync of
# its file watches (k8s.io/apiserver dynamiccertificates.FileRefreshDuration, 1 minute).
RESYNC_PERIOD = 60.0


def resync_checks(period: float) -> int:
    """For checks `period` seconds apart: how many checks apart the files are read anyway
    (about every RESYNC_PERIOD; at every check when the period is that long or longer)."""
    return max(1, math.ceil(RESYNC_PERIOD / period)) if period > 0 else 1


def due(seen: Stamps | None, now: Stamps, *, failing: bool, since_read: int,
        resync: int) -> bool:
    """Whether to read the files again: one changed since `seen` (None: never read), the
    last content read did not load (`failing`: it is tried at every check until it does), or
    this check is the `resync`th since the files were last read (`since_read` counts this
    one): a rewrite the stamps do not show is found then."""
    return failing or seen is None or dict(seen) != dict(now) or since_read >= resync


def changed(seen: Stamps | None, now: Stamps) -> tuple[str, ...]:
    """The paths whose stamp differs, in `now`'s order."""
    return tuple(path for path, stamp in now.items()
                 if seen is None or path not in seen or seen[path] != stamp)
