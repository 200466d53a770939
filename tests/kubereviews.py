"""TokenReview and SubjectAccessReview for the test API server (tests/kubeapi.py): what a node
asks when its node server runs with `--authentication-token-webhook` and
`--authorization-mode=Webhook`.

- `token_review(body, authenticate)`: `POST /apis/authentication.k8s.io/v1/tokenreviews`; the
  token is looked up as a bearer token of the server itself (`authenticate(token)`: static,
  bootstrap and service account tokens), and the answer carries `status.authenticated`,
  `status.user` (username, uid, groups) and `status.audiences`, as kube-apiserver's. An empty
  token is 422 as there.
- `access_review(body)`: `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`, decided
  by `rules`, a small table instead of RBAC the test can change: `Rule(subjects, resources,
  verbs)`, where a subject is a user or group name, a resource `nodes/proxy` or `nodes/*`
  (`*` for everything) and a verb `get` or `*`. By default `system:masters` and
  `kubeadm:cluster-admins` (the API server's kubelet client certificate, as kubeadm 1.29+
  issues it) may do everything. The answer's `status.allowed`, and `reason` naming the rule.

Each review is kept in `seen` (kind, spec) so tests can check what a node asked. `extra`
(user name → `user.extra`) is what a TokenReview answer adds for that user, as kube-apiserver
adds `authentication.kubernetes.io/credential-id` for a service account token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kubeauth

Obj = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    subjects: frozenset[str]
    resources: frozenset[str] = frozenset({"*"})
    verbs: frozenset[str] = frozenset({"*"})

    def allows(self, user: str, groups: list[str], resource: str, verb: str) -> bool:
        group, _, _ = resource.partition("/")
        return bool(self.subjects & {user, *groups}) and \
            bool(self.resources & {"*", resource, f"{group}/*"}) and \
            bool(self.verbs & {"*", verb})


def rule(*subjects: str, resources: tuple[str, ...] = ("*",),
         verbs: tuple[str, ...] = ("*",)) -> Rule:
    return Rule(frozenset(subjects), frozenset(resources), frozenset(verbs))


class ReviewError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


@dataclass
class Reviews:
    rules: list[Rule] = field(default_factory=lambda: [
        rule("system:masters"), rule("kubeadm:cluster-admins")])
    seen: list[tuple[str, Obj]] = field(default_factory=list)
    extra: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def token_review(self, body: Any,
                     authenticate: Callable[[str], kubeauth.User | None]) -> Obj:
        spec = (body or {}).get("spec") or {}
        token = spec.get("token") or ""
        self.seen.append(("TokenReview", {k: v for k, v in spec.items() if k != "token"}))
        if not token:
            raise ReviewError(422, "Invalid", "spec.token: Required value: token must be "
                                              "specified")
        user = authenticate(token)
        status: Obj = {"authenticated": user is not None,
                       "audiences": spec.get("audiences") or
                       ["https://kubernetes.default.svc.cluster.local"]}
        if user is not None:
            status["user"] = {"username": user.name, "uid": f"uid-{user.name}",
                              "groups": list(user.groups)}
            if user.name in self.extra:
                status["user"]["extra"] = self.extra[user.name]
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "metadata": {"creationTimestamp": None},
                "spec": {k: v for k, v in spec.items() if k != "token"}, "status": status}

    def access_review(self, body: Any) -> Obj:
        spec = (body or {}).get("spec") or {}
        self.seen.append(("SubjectAccessReview", spec))
        attrs = spec.get("resourceAttributes")
        if (not spec.get("user") and not spec.get("groups")) or attrs is None:
            raise ReviewError(422, "Invalid", "spec.user or spec.groups and "
                                              "spec.resourceAttributes are required here")
        resource = attrs.get("resource", "")
        if attrs.get("subresource"):
            resource += "/" + attrs["subresource"]
        found = next((r for r in self.rules if r.allows(
            spec.get("user", ""), spec.get("groups") or [], resource, attrs.get("verb", ""))),
            None)
        status: Obj = {"allowed": found is not None}
        if found is not None:
            status["reason"] = f"allowed by the rule for {', '.join(sorted(found.subjects))}"
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}
