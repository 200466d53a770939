"""Registry credentials (model.core.credentials): docker configs, the keyring's matching and
order as the kubelet's credentialprovider has them, pull secrets, and `imagePullSecrets` in the
spec."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from nodelet.model.core import credentials as cr
from nodelet.model.core import pods
from nodelet.model.parsing import manifests


def b64(text: str, *, pad: bool = True) -> str:
    encoded = base64.b64encode(text.encode()).decode()
    return encoded if pad else encoded.rstrip("=")


def cred(name: str, source: str = "test") -> cr.Credential:
    return cr.Credential(name, f"{name}-password", source)


def ring(*locations: str, source: str = "test") -> cr.Keyring:
    """A keyring whose credential for each location is named after it."""
    return cr.keyring((loc, cred(loc, source)) for loc in locations)


def names(found: tuple[cr.Credential, ...]) -> list[str]:
    return [c.username for c in found]


# ---------------------------------------------------------------------------------------------
# Keys, repositories and matching


@pytest.mark.parametrize(("location", "key"), [
    ("https://index.docker.io/v1/", "index.docker.io"),
    ("http://registry.example.com:5000", "registry.example.com:5000"),
    ("registry.example.com", "registry.example.com"),
    ("https://registry.example.com/", "registry.example.com"),
    ("registry.example.com/v2/team", "registry.example.com/team"),
    ("registry.example.com/v1/", "registry.example.com"),
    ("registry.example.com/team", "registry.example.com/team"),
    ("*.example.com", "*.example.com"),
    ("127.0.0.1:5000", "127.0.0.1:5000"),
])
def test_registry_key_drops_scheme_and_api_version(location: str, key: str) -> None:
    assert cr.registry_key(location) == key


@pytest.mark.parametrize(("image", "repo"), [
    ("busybox", "docker.io/library/busybox"),
    ("busybox:1.36", "docker.io/library/busybox"),
    ("user/app", "docker.io/user/app"),
    ("docker.io/busybox", "docker.io/library/busybox"),
    ("index.docker.io/user/app:1", "docker.io/user/app"),
    ("localhost/nodelet/busybox:latest", "localhost/nodelet/busybox"),
    ("127.0.0.1:5000/nodelet/busybox:latest", "127.0.0.1:5000/nodelet/busybox"),
    ("127.0.0.1:5000/nodelet/busybox", "127.0.0.1:5000/nodelet/busybox"),
    ("quay.io/team/app@sha256:0123", "quay.io/team/app"),
    ("localhost:5000/app:v1@sha256:0123", "localhost:5000/app"),
])
def test_repository_normalises_like_the_kubelet(image: str, repo: str) -> None:
    assert cr.repository(image) == repo


@pytest.mark.parametrize(("key", "repo", "expected"), [
    ("registry.example.com", "registry.example.com/app", True),
    ("registry.example.com", "registry.example.com:5000/app", False),
    ("registry.example.com:5000", "registry.example.com:5000/app", True),
    ("registry.example.com:5000", "registry.example.com/app", False),
    ("registry.example.com:5000", "registry.example.com:5001/app", False),
    ("registry.example.com/team", "registry.example.com/team/app", True),
    ("registry.example.com/team", "registry.example.com/other/app", False),
    # The path is a plain prefix, as in the kubelet.
    ("registry.example.com/team", "registry.example.com/teamwork/app", True),
    ("*.example.com", "eu.example.com/app", True),
    ("*.example.com", "example.com/app", False),
    ("*.example.com", "a.eu.example.com/app", False),
    ("*.*.example.com", "a.eu.example.com/app", True),
    ("eu.*.com", "eu.example.com/app", True),
    ("example.com", "example.org/app", False),
    ("example.com", "sub.example.com/app", False),
    ("127.0.0.1:5000", "127.0.0.1:5000/nodelet/busybox", True),
    ("127.0.0.1", "127.0.0.1:5000/nodelet/busybox", False),
    ("[::1]:5000", "[::1]:5000/app", True),
    ("docker.io", "docker.io/library/busybox", True),
    ("index.docker.io", "docker.io/library/busybox", False),
])
def test_key_matches_host_port_path_and_globs(key: str, repo: str, expected: bool) -> None:
    assert cr.matches(key, repo) is expected


@pytest.mark.parametrize(("repo", "expected"), [
    ("docker.io/library/busybox", True),
    ("index.docker.io/user/app", True),
    ("library/busybox", True),
    ("busybox", True),
    ("quay.io/app", False),
    ("127.0.0.1:5000/app", False),
    # The kubelet's rule: a first part without "." or ":" is a Docker Hub user.
    ("localhost/app", True),
    ("/app", False),
])
def test_default_registry_match(repo: str, expected: bool) -> None:
    assert cr.is_default_registry(repo) is expected


# ---------------------------------------------------------------------------------------------
# Keyring lookups


LOOKUPS = [
    # (keys in the keyring, image, usernames found in order)
    (("quay.io", "quay.io/team", "*.quay.io"), "quay.io/team/app:1", ["quay.io/team", "quay.io"]),
    (("quay.io", "quay.io/team", "*.quay.io"), "quay.io/other/app", ["quay.io"]),
    (("quay.io", "quay.io/team", "*.quay.io"), "eu.quay.io/app", ["*.quay.io"]),
    (("quay.io",), "gcr.io/app", []),
    (("https://index.docker.io/v1/",), "busybox", ["https://index.docker.io/v1/"]),
    (("https://index.docker.io/v1/",), "docker.io/user/app", ["https://index.docker.io/v1/"]),
    (("https://index.docker.io/v1/",), "quay.io/app", []),
    # Docker Hub credentials are the fallback only: a matching key wins.
    (("https://index.docker.io/v1/", "docker.io/team"), "team/app",
     ["docker.io/team"]),
    (("http://127.0.0.1:5000/",), "127.0.0.1:5000/nodelet/busybox:latest",
     ["http://127.0.0.1:5000/"]),
    (("127.0.0.1:5001",), "127.0.0.1:5000/nodelet/busybox:latest", []),
]


@pytest.mark.parametrize(("keys", "image", "expected"), LOOKUPS)
def test_lookup_returns_matches_most_specific_first(
    keys: tuple[str, ...], image: str, expected: list[str]
) -> None:
    assert names(cr.credentials_for(image, [ring(*keys)])) == expected


def test_same_key_in_two_configs_keeps_both_in_order() -> None:
    keyring = cr.keyring([("quay.io", cred("first")), ("https://quay.io/v1/", cred("second"))])
    assert names(keyring.lookup("quay.io/app")) == ["first", "second"]


def test_pod_credentials_come_before_the_nodes() -> None:
    pod = ring("quay.io", source="pod")
    node = cr.keyring([("quay.io/team", cred("node", "node")), ("quay.io", cred("node2", "n"))])
    found = cr.credentials_for("quay.io/team/app", [pod, node])
    assert names(found) == ["quay.io", "node", "node2"]


def test_credential_becomes_a_cri_auth_config() -> None:
    auth = cred("alice").auth
    assert (auth.username, auth.password, auth.server_address) == ("alice", "alice-password", "")


# ---------------------------------------------------------------------------------------------
# Docker configs


def config(auths: dict[str, Any], *, wrapped: bool = True) -> bytes:
    return json.dumps({"auths": auths} if wrapped else auths).encode()


def parsed(data: bytes, *, wrapped: bool = True) -> list[tuple[str, str, str]]:
    entries = cr.parse_config(data, wrapped=wrapped, source="src")
    return [(loc, c.username, c.password) for loc, c in entries]


def test_auth_field_is_base64_user_colon_password_and_wins() -> None:
    data = config({
        "a.io": {"auth": b64("alice:s3cr:et")},
        "b.io": {"auth": b64("bob:pw", pad=False)},
        "c.io": {"username": "carol", "password": "pw"},
        "d.io": {"auth": b64("dave:right"), "username": "ignored", "password": "ignored"},
        "e.io": {"Username": "erin", "Password": "pw", "email": "e@example.com"},
    })
    assert parsed(data) == [
        ("a.io", "alice", "s3cr:et"), ("b.io", "bob", "pw"), ("c.io", "carol", "pw"),
        ("d.io", "dave", "right"), ("e.io", "erin", "pw"),
    ]


def test_dockercfg_is_the_bare_map() -> None:
    assert parsed(config({"a.io": {"auth": b64("u:p")}}, wrapped=False), wrapped=False) == [
        ("a.io", "u", "p")]


@pytest.mark.parametrize("data", [b"{}", b'{"auths": null}', b"null", b'{"credsStore": "x"}'])
def test_config_without_auths_is_empty(data: bytes) -> None:
    assert parsed(data) == []


@pytest.mark.parametrize(("data", "words"), [
    (b"{not json", "Expecting property name"),
    (b"[]", "expected a JSON object"),
    (b'{"auths": []}', "expected a JSON object"),
    (b'{"auths": {"a.io": "x"}}', 'the entry for "a.io" is not an object'),
    (b'{"auths": {"a.io": {"username": 1}}}', "username that is not a string"),
    (b'{"auths": {"a.io": {"auth": "!!!"}}}', "not valid base64"),
    (config({"a.io": {"auth": b64("no-colon")}}), "base64 of username:password"),
])
def test_broken_config_names_its_source_and_what_to_write(data: bytes, words: str) -> None:
    with pytest.raises(cr.CredentialsError) as caught:
        cr.parse_config(data, wrapped=True, source='image pull secret "default/reg"')
    message = caught.value.message
    assert message.startswith('image pull secret "default/reg" is not a valid docker config ('), \
        message
    assert words in message
    assert message.endswith('"auth" (base64 of username:password) or "username" and "password"')


# ---------------------------------------------------------------------------------------------
# Pull secrets


def secret(name: str, type_: str, data: dict[str, bytes]) -> manifests.Secret:
    return manifests.Secret(name, "default", type_, data)


def test_secrets_keyring_reads_both_secret_types_in_order() -> None:
    secrets = [
        secret("json", cr.SECRET_TYPE_DOCKERCONFIGJSON,
               {cr.KEY_DOCKERCONFIGJSON: config({"quay.io": {"auth": b64("j:p")}})}),
        secret("cfg", cr.SECRET_TYPE_DOCKERCFG,
               {cr.KEY_DOCKERCFG: config({"quay.io": {"auth": b64("c:p")}}, wrapped=False)}),
    ]
    keyring, unusable = cr.secrets_keyring(secrets)
    assert unusable == ()
    found = keyring.lookup("quay.io/app")
    assert names(found) == ["j", "c"]
    assert found[0].source == 'image pull secret "default/json"'


@pytest.mark.parametrize(("type_", "data"), [
    ("Opaque", {cr.KEY_DOCKERCONFIGJSON: b"{}"}),
    (cr.SECRET_TYPE_DOCKERCONFIGJSON, {cr.KEY_DOCKERCFG: b"{}"}),
    (cr.SECRET_TYPE_DOCKERCONFIGJSON, {cr.KEY_DOCKERCONFIGJSON: b""}),
])
def test_secret_without_a_docker_config_is_skipped_with_a_message(
    type_: str, data: dict[str, bytes]
) -> None:
    keyring, unusable = cr.secrets_keyring([secret("other", type_, data)])
    assert keyring == cr.Keyring()
    assert unusable == (
        f'image pull secret "default/other" of type "{type_}" holds no registry credentials '
        "and is ignored: use type kubernetes.io/dockerconfigjson with key .dockerconfigjson or "
        "type kubernetes.io/dockercfg with key .dockercfg",)


def test_secret_with_a_broken_config_is_an_error() -> None:
    broken = secret("broken", cr.SECRET_TYPE_DOCKERCONFIGJSON, {cr.KEY_DOCKERCONFIGJSON: b"{"})
    with pytest.raises(cr.CredentialsError, match=r'^image pull secret "default/broken" is not'):
        cr.secrets_keyring([broken])


def test_pull_secrets_splits_found_and_missing_and_names_them() -> None:
    found = secret("found", cr.SECRET_TYPE_DOCKERCONFIGJSON, {})
    objects: dict[tuple[str, str, str], Any] = {
        ("Secret", "default", "found"): found,
        ("ConfigMap", "default", "gone"): manifests.ConfigMap("gone", "default"),
    }
    spec = pods.PodSpec(containers=(), image_pull_secrets=("gone", "found", "other"))
    pod = pods.Pod(uid=pods.PodUID("u"), name="p", namespace="default", spec=spec)
    secrets, missing = cr.pull_secrets(pod, lambda kind, ns, name: objects.get((kind, ns, name)))
    assert (secrets, missing) == ((found,), ("gone", "other"))
    assert cr.missing_message(missing) == (
        "Unable to retrieve some image pull secrets (gone, other); attempting to pull the image "
        "may not succeed.")
    assert cr.referenced_secrets(pod) == {
        ("Secret", "default", "gone"), ("Secret", "default", "found"),
        ("Secret", "default", "other")}


# ---------------------------------------------------------------------------------------------
# imagePullSecrets in the pod spec


def pod_with(pull_secrets: Any, *, strict: bool = True) -> pods.Pod:
    obj = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}],
                 "imagePullSecrets": pull_secrets},
    }
    return manifests.pod_from_object(obj, node_name="n", strict=strict)


def test_image_pull_secrets_are_parsed_in_order_each_once() -> None:
    pod = pod_with([{"name": "b"}, {"name": "a"}, {"name": "b"}])
    assert pod.spec.image_pull_secrets == ("b", "a")


def test_api_pods_skip_empty_names_as_the_kubelet_does() -> None:
    pod = pod_with([{"name": ""}, {}, {"name": "a"}], strict=False)
    assert pod.spec.image_pull_secrets == ("a",)


@pytest.mark.parametrize(("value", "error", "path"), [
    ([{}], manifests.InvalidValueError, "spec.imagePullSecrets[0].name"),
    ([{"name": "a"}, {"name": ""}], manifests.InvalidValueError, "spec.imagePullSecrets[1].name"),
    ([{"name": "a", "namespace": "x"}], manifests.UnknownFieldError,
     "spec.imagePullSecrets[0].namespace"),
    (["a"], manifests.FieldTypeError, "spec.imagePullSecrets[0]"),
    ({"name": "a"}, manifests.FieldTypeError, "spec.imagePullSecrets"),
    ([{"name": 1}], manifests.FieldTypeError, "spec.imagePullSecrets[0].name"),
])
def test_static_pods_must_name_each_pull_secret(
    value: Any, error: type[manifests.ManifestError], path: str
) -> None:
    with pytest.raises(error) as caught:
        pod_with(value)
    assert caught.value.path == path, caught.value
