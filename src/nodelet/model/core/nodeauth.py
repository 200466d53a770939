"""Who is asking the node server, and may they (pure): the kubelet's authentication and
authorization seams (pkg/kubelet/server/auth.go).

- `Credentials` are what a request carries (a bearer token, a verified client certificate's
  subject); an `Authenticator` turns them into a `User` or None. `TokenFile` is the standalone
  token authenticator (kube-apiserver's --token-auth-file CSV); client certificates are verified
  by TLS against --client-ca-file, then again at every request against the client CA served at
  that moment (as the kubelet's x509 authenticator, k8s.io/apiserver
  pkg/authentication/request/x509: a CA taken out of the file, or a certificate expired
  since, no longer authenticates on a connection already open): `chain_refusal` is that
  check's pure part (validity dates, CA constraints, the clientAuth usage) over
  `ChainCertificate`s the node server's adapter read and whose signatures it checked. A
  certificate that passes is mapped by `user_from_certificate` (CN user, O groups). Cluster
  mode adds a TokenReview authenticator behind the same Protocol.
- `LocalToken` is the node-local credential: one token the agent makes at every start and
  keeps where only root reads it, accepted only on a connection from loopback; its user is
  `LOCAL_USER`, which `LocalFirst` allows everything without asking the mode's authorizer.
  Root on the node already reaches every pod through the runtime's socket; this gives it the
  same reach through the node server with no setup, while the network keeps the mode's rules.
- `request_attributes` maps a request onto the kubelet's authorization attributes: the verb from
  the HTTP method, resource `nodes`, name the node's, and the subresource from the path — a
  list, as the kubelet with KubeletFineGrainedAuthz (on by default since 1.33): `/pods`,
  `/runningpods`, `/healthz` and `/configz` ask their own subresource first, then `proxy`;
  the request is allowed when any of them is (`authorize`, in order); exec, attach and
  portForward always ask `create` (stricter than the kubelet, whose GET upgrade asks `get`).
  An `Authorizer`
  decides; standalone uses `AllowAuthenticated` (any authenticated user may do anything: the
  node has no RBAC), cluster mode a SubjectAccessReview authorizer.

Exceptions: `TokenFileError` (a malformed token file; the message names the line);
`Overloaded` (an authenticator or authorizer cannot decide now: too many reviews in flight;
the server answers 429 with `retry_after`).
"""

from __future__ import annotations

import csv
import hmac
import io
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"


class TokenFileError(ValueError):
    """A token auth file line is not `token,user,uid[,"group1,group2"]`."""


class Overloaded(Exception):
    """No answer now: too many reviews in flight. Try again after `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    # A TokenReview's `user.extra` (e.g. `authentication.kubernetes.io/credential-id`), as
    # sorted (key, values) pairs: a SubjectAccessReview passes it on (`spec.extra`).
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Proved by the node-local credential (`LocalToken`) and nothing else; `LocalFirst`
    # allows it everything. A name or group cannot claim it.
    local: bool = False

    def with_authenticated_group(self) -> User:
        """As kube-apiserver: every authenticated user is also in system:authenticated."""
        if AUTHENTICATED in self.groups:
            return self
        return replace(self, groups=(*self.groups, AUTHENTICATED))


ANONYMOUS_USER = User(ANONYMOUS, groups=(UNAUTHENTICATED,))
LOCAL_USER = User("nodelet:node-local", groups=("nodelet:node-local", AUTHENTICATED),
                  local=True)


@dataclass(frozen=True)
class Credentials:
    """What one request carries. `certificate_subject` is set only for a client certificate
    verified, at this request, against the client CA served now: ((attribute, value), ...)
    pairs."""

    token: str | None = None
    certificate_subject: tuple[tuple[str, str], ...] = ()
    # A client certificate was presented, whether or not it verifies now: credentials that
    # were presented but not accepted are never anonymous (the kubelet's union authenticator
    # fails on the x509 authenticator's error rather than falling through to anonymous).
    certificate_presented: bool = False
    # The client's address (its IP), for limits per client; "" when not known.
    source: str = ""


@dataclass(frozen=True)
class Attributes:
    """The kubelet's authorization attributes for one request (a SubjectAccessReview's
    resourceAttributes): resource `nodes` in the core group, named after the node."""

    user: User
    verb: str
    subresource: str
    name: str
    resource: str = "nodes"
    api_group: str = ""
    path: str = ""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    # No decision could be made (the API server did not answer a SubjectAccessReview): the
    # kubelet answers 500 `Authorization error (...)` instead of 403.
    error: bool = False


class Authenticator(Protocol):
    async def authenticate(self, credentials: Credentials) -> User | None:
        """The user these credentials prove, or None (then the next authenticator, or 401)."""
        ...


class Authorizer(Protocol):
    async def authorize(self, attributes: Attributes) -> Decision:
        """Whether `attributes.user` may do it; the reason is shown in a 403."""
        ...


class AllowAuthenticated:
    """Standalone authorization: any authenticated user may do anything (the kubelet's
    AlwaysAllow mode); anonymous users, when allowed at all, only what `anonymous_allowed`
    lists (nothing by default)."""

    def __init__(self, anonymous_allowed: frozenset[str] = frozenset()) -> None:
        self._anonymous_allowed = anonymous_allowed

    async def authorize(self, attributes: Attributes) -> Decision:
        if AUTHENTICATED in attributes.user.groups:
            return Decision(True)
        if attributes.subresource in self._anonymous_allowed:
            return Decision(True)
        return Decision(False, f"user {attributes.user.name!r} is not authenticated")


class LocalFirst:
    """The node-local user may do anything (as root on the node can through the runtime);
    everyone else is decided by `inner`, the mode's authorizer."""

    def __init__(self, inner: Authorizer) -> None:
        self.inner = inner

    async def authorize(self, attributes: Attributes) -> Decision:
        if attributes.user.local:
            return Decision(True)
        return await self.inner.authorize(attributes)


# -- the kubelet's attribute mapping -------------------------------------------------------------

# Any other method (HEAD, OPTIONS, ...) gets an empty verb, as in the kubelet's
# GetRequestAttributes (pkg/kubelet/server/auth.go), which maps only these five.
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
          "DELETE": "delete"}

# Path prefix → the subresources checked, in order (the first allowed one wins); anything
# else (exec, attach, portForward, run, containerLogs) is `proxy` only. The kubelet with
# KubeletFineGrainedAuthz (beta, on by default since 1.33) asks the fine-grained subresource
# first, then `proxy`, so RBAC written for older kubelets keeps working.
_SUBRESOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/stats", ("stats",)), ("/metrics", ("metrics",)), ("/logs", ("log",)),
    ("/checkpoint", ("checkpoint",)), ("/pods", ("pods", "proxy")),
    ("/runningpods", ("pods", "proxy")), ("/healthz", ("healthz", "proxy")),
    ("/configz", ("configz", "proxy")))


# Paths that open a session in a container or the pod's network: nodelet asks `create` for
# them whatever the method. The kubelet maps the GET of a WebSocket upgrade to `get`, so a
# role with only `get nodes/proxy` (given to monitoring, to read /pods or /metrics through the
# proxy) could exec into every pod; here it needs `create nodes/proxy`, which kube-apiserver's
# own kubelet client certificate has (it holds every verb).
_SESSION_PREFIXES = ("/exec", "/attach", "/portForward")


def _is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def request_attributes(user: User, method: str, path: str,
                       node_name: str) -> tuple[Attributes, ...]:
    """The attributes the kubelet checks for `method path` on node `node_name`, in the order
    it checks them; the request is allowed when any one is."""
    subresources = next((subs for prefix, subs in _SUBRESOURCES if _is_subpath(path, prefix)),
                        ("proxy",))
    verb = _VERBS.get(method.upper(), "")
    if any(_is_subpath(path, prefix) for prefix in _SESSION_PREFIXES):
        verb = "create"
    return tuple(Attributes(user=user, verb=verb, subresource=sub, name=node_name, path=path)
                 for sub in subresources)


async def authorize(authorizer: Authorizer,
                    attributes: Sequence[Attributes]) -> tuple[Decision, Attributes]:
    """The kubelet's loop: each attribute in order until one is allowed; an error (no
    decision) ends it at once. The decision and the attributes it is about (the last asked).
    Raises Overloaded from the authorizer."""
    decision, asked = Decision(False, "no attributes"), attributes[0]
    for asked in attributes:
        decision = await authorizer.authorize(asked)
        if decision.allowed or decision.error:
            break
    return decision, asked


def user_from_certificate(subject: Sequence[tuple[str, str]]) -> User | None:
    """A client certificate's user: CN is the name, each O a group (None without a CN)."""
    names = [value for key, value in subject if key == "commonName"]
    if not names or not names[0]:
        return None
    groups = tuple(value for key, value in subject if key == "organizationName")
    return User(names[0], groups=groups)


# -- the token file --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenFile:
    """Bearer tokens from a kube-apiserver --token-auth-file: `token,user,uid[,"g1,g2"]` per
    line (extra columns ignored, blank lines skipped)."""

    users: Mapping[str, User] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, source: str = "token file") -> TokenFile:
        users: dict[str, User] = {}
        for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
            if not row or not "".join(row).strip():
                continue
            if len(row) < 3 or not row[0].strip() or not row[1].strip():
                raise TokenFileError(
                    f"{source} line {number}: want token,user,uid[,\"group1,group2\"], "
                    f"got {len(row)} field(s)")
            groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) \
                if len(row) > 3 else ()
            users[row[0].strip()] = User(row[1].strip(), row[2].strip(), groups)
        return cls(users)

    async def authenticate(self, credentials: Credentials) -> User | None:
        if credentials.token is None:
            return None
        return self.users.get(credentials.token)


class LocalToken:
    """The node-local credential: `token`, presented as a bearer token on a connection from
    a loopback address (an IPv4-mapped one too). Anywhere else it proves nothing here."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("the node-local token is empty")
        self._token = token.encode()

    async def authenticate(self, credentials: Credentials) -> User | None:
        if credentials.token is None or not is_loopback(credentials.source):
            return None
        if hmac.compare_digest(credentials.token.encode(), self._token):
            return LOCAL_USER
        return None


def is_loopback(address: str) -> bool:
    """Whether a client's address is this host's loopback (False when unknown or not an IP)."""
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


class CertificateAuthenticator:
    """Users of client certificates verified at this request against the client CA served
    now (`Credentials.certificate_subject`; the node server's adapter verifies them)."""

    async def authenticate(self, credentials: Credentials) -> User | None:
        return user_from_certificate(credentials.certificate_subject)


# -- a client certificate, verified again at each request -----------------------------------------

# Extended key usages (RFC 5280 4.2.1.12), as dotted OIDs.
CLIENT_AUTH = "1.3.6.1.5.5.7.3.2"
ANY_EXTENDED_KEY_USAGE = "2.5.29.37.0"


@dataclass(frozen=True)
class ChainCertificate:
    """What the check of a client's chain reads of one of its certificates."""

    not_before: datetime  # aware, UTC
    not_after: datetime
    version: int = 3  # X.509 v1 or v3
    # Basic constraints: None without the extension, else cA and the pathLenConstraint (None:
    # no limit).
    ca: bool | None = None
    path_length: int | None = None
    # Key usage keyCertSign; None without the extension.
    cert_sign: bool | None = None
    # Extended key usages (dotted OIDs); None without the extension (good for any usage).
    usages: frozenset[str] | None = None


def chain_refusal(chain: Sequence[ChainCertificate], now: datetime) -> str | None:
    """Why `chain` does not authenticate a client at `now`; None when it does. `chain` runs
    from the client's certificate to a CA of the client CA file served now, each certificate
    signed by the next (the adapter checked the signatures). What Go's x509
    Certificate.Verify checks besides them, with the kubelet's options (KeyUsages
    ClientAuth): every certificate within its validity dates; each issuer a CA (basic
    constraints cA, required of intermediates, and of a v3 CA; keyCertSign when it has a key
    usage), none with more intermediates below it than its pathLenConstraint; and every
    certificate with extended key usages allowing client authentication."""
    for index, cert in enumerate(chain):
        what = "the client certificate" if index == 0 else f"its issuer {index}"
        if not cert.not_before <= now <= cert.not_after:
            return (f"{what} has expired or is not yet valid: valid from "
                    f"{cert.not_before.isoformat()} to {cert.not_after.isoformat()}")
        if index > 0:
            why = _issuer_refusal(cert, below=index - 1, root=index == len(chain) - 1)
            if why is not None:
                return f"{what} {why}"
        if cert.usages and ANY_EXTENDED_KEY_USAGE not in cert.usages \
                and CLIENT_AUTH not in cert.usages:
            return f"{what}'s extended key usage does not allow client authentication"
    return None


def _issuer_refusal(cert: ChainCertificate, *, below: int, root: bool) -> str | None:
    """Why `cert` may not sign the chain below it (`below` intermediates under it)."""
    if cert.ca is False or (cert.ca is None and (not root or cert.version >= 3)):
        return "is not a CA"
    if cert.cert_sign is False:
        return "has a key usage without keyCertSign"
    if cert.path_length is not None and below > cert.path_length:
        return f"allows {cert.path_length} intermediate(s) below it, not {below}"
    return None


async def authenticate(authenticators: Sequence[Authenticator], credentials: Credentials,
                       *, anonymous: bool) -> User | None:
    """The first authenticator's user (in system:authenticated); without any, the anonymous
    user if `anonymous`, else None (401). Credentials that were presented but not accepted
    are never anonymous."""
    for authenticator in authenticators:
        user = await authenticator.authenticate(credentials)
        if user is not None:
            return user.with_authenticated_group()
    presented = (credentials.token is not None or credentials.certificate_presented
                 or bool(credentials.certificate_subject))
    return ANONYMOUS_USER if anonymous and not presented else None
