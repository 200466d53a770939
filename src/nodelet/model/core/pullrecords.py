"""Who may use an image that is already on the node (pure): the kubelet's
KubeletEnsureSecretPulledImages (beta, on by default since 1.35; its pkg/kubelet/images/
pullmanager), so that a pod without a registry's credentials cannot run a private image that
another pod pulled.

Two kinds of record, kept on disk by the agent (`adapters.pullrecordfiles`):
- a *pulling intent* names an image (as a container writes it) while it is being pulled. After
  a crash, an image found present whose intent is still there was pulled by the agent, with
  credentials unknown;
- a *pulled record*, one per image ID (the runtime's image reference), maps each image name
  (as written, less tag and digest) to the credentials that pulled it: `node_accessible` when
  it was pulled anonymously or with the node's own credentials (any pod may use it), else the
  pull Secrets that did (namespace, name, UID and a hash of the credential).

The decision, for an image present under `imagePullPolicy` IfNotPresent or Never (`must_pull`):
1. the verification policy (`imagePullCredentialsVerificationPolicy`) says whether to verify:
   `NeverVerify` never; `NeverVerifyPreloadedImages` (the default) only images the agent pulled
   (a record or an intent exists; an image imported by other means is *preloaded*);
   `NeverVerifyAllowlistedImages` every image but those of `preloadedImagesVerificationAllowlist`
   (names, or prefixes ending in `/*`); `AlwaysVerify` always;
2. no record, or none for this name: verify, i.e. pull with the pod's own credentials;
3. node-accessible: the pod may use it;
4. one of the pod's pull Secrets holds the same credential (same hash, from any Secret), or is the
   same Secret (namespace, name and UID: its content may have been rotated): the pod may use
   it, and the record learns that Secret (`Decision.learn`) while it names fewer than 100;
5. otherwise: pull. Under `imagePullPolicy: Never` the pod is refused with the words of a
   missing image (the kubelet does not tell a pod an image it may not use is there).

Exceptions: `ValueError` from `check_settings` (the kubelet's configuration errors) and from
`decode_record` / `decode_intent` (a file that is not a record).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from nodelet.model.core import imagerefs
from nodelet.model.core import status as st

Policy = Literal["NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages",
                 "AlwaysVerify"]
POLICIES: tuple[Policy, ...] = ("NeverVerify", "NeverVerifyPreloadedImages",
                                "NeverVerifyAllowlistedImages", "AlwaysVerify")
DEFAULT_POLICY: Policy = "NeverVerifyPreloadedImages"
# The kubelet stops adding Secrets to a record while matching at this many (a namespace churn
# must not grow a record without bound); a pull still adds its Secret.
LEARN_LIMIT = 100
API_VERSION = "kubelet.config.k8s.io/v1beta1"
_READ_VERSIONS = (API_VERSION, "kubelet.config.k8s.io/v1alpha1")


@dataclass(frozen=True, order=True)
class PullSecret:
    """A pull Secret that gave a credential; ordered as the kubelet sorts them."""

    namespace: str
    name: str
    uid: str
    credential_hash: str = field(default="", compare=False)

    @property
    def coordinates(self) -> tuple[str, str, str]:
        return self.namespace, self.name, self.uid


@dataclass(frozen=True)
class PullCredentials:
    """What pulled an image name: the node's credentials or none (`node_accessible`), or
    Secrets."""

    node_accessible: bool = False
    secrets: tuple[PullSecret, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.node_accessible and not self.secrets


NODE_ACCESSIBLE = PullCredentials(node_accessible=True)


@dataclass(frozen=True)
class PulledRecord:
    image_ref: str
    updated: datetime
    # Image name (as written, no tag or digest) -> the credentials that pulled it.
    credentials: Mapping[str, PullCredentials] = field(default_factory=dict)


Outcome = Literal["policy", "record", "verify"]


@dataclass(frozen=True)
class Decision:
    """`pull`: the pod must pull the image with its own credentials. `why`: the kubelet's
    metric result (`policy`: the policy does not verify this image, `record`: the record lets
    the pod use it, `verify`: it does not). `learn`: a Secret of the pod to add to the record."""

    pull: bool
    why: Outcome
    learn: PullSecret | None = None


ALLOWED_BY_POLICY = Decision(False, "policy")
ALLOWED_BY_RECORD = Decision(False, "record")
MUST_PULL = Decision(True, "verify")


# --- the policy --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verification:
    """The node's policy and, for NeverVerifyAllowlistedImages, its allowlist (checked by
    `check_settings`)."""

    policy: Policy = DEFAULT_POLICY
    allowlist: tuple[str, ...] = ()

    def required(self, image: str, pulled_by_kubelet: bool) -> bool:
        """Whether a present `image` is verified at all (step 1)."""
        if self.policy == "NeverVerify":
            return False
        if self.policy == "NeverVerifyPreloadedImages":
            return pulled_by_kubelet
        if self.policy == "NeverVerifyAllowlistedImages":
            return not _allowlisted(image, self.allowlist)
        return True


def _allowlisted(image: str, allowlist: Sequence[str]) -> bool:
    # As the kubelet: an image that does not parse is matched as written.
    name = imagerefs.without_tag_or_digest(image) or image
    for pattern in allowlist:
        if pattern.endswith("/*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


def allowlist_problem(pattern: str) -> str | None:
    """Why `pattern` is not an allowlist entry (the kubelet's words), or None."""
    if pattern != pattern.strip():
        return f"leading/trailing spaces are not allowed: {pattern}"
    wildcard = pattern.endswith("/*")
    trimmed = pattern[:-1] if wildcard else pattern
    if not trimmed:
        return f"the supplied pattern is too short: {pattern}"
    if "*" in trimmed:
        return ("not a valid wildcard pattern, only patterns ending with '/*' are allowed: "
                f"{pattern}")
    if wildcard:
        return "at least registry hostname is required" if len(trimmed) == 1 else None
    name = imagerefs.without_tag_or_digest(trimmed)
    if name is None:
        return "failed to parse as an image name: invalid reference format"
    if name != trimmed:
        return f"neither tag nor digest is accepted in an image reference: {pattern}"
    return None


def check_settings(policy: str, allowlist: Sequence[str]) -> Verification:
    """The kubelet's validation of imagePullCredentialsVerificationPolicy and
    preloadedImagesVerificationAllowlist; raises ValueError with its words."""
    if policy not in POLICIES:
        valid = ", ".join(f'"{p}"' for p in POLICIES[:-1])
        raise ValueError(f'invalid configuration: option "{policy}" specified for '
                         f'imagePullCredentialsVerificationPolicy. Valid options are {valid} or '
                         f'"{POLICIES[-1]}"')
    if allowlist and policy != "NeverVerifyAllowlistedImages":
        raise ValueError("invalid configuration: can't set `preloadedImagesVerificationAllowlist`"
                         " if `imagePullCredentialsVerificationPolicy` is not "
                         '"NeverVerifyAllowlistedImages"')
    for pattern in allowlist:
        problem = allowlist_problem(pattern)
        if problem is not None:
            raise ValueError("invalid configuration: invalid image pattern in "
                             f"`preloadedImagesVerificationAllowlist`: {problem}")
    return Verification(policy, tuple(allowlist))


# --- the decision ------------------------------------------------------------------------------


def decide_from_record(
    image: str, record: PulledRecord | None, *, pulled_by_kubelet: bool,
    verification: Verification,
) -> Decision | PullCredentials:
    """Steps 1-3: a decision, or the recorded Secrets the pod's must be matched against."""
    if not verification.required(image, pulled_by_kubelet):
        return ALLOWED_BY_POLICY
    name = imagerefs.without_tag_or_digest(image)
    cached = record.credentials.get(name) if record is not None and name else None
    if cached is None:
        return MUST_PULL
    if cached.node_accessible:
        return ALLOWED_BY_RECORD
    return cached if cached.secrets else MUST_PULL


def decide_from_secrets(cached: PullCredentials, pod_secrets: Iterable[PullSecret]) -> Decision:
    """Steps 4-5: whether one of the pod's pull Secrets is one the record names."""
    room = len(cached.secrets) < LEARN_LIMIT
    for mine in pod_secrets:
        for known in cached.secrets:
            # An empty hash (the kubelet failed to compute one) matches nothing.
            same_hash = (bool(known.credential_hash)
                         and mine.credential_hash == known.credential_hash)
            same_secret = mine.coordinates == known.coordinates
            if same_hash:
                learn = mine if room and not same_secret else None
                return Decision(False, "record", learn)
            # As the kubelet: the same Secret with new content counts only while the record
            # may learn it.
            if same_secret and room:
                return Decision(False, "record", mine)
    return MUST_PULL


def must_pull(
    image: str, record: PulledRecord | None, *, pulled_by_kubelet: bool,
    verification: Verification, pod_secrets: Iterable[PullSecret],
) -> Decision:
    """The whole decision for a present image (the module docstring's steps)."""
    found = decide_from_record(image, record, pulled_by_kubelet=pulled_by_kubelet,
                               verification=verification)
    return found if isinstance(found, Decision) else decide_from_secrets(found, pod_secrets)


# --- updating records --------------------------------------------------------------------------


def merged(
    record: PulledRecord | None, image_ref: str, image: str, new: PullCredentials | None,
    now: datetime,
) -> PulledRecord | None:
    """The record after `image` was pulled (or found, with `new` None: credentials unknown)
    as `image_ref`; None when nothing changed. An image that does not parse is not recorded."""
    name = imagerefs.without_tag_or_digest(image)
    if name is None:
        return None
    if record is None:
        return PulledRecord(image_ref, now, {} if new is None else {name: new})
    if new is None or new.empty:
        return None
    old = record.credentials.get(name)
    if old is not None:
        combined = _combined(old, new)
        if combined is None:
            return None
        new = combined
    return replace(record, updated=now, credentials={**record.credentials, name: new})


def _combined(old: PullCredentials, new: PullCredentials) -> PullCredentials | None:
    """`old` with `new` added; None if that changes nothing."""
    if old.node_accessible:
        return None
    if new.node_accessible:
        return NODE_ACCESSIBLE
    by_coordinates = {s.coordinates: s for s in old.secrets}
    changed = [s for s in new.secrets
               if s.coordinates not in by_coordinates
               or by_coordinates[s.coordinates].credential_hash != s.credential_hash]
    if not changed:
        return None
    by_coordinates |= {s.coordinates: s for s in changed}  # the new hash wins
    return PullCredentials(secrets=tuple(sorted(by_coordinates.values())))


# --- files ---------------------------------------------------------------------------------------


def file_name(key: str) -> str:
    """The file of an intent (key: the image) or a record (key: the image ID), as the
    kubelet names them."""
    return "sha256-" + hashlib.sha256(key.encode()).hexdigest()


def encode_intent(image: str) -> bytes:
    return _dumps({"kind": "ImagePullIntent", "apiVersion": API_VERSION, "image": image})


def decode_intent(data: bytes) -> str:
    obj = _loads(data, "ImagePullIntent")
    return _text(obj, "image")


def encode_record(record: PulledRecord) -> bytes:
    mapping = {name: _credentials_json(c) for name, c in sorted(record.credentials.items())}
    obj: dict[str, Any] = {"kind": "ImagePulledRecord", "apiVersion": API_VERSION,
                           "lastUpdatedTime": st.format_time(record.updated),
                           "imageRef": record.image_ref}
    if mapping:
        obj["credentialMapping"] = mapping
    return _dumps(obj)


def decode_record(data: bytes) -> PulledRecord:
    obj = _loads(data, "ImagePulledRecord")
    updated = st.parse_time(_text(obj, "lastUpdatedTime"))
    if updated is None:
        raise ValueError("lastUpdatedTime is missing")
    mapping = obj.get("credentialMapping") or {}
    if not isinstance(mapping, Mapping):
        raise ValueError("credentialMapping is not an object")
    return PulledRecord(_text(obj, "imageRef"), updated,
                        {str(k): _credentials_from(v) for k, v in mapping.items()})


def _credentials_json(creds: PullCredentials) -> dict[str, Any]:
    if creds.node_accessible:
        return {"nodePodsAccessible": True}
    return {"kubernetesSecrets": [
        {"uid": s.uid, "namespace": s.namespace, "name": s.name,
         "credentialHash": s.credential_hash} for s in creds.secrets]}


def _credentials_from(value: Any) -> PullCredentials:
    if not isinstance(value, Mapping):
        raise ValueError("a credentialMapping entry is not an object")
    secrets = value.get("kubernetesSecrets") or []
    if not isinstance(secrets, list) or not all(isinstance(s, Mapping) for s in secrets):
        raise ValueError("kubernetesSecrets is not a list of objects")
    return PullCredentials(
        node_accessible=value.get("nodePodsAccessible") is True,
        secrets=tuple(PullSecret(_text(s, "namespace"), _text(s, "name"), _text(s, "uid"),
                                 _text(s, "credentialHash")) for s in secrets))


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(data: bytes, kind: str) -> Mapping[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(obj, Mapping) or obj.get("kind") != kind:
        raise ValueError(f"not an {kind}")
    if obj.get("apiVersion") not in _READ_VERSIONS:
        raise ValueError(f"unknown apiVersion {obj.get('apiVersion')!r}")
    return obj


def _text(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    return value


def pulled_with(secret: PullSecret | None) -> PullCredentials:
    """What a successful pull records: the Secret whose credential worked, else (anonymous,
    or the node's own credentials) node-accessible."""
    return NODE_ACCESSIBLE if secret is None else PullCredentials(secrets=(secret,))
