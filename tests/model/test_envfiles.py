"""Env files (`fileKeyRef`) as values: the kubelet v1.37's env file parser (lines as its
scanner cuts them, `NAME='value'`, comments, blanks, multi-line values, the first assignment
wins, errors only before the key's line), what a found, empty or missing key gives with and
without `optional`, the container's errors, and the manifest checks of fileKeyRef."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nodelet.model.core import downward, envfiles, envvars, pods
from nodelet.model.parsing import manifests

# -- lines ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("chunk", "line"), [
    (b"A='x'\n", "A='x'"),
    (b"A='x'\r\n", "A='x'"),  # ScanLines drops one CR before the newline
    (b"A='x'\r\r\n", "A='x'\r"),
    (b"A='x'", "A='x'"),  # the last line, without a newline
    (b"\n", ""),
    (b"A='\xff'\n", "A='\ufffd'"),  # CRI strings are UTF-8
    (b"x" * (envfiles.READ_LIMIT - 1) + b"\n", "x" * (envfiles.READ_LIMIT - 1)),
    (b"x" * (envfiles.READ_LIMIT - 1), "x" * (envfiles.READ_LIMIT - 1)),
])
def test_line_of(chunk: bytes, line: str) -> None:
    assert envfiles.line_of(chunk) == line


def test_a_line_that_fills_the_scanners_buffer_is_too_long() -> None:
    # readline(READ_LIMIT) returns READ_LIMIT bytes without a newline: the kubelet's scanner
    # needs the line and its newline in 64 KiB.
    with pytest.raises(envfiles.EnvFileError, match="token too long"):
        envfiles.line_of(b"x" * envfiles.READ_LIMIT)


# -- the parser ----------------------------------------------------------------------------------


def find(text: str, key: str) -> str:
    return envfiles.find(text.split("\n"), key)


@pytest.mark.parametrize(("text", "key", "value"), [
    ("A='one'\nB='two'", "B", "two"),
    ("A='one'", "B", ""),  # not there
    ("# comment\n\n   \n\t# indented comment\nA='x'", "A", "x"),
    ("  \tA='indented'", "A", "indented"),
    ("A='x' # trailing comment", "A", "x"),
    ("A='x'   ", "A", "x"),
    ("A='x'#tight comment", "A", "x"),
    ("A='$HOME \\n \"q\" $(B)'", "A", '$HOME \\n "q" $(B)'),  # kept as written
    ("A=''", "A", ""),
    ("A='a=b=c'", "A", "a=b=c"),
    ("A='first'\nA='second'", "A", "first"),  # the first assignment wins
    ("A='line 1\nline 2\n\n# not a comment'\nB='b'", "A", "line 1\nline 2\n\n# not a comment"),
    ("A='line 1\nline 2'\nB='b'", "B", "b"),  # a multi-line value is skipped whole
    ("A= 'x'", "A", ""),  # a blank after '=' assigns "" (as sh)
    ("A=\t'x'", "A", ""),
    ("B= 'x'\nA='y'", "A", "y"),
    ("B= not even quoted\nA='y'", "A", "y"),  # such a line is not looked at further
    ("A='x'\nB=broken", "A", "x"),  # the file is not read past the key
    ("A='x'\nno equals sign", "A", "x"),
    ("A B='spaces in the name'", "A B", "spaces in the name"),
    ("export A='x'", "export A", "x"),  # no shell: `export A` is the name
])
def test_find(text: str, key: str, value: str) -> None:
    assert find(text, key) == value


@pytest.mark.parametrize(("text", "message"), [
    ("A='x'\njunk\nB='y'", "invalid environment variable format at line 2: missing '='"),
    ("='x'\nB='y'", "invalid environment variable format at line 1: empty variable name"),
    ("A ='x'\nB='y'", "invalid environment variable format at line 1: whitespace before '=' "
     "is not allowed"),
    ("A='x'\nC=x\nB='y'", "invalid environment variable format at line 2: value must be "
     "enclosed in single quotes"),
    ("A=\"x\"\nB='y'", "invalid environment variable format at line 1: value must be "
     "enclosed in single quotes"),
    ("A=\nB='y'", "invalid environment variable format at line 1: value must be enclosed in "
     "single quotes"),
    ("A='x' y\nB='y'", "invalid environment variable format at line 1: unexpected content "
     "after closing quote"),
    ("A='x'\nC='multi\nline' tail\nB='y'", "invalid environment variable format at line 3: "
     "unexpected content after closing quote"),
    ("A='x'\nC='never\nclosed\nB=", "invalid environment variable format starting at line 2: "
     "unclosed single quote"),
    ("B='it''s'", "invalid environment variable format at line 1: unexpected content after "
     "closing quote"),
])
def test_malformed_lines_before_the_key(text: str, message: str) -> None:
    with pytest.raises(envfiles.EnvFileError) as caught:
        find(text, "B")
    assert caught.value.message == message


def test_a_value_longer_than_a_cri_message_is_refused() -> None:
    lines = ["A='" + "x" * 1000, *(["x" * 1000] * (envfiles.MAX_VALUE_CHARS // 1000)), "'"]
    with pytest.raises(envfiles.EnvFileError, match="value starting at line 1 is longer"):
        envfiles.find(lines, "A")


def test_lines_are_read_only_up_to_the_key() -> None:
    seen: list[str] = []

    def lines() -> Any:
        for line in ("A='x'", "B='y'", "C='z'"):
            seen.append(line)
            yield line

    assert envfiles.find(lines(), "B") == "y"
    assert seen == ["A='x'", "B='y'"]


# -- refs, and what reading them gives -------------------------------------------------------------

REF = envfiles.FileKeyRef("config", "config.env", "DB")
OPTIONAL = envfiles.FileKeyRef("config", "config.env", "DB", optional=True)
FILE = "/data/pods/uid-1/volumes/kubernetes.io~empty-dir/config/config.env"


def file_ref(**ref: Any) -> pods.EnvVar:
    return pods.EnvVar("X", value_from={"fileKeyRef": ref})


def test_file_key_refs_in_order_and_once() -> None:
    container = pods.Container(name="c", image="i", env=(
        file_ref(volumeName="config", path="config.env", key="DB"),
        pods.EnvVar("Y", "literal"),
        pods.EnvVar("Z", value_from={"configMapKeyRef": {"name": "cm", "key": "k"}}),
        file_ref(volumeName="other", path="a/b.env", key="K", optional=True),
        file_ref(volumeName="config", path="config.env", key="DB"),
    ))
    assert envfiles.file_key_refs(container) == (
        REF, envfiles.FileKeyRef("other", "a/b.env", "K", optional=True))


@pytest.mark.parametrize(("ref", "found", "value", "error"), [
    (REF, envfiles.FileValue("mydb", FILE), "mydb", None),
    (OPTIONAL, envfiles.FileValue("mydb", FILE), "mydb", None),
    (OPTIONAL, envfiles.FileValue("", FILE), None, None),
    # The kubelet's words: the key and the file's host path, Go-quoted.
    (REF, envfiles.FileValue("", FILE), None,
     f'environment variable key "DB" not found in file "{FILE}"'),
    # A file that cannot be read is an error, optional or not.
    (REF, envfiles.FileValue(error=envfiles.PARSE_FAILED), None, "couldn't parse env file"),
    (OPTIONAL, envfiles.FileValue(error=envfiles.PARSE_FAILED), None,
     "couldn't parse env file"),
])
def test_resolve(ref: envfiles.FileKeyRef, found: envfiles.FileValue, value: str | None,
                 error: str | None) -> None:
    if error is None:
        assert envfiles.resolve(ref, found) == value
    else:
        with pytest.raises(envfiles.EnvFileError) as caught:
            envfiles.resolve(ref, found)
        assert caught.value.message == error


def test_messages_quote_as_go_does() -> None:
    assert envfiles.not_found_message('a"b', "/p\\q") == \
        'environment variable key "a\\"b" not found in file "/p\\\\q"'
    assert envfiles.missing_volume_message("config") == \
        'cannot find the volume "config" referenced by FileKeyRef'


# -- in a container's environment ------------------------------------------------------------------

POD = pods.Pod(uid=pods.PodUID("uid-1"), name="web", namespace="default",
               spec=pods.PodSpec(containers=(pods.Container(name="c", image="i"),)))
FACTS = downward.pod_facts(POD, downward.Node(name="node-1"), ("10.0.0.7",))


def resolve_env(*env: pods.EnvVar, files: envfiles.FileValues) -> envvars.Environment:
    container = pods.Container(name="c", image="i", env=env)
    return envvars.resolve(container, lookup=lambda *_: None, facts=FACTS, files=files)


def test_file_values_join_the_environment_in_order() -> None:
    other = envfiles.FileKeyRef("config", "config.env", "API")
    env = resolve_env(
        pods.EnvVar("FIRST", "1"),
        file_ref(volumeName="config", path="config.env", key="DB"),
        file_ref(volumeName="config", path="config.env", key="API"),
        pods.EnvVar("USES", "$(X)!"),
        files={REF: envfiles.FileValue("mydb", FILE), other: envfiles.FileValue("k", FILE)},
    )
    # Both refs set X (the variable's name): the later wins; $(X) in a later value sees it.
    assert env.variables == (("FIRST", "1"), ("X", "k"), ("USES", "k!"))


def test_an_optional_missing_key_leaves_the_variable_out() -> None:
    env = resolve_env(file_ref(volumeName="config", path="config.env", key="DB", optional=True),
                      files={OPTIONAL: envfiles.FileValue("", FILE)})
    assert env.variables == ()


@pytest.mark.parametrize(("files", "message"), [
    ({REF: envfiles.FileValue("", FILE)},
     f'environment variable key "DB" not found in file "{FILE}"'),
    ({REF: envfiles.FileValue(error=envfiles.PARSE_FAILED)}, "couldn't parse env file"),
    ({}, 'cannot find the volume "config" referenced by FileKeyRef'),
])
def test_a_ref_that_cannot_be_read_is_a_config_error(
    files: envfiles.FileValues, message: str
) -> None:
    with pytest.raises(envvars.ConfigError) as caught:
        resolve_env(file_ref(volumeName="config", path="config.env", key="DB"), files=files)
    assert caught.value.message == message


def test_the_first_failing_variable_in_order_is_the_error() -> None:
    with pytest.raises(envvars.ConfigError) as caught:
        resolve_env(
            pods.EnvVar("A", value_from={"configMapKeyRef": {"name": "gone", "key": "k"}}),
            file_ref(volumeName="config", path="config.env", key="DB"),
            files={REF: envfiles.FileValue(error=envfiles.PARSE_FAILED)})
    assert caught.value.message == 'configmap "gone" not found'


# -- the manifest --------------------------------------------------------------------------------

C0 = "spec.containers[0]"
VF = f"{C0}.env[0].valueFrom"


EMPTY_DIR = {"name": "config", "emptyDir": {}}


def pod_manifest(ref: dict[str, Any], *, volume: dict[str, Any] = EMPTY_DIR,
                 key: str = "containers") -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "env": [{"name": "X",
                                                           "valueFrom": {"fileKeyRef": ref}}]}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    spec[key] = [container]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {**spec, "volumes": [copy.deepcopy(volume)]}}


GOOD = {"volumeName": "config", "path": "config.env", "key": "DB"}


def parse(manifest: dict[str, Any]) -> pods.Pod:
    return manifests.pod_from_object(manifest, node_name="n")


def test_a_file_key_ref_is_read_from_the_manifest() -> None:
    pod = parse(pod_manifest({**GOOD, "optional": True}))
    var = pod.spec.containers[0].env[0]
    assert envfiles.file_key_ref(var.value_from or {}) == envfiles.FileKeyRef(
        "config", "config.env", "DB", optional=True)
    parse(pod_manifest(GOOD, key="initContainers"))
    # Only a ".." step is refused (validatePathNoBacksteps); the path is taken inside the
    # volume, an absolute one too.
    parse(pod_manifest({**GOOD, "path": "/a/..b/config.env"}))


@pytest.mark.parametrize(("ref", "path", "message"), [
    ({"path": "a", "key": "K"}, f"{VF}.fileKeyRef.volumeName", "required"),
    ({"volumeName": "config", "key": "K"}, f"{VF}.fileKeyRef.path", "required"),
    ({"volumeName": "config", "path": "a"}, f"{VF}.fileKeyRef.key", "required"),
    ({**GOOD, "key": "A=B"}, f"{VF}.fileKeyRef.key", "not a valid environment variable name"),
    ({**GOOD, "key": "caf\u00e9"}, f"{VF}.fileKeyRef.key",
     "not a valid environment variable name"),
    ({**GOOD, "volumeName": "Config"}, f"{VF}.fileKeyRef.volumeName", "DNS-1123 label"),
    ({**GOOD, "path": "../x"}, f"{VF}.fileKeyRef.path", "must not contain '..'"),
    ({**GOOD, "path": "a/../x"}, f"{VF}.fileKeyRef.path", "must not contain '..'"),
    ({**GOOD, "optional": "yes"}, f"{VF}.fileKeyRef.optional", "expected a boolean"),
    ({**GOOD, "name": "x"}, f"{VF}.fileKeyRef.name", "unknown field"),
    ({**GOOD, "volumeName": "nowhere"}, f"{VF}.fileKeyRef.volumeName",
     'volume "nowhere" is not declared in spec.volumes (declared: config)'),
])
def test_manifest_checks(ref: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(manifests.ManifestError) as caught:
        parse(pod_manifest(ref))
    assert caught.value.path == path
    assert message in caught.value.message


def test_the_volume_must_be_an_empty_dir() -> None:
    with pytest.raises(manifests.ManifestError) as caught:
        parse(pod_manifest(GOOD, volume={"name": "config", "hostPath": {"path": "/tmp"}},
                           key="initContainers"))
    assert caught.value.path == \
        "spec.initContainers[0].env[0].valueFrom.fileKeyRef.volumeName"
    assert caught.value.message == '"config": referenced volume must be of type emptyDir'


def test_a_valuefrom_without_a_source_names_file_key_ref() -> None:
    manifest = pod_manifest(GOOD)
    manifest["spec"]["containers"][0]["env"][0]["valueFrom"] = {}
    with pytest.raises(manifests.ManifestError) as caught:
        parse(manifest)
    assert caught.value.message == ("must specify one of: `fieldRef`, `resourceFieldRef`, "
                                    "`configMapKeyRef`, `secretKeyRef` or `fileKeyRef`")
