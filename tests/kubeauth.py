"""Who is calling the test API server, and what they may do: kube-apiserver's authenticators,
its Node authorizer (with the RBAC roles a kubeadm cluster binds) and the NodeRestriction
admission plugin.

Authentication, in kube-apiserver's order: a verified client certificate (CN → user, O →
groups), a static bearer token (`tokens`), a bootstrap token `<id>.<secret>` matched to the
Secret `kube-system/bootstrap-token-<id>` (type `bootstrap.kubernetes.io/token`,
`usage-bootstrap-authentication: "true"`, not expired) → user `system:bootstrap:<id>`, groups
`system:bootstrappers` plus its `auth-extra-groups`. Nothing matched: 401.

Authorization (`--authorization-mode=Node,RBAC` with kubeadm's bindings):
- `system:masters`: everything;
- a node (`system:node:<name>` in `system:nodes`) — the Node authorizer
  (plugin/pkg/auth/authorizer/node): Secrets and ConfigMaps only get/list/watch of one named
  object (a list or watch names it with `fieldSelector=metadata.name=<name>`, as the request
  info does) that a pod bound to the node references (volumes, projected sources, env,
  envFrom, imagePullSecrets); PVCs only get, the same way; `serviceaccounts/<sa>/token` only
  create, for the service account of a pod bound to it; Leases only get/create/update/patch/
  delete in `kube-node-lease` with the node's name; everything else by the `system:node`
  ClusterRole (nodes, nodes/status, pods, pods/status, events, services, endpoints, CSRs);
- a bootstrapper: `system:node-bootstrapper` (CSR create/get/list/watch).
Denials are 403 `Forbidden` Status objects worded as kube-apiserver's.

Admission (NodeRestriction, plugin/pkg/admission/noderestriction), for node callers: pods
created only as mirror pods of itself referencing no Secrets, ConfigMaps, PVCs or service
account; pod status written and pods deleted only when bound to it; only its own Node (no
taint or ownerReference change after creation, no label in `node-restriction.kubernetes.io/`
or an unlisted `kubernetes.io`/`k8s.io` namespace); only its own Lease; service account tokens
only bound to a pod bound to it, with the pod's UID.
"""

from __future__ import annotations

import base64
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

import kubepki

Obj = dict[str, Any]
NODE_LEASE_NAMESPACE = "kube-node-lease"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()

    @property
    def node(self) -> str | None:
        """The node's name when this is a node identity, else None."""
        if "system:nodes" in self.groups and self.name.startswith("system:node:"):
            return self.name.removeprefix("system:node:")
        return None


def node_user(name: str) -> User:
    return User(f"system:node:{name}", ("system:nodes", "system:authenticated"))


ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))

# The caller of the request being served (each aiohttp handler runs in its own task, so its
# own context); None for the tests' direct calls, which are never authorized or admitted.
CALLER: contextvars.ContextVar[User | None] = contextvars.ContextVar("caller", default=None)


class Forbidden(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Attributes:
    verb: str
    plural: str
    group: str
    namespace: str
    name: str
    subresource: str

    @property
    def resource(self) -> str:
        return f"{self.plural}/{self.subresource}" if self.subresource else self.plural

    def forbidden_message(self, user: User, reason: str) -> str:
        """kube-apiserver's wording (responsewriters.forbiddenMessage)."""
        text = (f'User "{user.name}" cannot {self.verb} resource "{self.resource}" in API '
                f'group "{self.group}"')
        text += (f' in the namespace "{self.namespace}"' if self.namespace
                 else " at the cluster scope")
        return f"{text}: {reason}" if reason else text


def request_name(name: str, verb: str, query: dict[str, str]) -> str:
    """The request's object name; a list or watch with `fieldSelector=metadata.name=X` (and
    nothing else) names X, as the API server's request info does."""
    if name or verb not in ("list", "watch"):
        return name
    selector = query.get("fieldSelector", "")
    for op in ("==", "="):
        key, found, value = selector.partition(op)
        if found and key.strip() == "metadata.name" and "," not in selector:
            return value.strip()
    return ""


# -- the system:node ClusterRole (plugin/pkg/auth/authorizer/rbac/bootstrappolicy) -------------

_NODE_RULES: dict[tuple[str, str], frozenset[str]] = {
    ("", "nodes"): frozenset({"create", "get", "list", "watch", "delete", "patch", "update"}),
    ("", "nodes/status"): frozenset({"patch", "update"}),
    ("", "pods"): frozenset({"get", "list", "watch", "create", "delete"}),
    ("", "pods/status"): frozenset({"patch", "update"}),
    ("", "pods/eviction"): frozenset({"create"}),
    ("", "events"): frozenset({"create", "patch", "update"}),
    ("events.k8s.io", "events"): frozenset({"create", "patch", "update"}),
    ("", "services"): frozenset({"get", "list", "watch"}),
    ("", "endpoints"): frozenset({"get", "list", "watch"}),
    ("certificates.k8s.io", "certificatesigningrequests"):
        frozenset({"create", "get", "list", "watch"}),
    # The kubelet's delegated authentication and authorization of its own server.
    ("authentication.k8s.io", "tokenreviews"): frozenset({"create"}),
    ("authorization.k8s.io", "subjectaccessreviews"): frozenset({"create"}),
}
_BOOTSTRAPPER_RULES: dict[tuple[str, str], frozenset[str]] = {
    ("certificates.k8s.io", "certificatesigningrequests"):
        frozenset({"create", "get", "list", "watch"}),
}

# Labels a kubelet may set on its Node inside the kubernetes.io and k8s.io namespaces
# (kubeletapis.KubeletLabels, KubeletLabelNamespaces).
_KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
    "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type", "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
})
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _in_namespace(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def forbidden_node_labels(new: dict[str, str], old: dict[str, str]) -> list[str]:
    """Labels added, changed or removed that a node may not touch on its own Node."""
    out = []
    for key in sorted(set(new) | set(old)):
        if new.get(key) == old.get(key) and (key in new) == (key in old):
            continue
        namespace = key.partition("/")[0] if "/" in key else ""
        restricted = _in_namespace(namespace, "node-restriction.kubernetes.io")
        reserved = any(_in_namespace(namespace, d) for d in ("kubernetes.io", "k8s.io")) \
            and key not in _KUBELET_LABELS \
            and not any(_in_namespace(namespace, d) for d in _KUBELET_LABEL_NAMESPACES)
        if restricted or reserved:
            out.append(key)
    return out


# -- what a pod references (the Node authorizer's graph edges) ---------------------------------


def _pod_containers(spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def pod_references(pod: Obj) -> set[tuple[str, str]]:
    """(plural, name) of the Secrets, ConfigMaps, PVCs and service account a pod references."""
    spec = pod.get("spec") or {}
    refs = {("secrets", s.get("name", "")) for s in spec.get("imagePullSecrets") or []}
    refs.add(("serviceaccounts", spec.get("serviceAccountName") or "default"))
    for volume in spec.get("volumes") or []:
        if "secret" in volume:
            refs.add(("secrets", volume["secret"].get("secretName", "")))
        if "configMap" in volume:
            refs.add(("configmaps", volume["configMap"].get("name", "")))
        if "persistentVolumeClaim" in volume:
            refs.add(("persistentvolumeclaims", volume["persistentVolumeClaim"].get(
                "claimName", "")))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in source:
                refs.add(("secrets", source["secret"].get("name", "")))
            if "configMap" in source:
                refs.add(("configmaps", source["configMap"].get("name", "")))
        for key in ("csi", "cephfs", "flexVolume", "rbd", "iscsi", "azureFile", "scaleIO",
                    "storageos"):
            ref = (volume.get(key) or {}).get("secretRef") or \
                (volume.get(key) or {}).get("nodePublishSecretRef")
            if ref:
                refs.add(("secrets", ref.get("name", "")))
    for container in _pod_containers(spec):
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if "secretKeyRef" in source:
                refs.add(("secrets", source["secretKeyRef"].get("name", "")))
            if "configMapKeyRef" in source:
                refs.add(("configmaps", source["configMapKeyRef"].get("name", "")))
        for env_from in container.get("envFrom") or []:
            if "secretRef" in env_from:
                refs.add(("secrets", env_from["secretRef"].get("name", "")))
            if "configMapRef" in env_from:
                refs.add(("configmaps", env_from["configMapRef"].get("name", "")))
    return refs


# -- the policy ---------------------------------------------------------------------------------


class Access:
    """Authentication, authorization and admission for one server. `lookup(plural, namespace,
    name)` and `items(plural)` read the server's store."""

    def __init__(self, *, lookup: Callable[[str, str, str], Obj | None],
                 items: Callable[[str], list[Obj]], authority: kubepki.Authority | None,
                 node_authorizer: bool = True) -> None:
        self.tokens: dict[str, User] = {}
        self.node_authorizer = node_authorizer
        self._lookup = lookup
        self._items = items
        self._authority = authority

    # -- authentication ---------------------------------------------------------------------

    def authenticate(self, request: web.Request) -> User | None:
        user = self._from_certificate(request)
        if user is not None:
            return user
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return None
        return self.token_user(header.removeprefix("Bearer ").strip())

    def token_user(self, token: str) -> User | None:
        """A static or bootstrap token's user (also what a TokenReview answers)."""
        return self.tokens.get(token) or self._bootstrap_user(token)

    def _from_certificate(self, request: web.Request) -> User | None:
        if self._authority is None or request.transport is None:
            return None
        ssl_object = request.transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:  # none presented (a presented one is verified by the TLS handshake)
            return None
        subject = kubepki.subject_of(der)
        if subject is None:
            return None
        name, groups = subject
        return User(name, (*groups, "system:authenticated"))

    def _bootstrap_user(self, token: str) -> User | None:
        token_id, dot, secret = token.partition(".")
        if not dot or len(token_id) != 6 or len(secret) != 16:
            return None
        obj = self._lookup("secrets", "kube-system", f"bootstrap-token-{token_id}")
        if obj is None or obj.get("type") != "bootstrap.kubernetes.io/token":
            return None
        data = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
        data |= obj.get("stringData") or {}
        if data.get("token-id") != token_id or data.get("token-secret") != secret or \
                data.get("usage-bootstrap-authentication") != "true":
            return None
        expiration = data.get("expiration")
        if expiration and datetime.fromisoformat(expiration.replace("Z", "+00:00")) < \
                datetime.now(UTC):
            return None
        extra = tuple(g for g in data.get("auth-extra-groups", "").split(",") if g)
        return User(f"system:bootstrap:{token_id}",
                    ("system:bootstrappers", *extra, "system:authenticated"))

    # -- authorization ------------------------------------------------------------------------

    def authorize(self, user: User, attrs: Attributes) -> None:
        """Raises Forbidden (with kube-apiserver's message) when `user` may not do it."""
        if "system:masters" in user.groups or not self.node_authorizer:
            return
        node = user.node
        reason = ""
        if node is not None:
            allowed, reason = self._node_decision(node, attrs)
            if allowed:
                return
        elif "system:bootstrappers" in user.groups and \
                attrs.verb in _BOOTSTRAPPER_RULES.get((attrs.group, attrs.resource), ()):
            return
        raise Forbidden(attrs.forbidden_message(user, reason))

    def _node_decision(self, node: str, attrs: Attributes) -> tuple[bool, str]:
        key = (attrs.group, attrs.plural)
        if key in (("", "secrets"), ("", "configmaps")):
            if attrs.verb not in ("get", "list", "watch"):
                return False, "can only read resources of this type"
            if attrs.subresource:
                return False, "cannot read subresource"
            if not attrs.namespace:
                return False, "can only read namespaced object of this type"
            return self._related(node, attrs)
        if key == ("", "persistentvolumeclaims"):
            if attrs.verb != "get":
                return False, "can only get individual resources of this type"
            return self._related(node, attrs)
        if key == ("", "serviceaccounts"):
            if attrs.verb != "create" or not attrs.name:
                return False, "can only create tokens for individual service accounts"
            if attrs.subresource != "token":
                return False, "can only create token subresource of serviceaccount"
            return self._related(node, attrs)
        if key == ("coordination.k8s.io", "leases"):
            return _lease_decision(node, attrs)
        return attrs.verb in _NODE_RULES.get((attrs.group, attrs.resource), ()), ""

    def _related(self, node: str, attrs: Attributes) -> tuple[bool, str]:
        if not attrs.name:
            return False, "No Object name found"
        for pod in self._items("pods"):
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            if spec.get("nodeName") == node and meta.get("namespace") == attrs.namespace and \
                    (attrs.plural, attrs.name) in pod_references(pod):
                return True, ""
        return False, f"no relationship found between node '{node}' and this object"

    # -- admission (NodeRestriction) ------------------------------------------------------------

    def admit(self, operation: str, plural: str, subresource: str, old: Obj | None,
              new: Obj | None) -> None:
        """Raises Forbidden when the calling node may not make this change; other callers
        and the tests' direct calls pass."""
        caller = CALLER.get()
        node = caller.node if caller is not None else None
        if node is None or not self.node_authorizer:
            return
        if plural == "pods":
            _admit_pod(node, operation, subresource, old, new)
        elif plural == "nodes":
            _admit_node(node, operation, old, new)
        elif plural == "leases" and operation == "create" and new is not None:
            meta = new.get("metadata") or {}
            if meta.get("name") != node or meta.get("namespace") != NODE_LEASE_NAMESPACE:
                raise Forbidden("can only access node lease with the same name as the "
                                "requesting node")

    def admit_token(self, namespace: str, body: Any) -> None:
        """A node's TokenRequest must be bound to a pod bound to it, with the pod's UID."""
        caller = CALLER.get()
        node = caller.node if caller is not None else None
        if node is None or not self.node_authorizer:
            return
        ref = ((body or {}).get("spec") or {}).get("boundObjectRef") or {}
        if ref.get("kind") != "Pod":
            raise Forbidden(f"node '{node}' requested token not bound to a pod")
        pod = self._lookup("pods", namespace, ref.get("name", ""))
        if pod is None:
            raise Forbidden(f"node '{node}' requested token bound to a pod that does not "
                            "exist")
        if (pod.get("spec") or {}).get("nodeName") != node:
            raise Forbidden(f"node '{node}' requested token bound to a pod scheduled on a "
                            "different node")
        if ref.get("uid") and ref["uid"] != pod["metadata"]["uid"]:
            raise Forbidden(f"the UID in the bound object reference ({ref['uid']}) does not "
                            f"match the UID in record ({pod['metadata']['uid']}). The object "
                            "might have been deleted and then recreated")


def _lease_decision(node: str, attrs: Attributes) -> tuple[bool, str]:
    if attrs.verb not in ("get", "create", "update", "patch", "delete"):
        return False, "can only get, create, update, patch, or delete a node lease"
    if attrs.namespace != NODE_LEASE_NAMESPACE:
        return False, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
    if attrs.verb != "create" and attrs.name != node:
        return False, "can only access node lease with the same name as the requesting node"
    return True, ""


def _admit_pod(node: str, operation: str, subresource: str, old: Obj | None,
               new: Obj | None) -> None:
    if operation == "create" and not subresource and new is not None:
        annotations = (new.get("metadata") or {}).get("annotations") or {}
        if MIRROR_ANNOTATION not in annotations:
            raise Forbidden(f'pod does not have "{MIRROR_ANNOTATION}" annotation, node '
                            f'"{node}" can only create mirror pods')
        if (new.get("spec") or {}).get("nodeName") != node:
            raise Forbidden(f'node "{node}" can only create pods with spec.nodeName set to '
                            "itself")
        for owner in (new.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("kind") != "Node" or owner.get("name") != node:
                raise Forbidden(f'node "{node}" can only create pods with an owner reference '
                                "set to itself")
        if (new.get("spec") or {}).get("serviceAccountName"):
            raise Forbidden(f'node "{node}" can not create pods that reference a service '
                            "account")
        used = {plural for plural, _ in pod_references(new)} - {"serviceaccounts"}
        if used:
            raise Forbidden(f'node "{node}" can not create pods that reference '
                            f"{min(used)}")
        return
    bound = ((old or {}).get("spec") or {}).get("nodeName")
    if subresource == "status" and bound != node:
        raise Forbidden(f'node "{node}" can only update pod status for pods with '
                        "spec.nodeName set to itself")
    if operation == "delete" and bound != node:
        raise Forbidden(f'node "{node}" can only delete pods with spec.nodeName set to itself')


def _admit_node(node: str, operation: str, old: Obj | None, new: Obj | None) -> None:
    target = ((new or old or {}).get("metadata") or {}).get("name")
    if target != node:
        raise Forbidden(f'node "{node}" is not allowed to modify node "{target}"')
    if new is None:
        return
    new_labels = (new.get("metadata") or {}).get("labels") or {}
    old_labels = ((old or {}).get("metadata") or {}).get("labels") or {}
    if old is not None:
        if (new.get("spec") or {}).get("taints") != (old.get("spec") or {}).get("taints"):
            raise Forbidden(f'node "{node}" is not allowed to modify taints')
        if (new.get("metadata") or {}).get("ownerReferences") != \
                (old.get("metadata") or {}).get("ownerReferences"):
            raise Forbidden(f'node "{node}" is not allowed to modify ownerReferences')
    forbidden = forbidden_node_labels(new_labels, old_labels)
    if forbidden:
        raise Forbidden(f"is not allowed to modify labels: {', '.join(forbidden)}")


def forbidden_status(plural: str, group: str, name: str, message: str) -> Obj:
    """The 403 Status body: `<resource> "<name>" is forbidden: <message>`."""
    qualified = f"{plural}.{group}" if group else plural
    subject = f'{qualified} "{name}"' if name else qualified
    details: Obj = {"kind": plural}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"{subject} is forbidden: {message}", "reason": "Forbidden",
            "details": details, "code": 403}


def bootstrap_token_secret(token_id: str, secret: str, *,
                           extra_groups: str = "system:bootstrappers:kubeadm:default-node-token"
                           ) -> Obj:
    """The Secret `kubeadm token create` writes for token `<token_id>.<secret>`."""
    data = {"token-id": token_id, "token-secret": secret,
            "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
            "auth-extra-groups": extra_groups}
    return {"metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}
