"""Projected service account tokens as plain values (pure): what to ask the TokenRequest API
for, what came back, and when a token must be refreshed — the kubelet's token manager
(pkg/kubelet/token) and projected volume plugin (pkg/volume/projected), no I/O.

- `requests(pod, volume)`: the TokenRequest of each `serviceAccountToken` source of a projected
  volume, bound to the pod (apiVersion v1, kind Pod, name, uid); `audience` empty asks for the
  API server's own audiences; `expirationSeconds` defaults to 3600.
- `TokenRequest.key`: the cache key — service account, namespace, audiences, expiration and
  the bound pod's UID, as the kubelet's keyFunc.
- `token_from_answer`: the API's answer (`status.token`, `status.expirationTimestamp`, and the
  `spec.expirationSeconds` the server granted, which may be shorter than asked).
- `refresh_at` / `requires_refresh`: the kubelet's requiresRefresh — a token is refreshed once
  older than 80 % of its lifetime or 24 h, less a jitter, or when it claims to be issued in the
  future (the clock leapt back). The kubelet's jitter is up to 10 s; here it is also at most a
  tenth of the lifetime, so a token of a few seconds (tests) is not refreshed at once; for
  lifetimes of 100 s and more this is the kubelet's rule.
- `static_pod_tokens(pod)`: the token sources a static pod asks for, which nodelet refuses.

Exceptions::

    TokenError      an answer without a usable token; `.message` says what was wrong
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import pods, status

# The API server's default for a projected token's expirationSeconds.
DEFAULT_EXPIRATION = 3600
# The kubelet's maxTTL: a token older than this is refreshed whatever its lifetime.
MAX_TTL = timedelta(hours=24)
# The kubelet's maxJitter.
MAX_JITTER = timedelta(seconds=10)
# Where the ServiceAccount admission plugin mounts the kube-api-access volume.
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


class TokenError(errors.MessageError):
    """A TokenRequest answer without a usable token."""


@dataclass(frozen=True)
class TokenRequest:
    """One token to ask for: `serviceaccounts/<service_account>/token` in `namespace`."""

    service_account: str
    namespace: str
    audiences: tuple[str, ...]
    expiration_seconds: int
    pod_name: str
    pod_uid: pods.PodUID

    @property
    def key(self) -> tuple[str, str, tuple[str, ...], int, pods.PodUID]:
        return (self.service_account, self.namespace, self.audiences,
                self.expiration_seconds, self.pod_uid)

    def body(self) -> dict[str, Any]:
        """The authentication.k8s.io/v1 TokenRequest to POST."""
        return {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"name": self.service_account, "namespace": self.namespace},
            "spec": {
                "audiences": list(self.audiences),
                "expirationSeconds": self.expiration_seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.pod_name,
                                   "uid": self.pod_uid},
            },
        }


@dataclass(frozen=True)
class Token:
    """A token the API issued: valid until `expires`, for `lifetime` seconds in all."""

    token: str
    expires: datetime
    lifetime: int

    @property
    def issued(self) -> datetime:
        return self.expires - timedelta(seconds=self.lifetime)


def service_account(pod: pods.Pod) -> str:
    """The pod's ServiceAccount (serviceAccountName, or the deprecated serviceAccount)."""
    spec = pod.raw.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "")


def _token_sources(volume: pods.Volume) -> list[Mapping[str, Any]]:
    if volume.source_type != "projected":
        return []
    found = []
    for item in volume.source.get("sources") or ():
        source = item.get("serviceAccountToken") if isinstance(item, Mapping) else None
        if isinstance(source, Mapping):
            found.append(source)
    return found


def requests(pod: pods.Pod, volume: pods.Volume) -> dict[str, TokenRequest]:
    """The TokenRequest of each serviceAccountToken source of `volume`, by file path."""
    out: dict[str, TokenRequest] = {}
    for source in _token_sources(volume):
        audience = str(source.get("audience") or "")
        seconds = source.get("expirationSeconds")
        out[str(source.get("path") or "")] = TokenRequest(
            service_account=service_account(pod), namespace=pod.namespace,
            audiences=(audience,) if audience else (),
            expiration_seconds=seconds if isinstance(seconds, int) else DEFAULT_EXPIRATION,
            pod_name=pod.name, pod_uid=pod.uid)
    return out


def static_pod_tokens(pod: pods.Pod) -> list[str]:
    """The paths (`spec.volumes[i].projected.sources[j].serviceAccountToken`) of a static
    pod's token sources; empty for API pods."""
    if not pod.is_static:
        return []
    found = []
    for i, volume in enumerate(pod.spec.volumes):
        if volume.source_type != "projected":
            continue
        for j, item in enumerate(volume.source.get("sources") or ()):
            if isinstance(item, Mapping) and item.get("serviceAccountToken") is not None:
                found.append(f"spec.volumes[{i}].projected.sources[{j}].serviceAccountToken")
    return found


def token_from_answer(answer: Mapping[str, Any], request: TokenRequest) -> Token:
    """The token of a TokenRequest answer; its lifetime is the granted expirationSeconds (the
    server may shorten it), else the one asked for."""
    state = answer.get("status")
    state = state if isinstance(state, Mapping) else {}
    spec = answer.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    token = state.get("token")
    if not isinstance(token, str) or not token:
        raise TokenError("the TokenRequest answer has no status.token")
    try:
        expires = status.parse_time(str(state.get("expirationTimestamp") or ""))
    except ValueError:
        expires = None
    if expires is None:
        raise TokenError("the TokenRequest answer has no valid status.expirationTimestamp")
    granted = spec.get("expirationSeconds")
    lifetime = granted if isinstance(granted, int) and granted > 0 \
        else request.expiration_seconds
    return Token(token=token, expires=expires, lifetime=lifetime)


def jitter_bound(token: Token) -> timedelta:
    """The largest refresh jitter for this token: 10 s, at most a tenth of its lifetime."""
    return min(MAX_JITTER, timedelta(seconds=token.lifetime / 10))


def refresh_at(token: Token, jitter: float) -> datetime:
    """When the token must be refreshed; `jitter` in [0, 1) scales `jitter_bound`."""
    early = jitter_bound(token) * jitter
    by_age = token.issued + MAX_TTL - early
    by_lifetime = token.expires - timedelta(seconds=token.lifetime * 0.2) - early
    return min(by_age, by_lifetime)


def requires_refresh(token: Token, now: datetime, jitter: float = 0.0) -> bool:
    """The kubelet's requiresRefresh: past `refresh_at`, or issued in the future."""
    return now >= refresh_at(token, jitter) or now < token.issued


def expired(token: Token, now: datetime) -> bool:
    return now > token.expires


def token_files(tokens: Mapping[str, Token]) -> dict[str, bytes]:
    """The file contents of a volume's token sources, by path."""
    return {path: token.token.encode() for path, token in tokens.items()}
