"""Who may use an image already on the node (model.core.pullrecords): the kubelet's
KubeletEnsureSecretPulledImages decision, its record merging, its policy and allowlist checks,
and the record files' JSON — tables, as the kubelet's image_pull_manager_test.go has them."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest

from nodelet.model.core import configs
from nodelet.model.core import credentials as cr
from nodelet.model.core import pullrecords as pr

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
T1 = datetime(2025, 1, 2, 4, 0, 0, tzinfo=UTC)
IMAGE = "registry.test:5000/team/app:v1"
NAME = "registry.test:5000/team/app"
REF = "sha256:" + "a" * 64

A = pr.PullSecret("default", "regcred", "uid-a", "hash-a")
A_ROTATED = pr.PullSecret("default", "regcred", "uid-a", "hash-a2")
A_RECREATED = pr.PullSecret("default", "regcred", "uid-a-new", "hash-a3")
B_SAME_CREDENTIAL = pr.PullSecret("other", "copy", "uid-b", "hash-a")
C = pr.PullSecret("default", "another", "uid-c", "hash-c")
NO_HASH = pr.PullSecret("default", "regcred", "uid-x", "")


def record(creds: pr.PullCredentials | None, name: str = NAME) -> pr.PulledRecord:
    return pr.PulledRecord(REF, T0, {} if creds is None else {name: creds})


def secrets(*found: pr.PullSecret) -> pr.PullCredentials:
    return pr.PullCredentials(secrets=found)


DEFAULT = pr.Verification()


# --- step 1: the policy ---------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "allowlist", "image", "pulled_by_kubelet", "verify"), [
    ("NeverVerify", (), IMAGE, True, False),
    ("NeverVerify", (), IMAGE, False, False),
    ("NeverVerifyPreloadedImages", (), IMAGE, True, True),
    ("NeverVerifyPreloadedImages", (), IMAGE, False, False),  # preloaded
    ("AlwaysVerify", (), IMAGE, False, True),
    ("AlwaysVerify", (), IMAGE, True, True),
    # The allowlist: names without tag or digest, or prefixes ending in /*; whether the
    # kubelet pulled the image does not matter.
    ("NeverVerifyAllowlistedImages", (NAME,), IMAGE, True, False),
    ("NeverVerifyAllowlistedImages", (NAME,), NAME + "@sha256:" + "b" * 64, True, False),
    ("NeverVerifyAllowlistedImages", ("registry.test:5000/*",), IMAGE, True, False),
    ("NeverVerifyAllowlistedImages", ("registry.test:5000/team/*",), IMAGE, False, False),
    ("NeverVerifyAllowlistedImages", ("registry.test:5000/other/*",), IMAGE, False, True),
    ("NeverVerifyAllowlistedImages", ("registry.test:5000/team",), IMAGE, True, True),
    ("NeverVerifyAllowlistedImages", (), IMAGE, False, True),
    # Names are matched as written, not normalised: busybox is not docker.io/library/busybox.
    ("NeverVerifyAllowlistedImages", ("docker.io/library/busybox",), "busybox:1", True, True),
])
def test_the_policy_says_whether_a_present_image_is_verified(
    policy: pr.Policy, allowlist: tuple[str, ...], image: str, pulled_by_kubelet: bool,
    verify: bool,
) -> None:
    assert pr.Verification(policy, allowlist).required(image, pulled_by_kubelet) is verify


# --- the whole decision ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "stored", "pulled_by_kubelet", "mine", "expected"), [
    ("preloaded: no record, no intent", None, False, (), pr.ALLOWED_BY_POLICY),
    ("an intent but no record (pulled before a crash)", None, True, (A,), pr.MUST_PULL),
    ("a record without credentials (resolved intent)", record(None), True, (A,), pr.MUST_PULL),
    ("a record of another name of the same image", record(secrets(A), "other/app"), True,
     (A,), pr.MUST_PULL),
    ("pulled anonymously or with the node's config", record(pr.NODE_ACCESSIBLE), True, (),
     pr.ALLOWED_BY_RECORD),
    ("a record with neither", record(pr.PullCredentials()), True, (A,), pr.MUST_PULL),
    ("pulled with a Secret, the pod has none", record(secrets(A)), True, (), pr.MUST_PULL),
    ("the pod has another credential", record(secrets(A)), True, (C,), pr.MUST_PULL),
    ("the same Secret", record(secrets(A)), True, (A,), pr.ALLOWED_BY_RECORD),
    ("the same Secret, rotated: learnt", record(secrets(A)), True, (A_ROTATED,),
     pr.Decision(False, "record", A_ROTATED)),
    ("the same credential in another Secret: learnt", record(secrets(A)), True,
     (C, B_SAME_CREDENTIAL), pr.Decision(False, "record", B_SAME_CREDENTIAL)),
    ("a Secret of that name recreated with another credential", record(secrets(A)), True,
     (A_RECREATED,), pr.MUST_PULL),
    ("an empty recorded hash matches no empty hash", record(secrets(NO_HASH)), True,
     (pr.PullSecret("x", "y", "z", ""),), pr.MUST_PULL),
])
def test_must_pull_under_the_default_policy(
    name: str, stored: pr.PulledRecord | None, pulled_by_kubelet: bool,
    mine: tuple[pr.PullSecret, ...], expected: pr.Decision,
) -> None:
    got = pr.must_pull(IMAGE, stored, pulled_by_kubelet=pulled_by_kubelet,
                       verification=DEFAULT, pod_secrets=mine)
    assert got == expected, name


def test_the_pods_secrets_are_not_asked_for_unless_the_record_names_secrets() -> None:
    for stored in (None, record(None), record(pr.NODE_ACCESSIBLE)):
        found = pr.decide_from_record(IMAGE, stored, pulled_by_kubelet=True,
                                      verification=DEFAULT)
        assert isinstance(found, pr.Decision)
    assert pr.decide_from_record(IMAGE, record(secrets(A)), pulled_by_kubelet=True,
                                 verification=DEFAULT) == secrets(A)


def test_a_full_record_stops_learning_and_then_a_rotated_secret_must_pull() -> None:
    """The kubelet's writeRecordWhileMatchingLimit (100): a match by hash still counts, but
    learns nothing; a match by Secret alone counts only while the record may learn."""
    many = secrets(A, *(pr.PullSecret("ns", f"s{i:03}", f"u{i}", f"h{i}") for i in range(99)))
    assert len(many.secrets) == pr.LEARN_LIMIT
    assert pr.decide_from_secrets(many, [B_SAME_CREDENTIAL]) == pr.ALLOWED_BY_RECORD
    assert pr.decide_from_secrets(many, [A_ROTATED]) == pr.MUST_PULL


# --- records --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "before", "image", "new", "after"), [
    ("a first pull", None, IMAGE, secrets(A), record(secrets(A))),
    ("found present after a crash: no credentials", None, IMAGE, None, record(None)),
    ("nothing new", record(secrets(A)), IMAGE, None, None),
    ("an empty credential adds nothing", record(secrets(A)), IMAGE, pr.PullCredentials(), None),
    ("the same Secret again", record(secrets(A)), IMAGE, secrets(A), None),
    ("another Secret: sorted in", record(secrets(A)), IMAGE, secrets(C),
     pr.PulledRecord(REF, T1, {NAME: secrets(C, A)})),
    ("the same Secret, rotated: the new hash wins", record(secrets(A)), IMAGE,
     secrets(A_ROTATED), pr.PulledRecord(REF, T1, {NAME: secrets(A_ROTATED)})),
    ("an anonymous pull makes it node-wide", record(secrets(A)), IMAGE, pr.NODE_ACCESSIBLE,
     pr.PulledRecord(REF, T1, {NAME: pr.NODE_ACCESSIBLE})),
    ("node-wide stays node-wide", record(pr.NODE_ACCESSIBLE), IMAGE, secrets(A), None),
    ("another name of the same image", record(secrets(A)), "mirror.test/app:v1", secrets(C),
     pr.PulledRecord(REF, T1, {NAME: secrets(A), "mirror.test/app": secrets(C)})),
    ("a tag and a digest are dropped", None, NAME + ":v2@sha256:" + "c" * 64, secrets(A),
     record(secrets(A))),
    ("an image that does not parse is not recorded", None, "UPPER/Case", secrets(A), None),
])
def test_merged_records_what_pulled_each_name(
    name: str, before: pr.PulledRecord | None, image: str, new: pr.PullCredentials | None,
    after: pr.PulledRecord | None,
) -> None:
    now = T0 if before is None else T1
    assert pr.merged(before, REF, image, new, now) == after, name


def test_records_and_intents_round_trip_in_the_kubelets_json() -> None:
    stored = pr.PulledRecord(REF, T0, {NAME: secrets(A), "docker.io/x": pr.NODE_ACCESSIBLE})
    data = pr.encode_record(stored)
    assert data.startswith(b'{"kind":"ImagePulledRecord","apiVersion":'
                           b'"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":'
                           b'"2025-01-02T03:04:05Z"')
    assert pr.decode_record(data) == stored
    assert pr.decode_intent(pr.encode_intent(IMAGE)) == IMAGE
    # As the kubelet writes them (v1alpha1 is read too).
    kubelets = (b'{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1alpha1",'
                b'"lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"ref","credentialMapping":'
                b'{"docker.io/testing/test":{"kubernetesSecrets":[{"uid":"u","namespace":"default"'
                b',"name":"pull-secret","credentialHash":"h"}]}}}')
    assert pr.decode_record(kubelets).credentials == {
        "docker.io/testing/test": secrets(pr.PullSecret("default", "pull-secret", "u", "h"))}


@pytest.mark.parametrize("data", [
    b"", b"{", b"[]", b'{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1"}',
    b'{"kind":"ImagePulledRecord","apiVersion":"v9","imageRef":"r"}',
    b'{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","imageRef":"r"}',
    b'{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","imageRef":"r",'
    b'"lastUpdatedTime":"2024-10-21T12:26:40Z","credentialMapping":{"x":{"kubernetesSecrets":1}}}',
])
def test_a_file_that_is_not_a_record_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        pr.decode_record(data)


def test_file_names_are_the_kubelets() -> None:
    assert pr.file_name(REF) == "sha256-" + hashlib.sha256(REF.encode()).hexdigest()


# --- credentials ----------------------------------------------------------------------------


def test_a_credentials_hash_is_the_kubelets() -> None:
    """SHA-256 of Go's JSON of its AuthConfig: empty fields left out, <>& escaped."""
    assert cr.Credential("u", "p").hash == hashlib.sha256(
        b'{"username":"u","password":"p"}').hexdigest()
    assert cr.Credential("u", "").hash == hashlib.sha256(b'{"username":"u"}').hexdigest()
    assert cr.Credential("u", "a<b&c").hash == hashlib.sha256(
        b'{"username":"u","password":"a\\u003cb\\u0026c"}').hexdigest()


def test_a_pull_secrets_credentials_name_the_secret() -> None:
    data = b'{"auths": {"registry.test:5000": {"auth": "dTpw"}}}'
    secret = configs.Secret("regcred", "team", cr.SECRET_TYPE_DOCKERCONFIGJSON,
                            {cr.KEY_DOCKERCONFIGJSON: data}, uid="uid-1")
    ring, _ = cr.secrets_keyring([secret])
    [found] = cr.credentials_for(IMAGE, [ring])
    assert (found.username, found.secret) == ("u", ("team", "regcred", "uid-1"))
    node = cr.keyring(cr.parse_config(data, wrapped=True, source="node"))
    assert cr.credentials_for(IMAGE, [node])[0].secret is None


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "problem"), [
    ("registry.test/app", None),
    ("registry.test/*", None),
    ("registry.test/team/*", None),
    (" registry.test/app", "leading/trailing spaces are not allowed:  registry.test/app"),
    ("", "the supplied pattern is too short: "),
    ("*", "not a valid wildcard pattern, only patterns ending with '/*' are allowed: *"),
    ("/*", "at least registry hostname is required"),
    ("registry.test/*/app", "not a valid wildcard pattern, only patterns ending with '/*' are "
                            "allowed: registry.test/*/app"),
    ("registry.test/app:v1", "neither tag nor digest is accepted in an image reference: "
                             "registry.test/app:v1"),
    ("registry.test/App", "failed to parse as an image name: invalid reference format"),
])
def test_allowlist_patterns_are_checked_as_the_kubelet_does(
    pattern: str, problem: str | None,
) -> None:
    assert pr.allowlist_problem(pattern) == problem


def test_check_settings_refuses_what_the_kubelet_refuses() -> None:
    assert pr.check_settings("NeverVerifyPreloadedImages", ()) == pr.Verification()
    assert pr.check_settings("NeverVerifyAllowlistedImages", ("r.test/*",)) == \
        pr.Verification("NeverVerifyAllowlistedImages", ("r.test/*",))
    with pytest.raises(ValueError) as caught:
        pr.check_settings("Sometimes", ())
    assert str(caught.value) == (
        'invalid configuration: option "Sometimes" specified for '
        "imagePullCredentialsVerificationPolicy. Valid options are "
        '"NeverVerify", "NeverVerifyPreloadedImages", '
        '"NeverVerifyAllowlistedImages" or "AlwaysVerify"')
    with pytest.raises(ValueError, match="can't set `preloadedImagesVerificationAllowlist`"):
        pr.check_settings("AlwaysVerify", ("r.test/*",))
    with pytest.raises(ValueError, match="invalid image pattern in "
                       "`preloadedImagesVerificationAllowlist`: the supplied pattern is too"):
        pr.check_settings("NeverVerifyAllowlistedImages", ("",))
