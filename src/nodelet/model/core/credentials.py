"""Registry credentials for image pulls, as the kubelet's credentialprovider finds them. No I/O.

Credentials come from docker config files: a pod's `imagePullSecrets` (Secrets of type
`kubernetes.io/dockerconfigjson`, key `.dockerconfigjson`, `{"auths": {REGISTRY: ENTRY}}`, or
`kubernetes.io/dockercfg`, key `.dockercfg`, the bare `{REGISTRY: ENTRY}` map) and the node's
own `config.json`. An entry holds `auth` (base64 `user:password`, which wins) and/or
`username` and `password`.

A `Keyring` matches its registry keys against an image as the kubelet's BasicDockerKeyring
does: a key is `host[:port][/path]` (an `https://` or `http://` scheme and a `/v1/` or `/v2/`
path prefix are dropped); it matches when the port is the same, the path is a prefix of the
repository's path and each host label matches as a glob (`*.example.com` matches
`eu.example.com`, not `example.com`). Keys are tried most specific first (reverse lexical
order, so `quay.io/team` before `quay.io`); credentials for `index.docker.io` serve images of
Docker Hub (`busybox`, `docker.io/...`) when no key matched. `credentials_for` joins the
pod's keyring and the node's, the pod's first, as the kubelet's UnionDockerKeyring does.

Exceptions::

    CredentialsError    a docker config that is not valid JSON of the expected shape, or an
                        `auth` that is not base64 of `user:password`; `.message` names the
                        source (Secret or file) and says what to fix
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import json
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodelet.helpers import errors
from nodelet.model.core import configs, pods, runtime
from nodelet.model.core import volumes as vol

SECRET_TYPE_DOCKERCONFIGJSON = "kubernetes.io/dockerconfigjson"
SECRET_TYPE_DOCKERCFG = "kubernetes.io/dockercfg"
KEY_DOCKERCONFIGJSON = ".dockerconfigjson"
KEY_DOCKERCFG = ".dockercfg"
# The key under which Docker Hub credentials are kept (`https://index.docker.io/v1/`).
DEFAULT_REGISTRY_KEY = "index.docker.io"
# The kubelet's event when a pull secret cannot be read; the pull goes on without it.
FAILED_TO_RETRIEVE = "FailedToRetrieveImagePullSecret"
# nodelet's event for a pull secret that holds no registry credentials (the kubelet skips it).
INVALID_PULL_SECRET = "InvalidImagePullSecret"


class CredentialsError(errors.MessageError):
    """A docker config that cannot be read; `message` names its source and what to fix."""


@dataclass(frozen=True)
class Credential:
    """One username/password pair; `source` says where it came from (for messages), `secret`
    which pull Secret gave it (namespace, name, UID; None: the node's own config)."""

    username: str
    password: str = field(repr=False)  # never in logs or tracebacks
    source: str = ""
    secret: tuple[str, str, str] | None = None

    @property
    def auth(self) -> runtime.AuthConfig:
        # As the kubelet: the decoded pair, no server address (the runtime pulls one image).
        return runtime.AuthConfig(username=self.username, password=self.password)

    @property
    def hash(self) -> str:
        """SHA-256 of the credential, in the form the kubelet hashes it for its pulled-image
        records (Go's JSON of its AuthConfig, empty fields left out) — of username and
        password only: the kubelet hashes a docker config's email too, which nodelet does not
        keep. Only nodelet's own records are compared with it."""
        fields = {"username": self.username, "password": self.password}
        text = json.dumps({k: v for k, v in fields.items() if v}, separators=(",", ":"),
                          ensure_ascii=False)
        for char in "<>&\u2028\u2029":  # Go's encoder escapes these
            text = text.replace(char, f"\\u{ord(char):04x}")
        return hashlib.sha256(text.encode()).hexdigest()


# (registry location as written, credential), in the order of the config.
Entries = tuple[tuple[str, Credential], ...]


# ---------------------------------------------------------------------------------------------
# Docker config files


def _decode_auth(value: str) -> tuple[str, str]:
    """`auth`: base64 (padded or not) of `user:password`."""
    text = value.strip()
    padded = text + "=" * (-len(text) % 4) if not text.endswith("=") else text
    try:
        decoded = base64.b64decode(padded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError("its auth is not valid base64") from exc
    user, sep, password = decoded.partition(":")
    if not sep:
        raise ValueError("its auth must be base64 of username:password")
    return user, password


def _entry(location: str, raw: Any, source: str,
           secret: tuple[str, str, str] | None) -> Credential:
    if not isinstance(raw, Mapping):
        raise ValueError(f'the entry for "{location}" is not an object')
    # Go's encoding/json matches field names case-insensitively.
    entry = {str(k).lower(): v for k, v in raw.items()}
    for key in ("username", "password", "auth"):
        if not isinstance(entry.get(key, ""), str):
            raise ValueError(f'the entry for "{location}" has a {key} that is not a string')
    if entry.get("auth"):
        try:
            user, password = _decode_auth(entry["auth"])
        except ValueError as exc:
            raise ValueError(f'the entry for "{location}": {exc}') from exc
        return Credential(user, password, source, secret)
    return Credential(entry.get("username", ""), entry.get("password", ""), source, secret)


def parse_config(data: bytes, *, wrapped: bool, source: str,
                 secret: tuple[str, str, str] | None = None) -> Entries:
    """The entries of a docker config: `{"auths": {...}}` when `wrapped` (config.json,
    .dockerconfigjson), else the bare map (.dockercfg); `secret`: the pull Secret's
    (namespace, name, UID) when it is one."""
    what = "{\"auths\": {REGISTRY: {...}}}" if wrapped else "{REGISTRY: {...}}"
    try:
        doc = json.loads(data)
        if wrapped and isinstance(doc, Mapping):
            doc = doc.get("auths")
        if doc is None:  # JSON null decodes to an empty config in Go
            return ()
        if not isinstance(doc, Mapping):
            raise ValueError(f"expected a JSON object {what}")
        return tuple((str(loc), _entry(str(loc), raw, source, secret))
                     for loc, raw in doc.items())
    except (ValueError, RecursionError) as exc:
        raise CredentialsError(
            f"{source} is not a valid docker config ({exc}): write {what}, each entry with "
            '"auth" (base64 of username:password) or "username" and "password"'
        ) from exc


# ---------------------------------------------------------------------------------------------
# Keys and matching


def registry_key(location: str) -> str | None:
    """The keyring key of a config location (`https://r.io/v1/` -> `r.io`); None if invalid."""
    value = location if location.startswith(("https://", "http://")) else "https://" + location
    try:
        parsed = urllib.parse.urlsplit(value)
    except ValueError:
        return None
    path = parsed.path
    if path.startswith(("/v2/", "/v1/")):
        path = path[3:]
    return parsed.netloc + path if path not in ("", "/") else parsed.netloc


def _split_host(netloc: str) -> tuple[list[str], str]:
    """Host labels and port, as Go's net.SplitHostPort (no port when it cannot split)."""
    host, sep, port = netloc.rpartition(":")
    if sep and "]" not in port and (":" not in host or host.startswith("[")):
        return host.strip("[]").split("."), port
    return netloc.split("."), ""


def matches(key: str, repo: str) -> bool:
    """Whether the keyring key (host labels may be globs) covers the repository."""
    try:
        glob = urllib.parse.urlsplit("https://" + key)
        target = urllib.parse.urlsplit("https://" + repo)
    except ValueError:
        return False
    glob_labels, glob_port = _split_host(glob.netloc)
    target_labels, target_port = _split_host(target.netloc)
    if glob_port != target_port or len(glob_labels) != len(target_labels):
        return False
    if not target.path.startswith(glob.path):
        return False
    return all(fnmatch.fnmatchcase(t, g) for g, t in zip(glob_labels, target_labels, strict=True))


def repository(image: str) -> str:
    """The image's repository with its registry, as the kubelet normalises it for the keyring:
    no tag or digest, Docker Hub made explicit (`busybox:1` -> `docker.io/library/busybox`)."""
    name = image.split("@", 1)[0]
    if name.rfind(":") > name.rfind("/"):
        name = name[: name.rfind(":")]
    domain, sep, rest = name.partition("/")
    if not sep or (
        not any(c in domain for c in ".:") and domain != "localhost" and domain == domain.lower()
    ):
        domain, rest = "docker.io", name
    if domain == "index.docker.io":
        domain = "docker.io"
    if domain == "docker.io" and "/" not in rest:
        rest = "library/" + rest
    return f"{domain}/{rest}"


def is_default_registry(repo: str) -> bool:
    """Whether the repository is pulled from Docker Hub (the kubelet's isDefaultRegistryMatch)."""
    first, sep, _ = repo.partition("/")
    if not first:
        return False
    if not sep or first in ("docker.io", "index.docker.io"):
        return True
    return not any(c in first for c in ".:")


# ---------------------------------------------------------------------------------------------
# Keyrings


@dataclass(frozen=True)
class Keyring:
    """Keys with their credentials, most specific key first (see the module docstring)."""

    index: tuple[tuple[str, tuple[Credential, ...]], ...] = ()

    def lookup(self, repo: str) -> tuple[Credential, ...]:
        """Every credential whose key matches `repo` (a `repository()`), in key order."""
        found = tuple(c for key, creds in self.index if matches(key, repo) for c in creds)
        if found or not is_default_registry(repo):
            return found
        return next((creds for key, creds in self.index if key == DEFAULT_REGISTRY_KEY), ())


def keyring(entries: Iterable[tuple[str, Credential]]) -> Keyring:
    by_key: dict[str, list[Credential]] = {}
    for location, credential in entries:
        key = registry_key(location)
        if key is not None:
            by_key.setdefault(key, []).append(credential)
    ordered = sorted(by_key, reverse=True)
    return Keyring(tuple((key, tuple(by_key[key])) for key in ordered))


def credentials_for(image: str, keyrings: Sequence[Keyring]) -> tuple[Credential, ...]:
    """The credentials to try, in order, for pulling `image` (empty: pull anonymously)."""
    repo = repository(image)
    return tuple(c for ring in keyrings for c in ring.lookup(repo))


# ---------------------------------------------------------------------------------------------
# Pull secrets


def describe(secret: configs.Secret) -> str:
    return f'image pull secret "{secret.namespace}/{secret.name}"'


def secret_entries(secret: configs.Secret) -> Entries | None:
    """The entries of a pull secret; None when it holds no docker config (the kubelet skips
    such a Secret). Raises CredentialsError for a config that cannot be read."""
    if secret.type == SECRET_TYPE_DOCKERCONFIGJSON and secret.data.get(KEY_DOCKERCONFIGJSON):
        data, wrapped = secret.data[KEY_DOCKERCONFIGJSON], True
    elif secret.type == SECRET_TYPE_DOCKERCFG and secret.data.get(KEY_DOCKERCFG):
        data, wrapped = secret.data[KEY_DOCKERCFG], False
    else:
        return None
    return parse_config(data, wrapped=wrapped, source=describe(secret),
                        secret=(secret.namespace, secret.name, secret.uid))


def unusable_message(secret: configs.Secret) -> str:
    """Why a pull secret adds no credentials (type or key), and what it should be."""
    return (
        f'{describe(secret)} of type "{secret.type}" holds no registry credentials and is '
        f"ignored: use type {SECRET_TYPE_DOCKERCONFIGJSON} with key {KEY_DOCKERCONFIGJSON} or "
        f"type {SECRET_TYPE_DOCKERCFG} with key {KEY_DOCKERCFG}"
    )


def secrets_keyring(secrets: Sequence[configs.Secret]) -> tuple[Keyring, tuple[str, ...]]:
    """The keyring of a pod's pull secrets and the messages about secrets that add nothing.
    Raises CredentialsError for a secret whose docker config cannot be read: the kubelet
    then fails the pull."""
    entries: list[tuple[str, Credential]] = []
    unusable: list[str] = []
    for secret in secrets:
        found = secret_entries(secret)
        if found is None:
            unusable.append(unusable_message(secret))
        else:
            entries += found
    return keyring(entries), tuple(unusable)


def referenced_secrets(pod: pods.Pod) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of the pod's pull secrets."""
    return {("Secret", pod.namespace, name) for name in pod.spec.image_pull_secrets}


def pull_secrets(
    pod: pods.Pod, lookup: vol.Lookup
) -> tuple[tuple[configs.Secret, ...], tuple[str, ...]]:
    """The pod's pull secrets that exist, and the names of those that do not."""
    found: list[configs.Secret] = []
    missing: list[str] = []
    for name in pod.spec.image_pull_secrets:
        obj = lookup("Secret", pod.namespace, name)
        if isinstance(obj, configs.Secret):
            found.append(obj)
        else:
            missing.append(name)
    return tuple(found), tuple(missing)


def missing_message(names: Sequence[str]) -> str:
    """The kubelet's FailedToRetrieveImagePullSecret message."""
    return (
        f"Unable to retrieve some image pull secrets ({', '.join(names)}); attempting to pull "
        "the image may not succeed."
    )
