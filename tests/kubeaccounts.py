"""ServiceAccounts for the test API server (tests/kubeapi.py): the TokenRequest API, the
tokens it issues as bearer tokens, and kube-apiserver's ServiceAccount admission plugin.

- `token_request(namespace, name, body)`: `POST serviceaccounts/<name>/token` as
  pkg/registry/core/serviceaccount/storage/token.go answers it: the ServiceAccount must exist
  (404), `spec.expirationSeconds` (default 3600) at least `min_seconds` (600 in kube-apiserver;
  tests may lower it) else 422, capped at `max_seconds` like `--service-account-max-token-
  expiration` (the granted value is in the answer's spec); empty `spec.audiences` become the API
  server's (`API_AUDIENCE`); a `boundObjectRef` Pod must exist (404) with that UID (409).
  The answer carries `status.token` and `status.expirationTimestamp` (whole seconds, rounded
  down).
- `authenticate(token)`: an issued token is accepted as a bearer token, as user
  `system:serviceaccount:<ns>:<sa>` (groups `system:serviceaccounts`,
  `system:serviceaccounts:<ns>`, `system:authenticated`), until it expires, while its bound pod
  exists with the same UID, and only for the API server's audience. Tokens are opaque strings,
  not signed JWTs: no client here parses them.
- `allows(user, attrs)`: a deliberately tiny authorization rule instead of RBAC — a service
  account may get, list and watch the pods of its own namespace; everything else goes to the
  server's authorizer (which refuses it unless the Node authorizer is off).
- `admit_pod(pod, exists)`: the ServiceAccount admission plugin
  (plugin/pkg/admission/serviceaccount) for a pod being created (mirror pods are left alone):
  `serviceAccountName` defaults to `default`; unless the pod's or its ServiceAccount's
  `automountServiceAccountToken` is false, a `kube-api-access-<5 random chars>` projected volume
  (token 3607 s at `token`, ConfigMap `kube-root-ca.crt` item `ca.crt`, downward API
  `namespace`; defaultMode 420) is added, and mounted read-only at
  /var/run/secrets/kubernetes.io/serviceaccount in every container without a mount there.
  The server plays kube-controller-manager's parts too: the `default` ServiceAccount and the
  `kube-root-ca.crt` ConfigMap (`namespace_objects`) exist in a namespace before its first pod.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import kubeauth

Obj = dict[str, Any]

API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME_PREFIX = "kube-api-access-"
ROOT_CA = "kube-root-ca.crt"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# utilrand.String's alphabet: no vowels, no confusable characters.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# A stand-in for the cluster CA the root-ca publisher copies into every namespace.
FAKE_CA = "-----BEGIN CERTIFICATE-----\nTEST-CLUSTER-CA\n-----END CERTIFICATE-----\n"


class RequestError(Exception):
    """A refused TokenRequest: HTTP `code`, Status `reason`, `message`."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


@dataclass(frozen=True)
class Issued:
    namespace: str
    account: str
    audiences: tuple[str, ...]
    expires: float  # epoch seconds
    pod: tuple[str, str] | None  # (name, uid) of the bound pod


def user_of(namespace: str, account: str) -> kubeauth.User:
    return kubeauth.User(f"system:serviceaccount:{namespace}:{account}",
                         ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                          "system:authenticated"))


class Accounts:
    """`lookup(plural, namespace, name)` reads the server's store."""

    def __init__(self, *, lookup: Callable[[str, str, str], Obj | None], min_seconds: int = 600,
                 max_seconds: int | None = None, clock: Callable[[], float] = time.time) -> None:
        self._lookup = lookup
        self.min_seconds = min_seconds
        self.max_seconds = max_seconds
        self.clock = clock
        self.issued: dict[str, Issued] = {}
        self.accepted: dict[str, int] = {}  # requests each issued token authenticated

    # -- TokenRequest -------------------------------------------------------------------------

    def token_request(self, namespace: str, name: str, body: Any) -> Obj:
        if self._lookup("serviceaccounts", namespace, name) is None:
            raise RequestError(404, "NotFound", f'serviceaccounts "{name}" not found')
        spec = dict((body or {}).get("spec") or {})
        seconds = spec.get("expirationSeconds") or 3600
        if seconds < self.min_seconds:
            raise RequestError(422, "Invalid", f"spec.expirationSeconds: Invalid value: "
                               f"{seconds}: may not specify a duration less than "
                               f"{self.min_seconds} seconds")
        if self.max_seconds is not None:
            seconds = min(seconds, self.max_seconds)
        audiences = tuple(spec.get("audiences") or (API_AUDIENCE,))
        pod = self._bound_pod(namespace, spec.get("boundObjectRef"))
        expires = int(self.clock()) + seconds  # whole seconds, never later than granted
        token = "sa." + secrets.token_urlsafe(24)
        self.issued[token] = Issued(namespace, name, audiences, float(expires), pod)
        spec |= {"audiences": list(audiences), "expirationSeconds": seconds}
        return {
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": _rfc3339(self.clock())},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": _rfc3339(expires)},
        }

    def _bound_pod(self, namespace: str, ref: Any) -> tuple[str, str] | None:
        if not ref:
            return None
        if ref.get("kind") != "Pod":
            raise RequestError(400, "BadRequest", f"cannot bind token to object of type "
                               f"{ref.get('kind')}")
        pod = self._lookup("pods", namespace, ref.get("name", ""))
        if pod is None:
            raise RequestError(404, "NotFound", f'pods "{ref.get("name", "")}" not found')
        uid = pod["metadata"]["uid"]
        if ref.get("uid") and ref["uid"] != uid:
            raise RequestError(409, "Conflict", f'Operation cannot be fulfilled on Pod '
                               f'"{ref.get("name")}": the UID in the bound object reference '
                               f"({ref['uid']}) does not match the UID in record. The object "
                               "might have been deleted and then recreated")
        return ref.get("name", ""), uid

    # -- authentication and the tiny authorization rule ----------------------------------------

    def authenticate(self, header: str) -> kubeauth.User | None:
        if not header.startswith("Bearer "):
            return None
        issued = self.issued.get(header.removeprefix("Bearer ").strip())
        if issued is None or self.clock() >= issued.expires or \
                API_AUDIENCE not in issued.audiences:
            return None
        if issued.pod is not None:  # a bound token dies with its pod
            pod = self._lookup("pods", issued.namespace, issued.pod[0])
            if pod is None or pod["metadata"]["uid"] != issued.pod[1]:
                return None
        token = header.removeprefix("Bearer ").strip()
        self.accepted[token] = self.accepted.get(token, 0) + 1
        return user_of(issued.namespace, issued.account)

    @staticmethod
    def allows(user: kubeauth.User, attrs: kubeauth.Attributes) -> bool:
        """A service account may read the pods of its own namespace."""
        prefix = "system:serviceaccount:"
        if not user.name.startswith(prefix):
            return False
        namespace = user.name.removeprefix(prefix).partition(":")[0]
        return (attrs.group, attrs.plural, attrs.subresource) == ("", "pods", "") and \
            attrs.namespace == namespace and attrs.verb in ("get", "list", "watch")

    # -- admission ------------------------------------------------------------------------------

    @staticmethod
    def namespace_objects(namespace: str) -> list[tuple[str, Obj]]:
        """What kube-controller-manager puts in every namespace: the `default` ServiceAccount
        and the `kube-root-ca.crt` ConfigMap."""
        return [
            ("serviceaccounts", {"metadata": {"name": "default", "namespace": namespace}}),
            ("configmaps", {"metadata": {"name": ROOT_CA, "namespace": namespace},
                            "data": {"ca.crt": FAKE_CA}}),
        ]

    def admit_pod(self, namespace: str, pod: Obj) -> None:
        """The ServiceAccount admission plugin, mutating `pod` in place."""
        meta, spec = pod.setdefault("metadata", {}), pod.setdefault("spec", {})
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            return
        name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        spec["serviceAccountName"] = name
        account = self._lookup("serviceaccounts", namespace, name)
        if account is None:
            raise RequestError(403, "Forbidden", f"error looking up service account "
                               f'{namespace}/{name}: serviceaccount "{name}" not found')
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            automount = account.get("automountServiceAccountToken")
        if automount is False:
            return
        volumes = spec.setdefault("volumes", [])
        existing = next((v["name"] for v in volumes
                         if v.get("name", "").startswith(VOLUME_PREFIX)), None)
        volume = existing or _volume_name({v.get("name") for v in volumes})
        for key in ("initContainers", "containers"):
            for container in spec.get(key) or []:
                mounts = container.setdefault("volumeMounts", [])
                if not any(m.get("mountPath") == MOUNT_PATH for m in mounts):
                    mounts.append({"name": volume, "readOnly": True, "mountPath": MOUNT_PATH})
        if existing is None:
            volumes.append(access_volume(volume))


def access_volume(name: str) -> Obj:
    """The projected volume the admission plugin adds."""
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": ROOT_CA, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}


def _volume_name(taken: set[Any]) -> str:
    while True:
        name = VOLUME_PREFIX + "".join(random.choice(_ALPHABET) for _ in range(5))
        if name not in taken:
            return name


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
