"""Bounded manifest parsing (nesting depth, YAML alias expansion, values Python cannot read) and
duplicate definitions across files: refused with a message that names the limit, never raised."""

from __future__ import annotations

import json
import resource

import pytest

from nodelet import settings
from nodelet.model.parsing import duplicates, inputlimits, manifests

LIMITS = settings.ManifestLimits()
POD_HEAD = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n"


def alias_bomb(levels: int = 9) -> str:
    """The "billion laughs": each anchor is a list of 9 aliases of the previous one."""
    lines = [POD_HEAD + "spec:", "  containers: [{name: c, image: busybox}]", "  affinity:",
             '    a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"    a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def nested_block(levels: int) -> str:
    return "".join("  " * i + "a:\n" for i in range(levels)) + "  " * levels + "x: 1\n"


def nested_json(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


def only_problem(text: str, filename: str = "m.yaml",
                 limits: settings.ManifestLimits = LIMITS) -> manifests.ManifestProblem:
    (item,) = manifests.parse_documents(text, filename=filename, limits=limits)
    assert isinstance(item, manifests.ManifestProblem), item
    return item


def test_the_alias_bomb_is_refused_before_it_expands() -> None:
    text = alias_bomb()
    assert len(text) < 1000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    problem = only_problem(text)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert problem.message.startswith("refused: YAML aliases expand this file by more than "
                                      "100000 nodes")
    assert "manifest_limits.max_alias_nodes" in problem.message
    assert problem.line is not None and 9 <= problem.line <= 12  # the alias that overspent
    assert grown_kib < 20 * 1024, f"peak RSS grew by {grown_kib} KiB"


def test_anchors_used_a_few_times_are_fine() -> None:
    text = POD_HEAD + "x: &env [{name: A, value: '1'}, {name: B, value: '2'}]\ny: *env\nz: *env\n"
    (doc,) = manifests.parse_documents(text, filename="m.yaml")
    assert isinstance(doc, manifests.ParsedDocument)
    assert doc.obj["z"] == doc.obj["x"] == [{"name": "A", "value": "1"},
                                            {"name": "B", "value": "2"}]


@pytest.mark.parametrize(
    ("uses", "refused"),
    [(3, False), (4, True)],  # each alias adds 3 nodes (a list of two scalars); limit 10
)
def test_alias_limit_counts_expanded_nodes(uses: int, refused: bool) -> None:
    limits = settings.ManifestLimits(max_alias_nodes=10)
    text = "a: &a [1, 2]\n" + "".join(f"b{i}: *a\n" for i in range(uses))
    (item,) = manifests.parse_documents(text, filename="m.yaml", limits=limits)
    assert isinstance(item, manifests.ManifestProblem) is refused


def test_alias_budget_is_shared_by_the_documents_of_a_file() -> None:
    limits = settings.ManifestLimits(max_alias_nodes=10)
    doc = "a: &a [1, 2]\nb: *a\nc: *a\n"  # 6 nodes from aliases each
    items = manifests.parse_documents(f"{doc}---\n{doc}", filename="m.yaml", limits=limits)
    assert [type(i).__name__ for i in items] == ["ParsedDocument", "ManifestProblem"]
    assert items[1].index == 1


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    problem = only_problem("a: &a [1, {b: *a}]\n")
    assert problem.message.startswith("refused: alias *a refers to the mapping or list that "
                                      "contains it")
    assert problem.line == 1


@pytest.mark.parametrize(
    ("name", "text", "filename"),
    [
        ("yaml block", nested_block(500), "deep.yaml"),
        ("yaml flow", "a: " + "[" * 500 + "]" * 500, "deep.yaml"),
        ("yaml flow, unterminated", "a: " + "{a: " * 100_000, "deep.yaml"),
        ("json", nested_json(500), "deep.json"),
        ("json past the json module's recursion", "[" * 100_000 + "]" * 100_000, "deep.json"),
        ("json in a yaml file", nested_json(500), "deep.yaml"),
    ],
)
def test_deep_nesting_is_refused(name: str, text: str, filename: str) -> None:
    problem = only_problem(text, filename)
    assert problem.message.startswith(
        "refused: mappings and lists nested more than 100 levels deep"), name
    assert "manifest_limits.max_depth" in problem.message


@pytest.mark.parametrize("filename", ["m.yaml", "m.json"])
def test_nesting_up_to_the_limit_is_accepted(filename: str) -> None:
    limits = settings.ManifestLimits(max_depth=5)
    (doc,) = manifests.parse_documents(nested_json(5), filename=filename, limits=limits)
    assert isinstance(doc, manifests.ParsedDocument)
    problem = only_problem(nested_json(6), filename, limits)
    assert "more than 5 levels" in problem.message


def test_refusal_line_is_where_the_limit_was_crossed() -> None:
    limits = settings.ManifestLimits(max_depth=3)
    first, problem = manifests.parse_documents("kind: Pod\n---\n" + nested_block(5),
                                               filename="m.yaml", limits=limits)
    assert isinstance(first, manifests.ParsedDocument)
    assert isinstance(problem, manifests.ManifestProblem)
    assert (problem.index, problem.line) == (1, 6)  # where the 4th mapping starts


@pytest.mark.parametrize(
    ("text", "filename", "message"),
    [
        ("a: " + "1" * 5000, "m.yaml", "invalid YAML value: Exceeds the limit (4300 digits)"),
        ("a: !!int x", "m.yaml", "invalid YAML value: invalid literal for int()"),
        ('{"a": ' + "1" * 5000 + "}", "m.json", "invalid JSON value: Exceeds the limit"),
    ],
    ids=["huge int", "bad !!int", "huge json int"],
)
def test_values_python_cannot_read_are_problems(text: str, filename: str, message: str) -> None:
    problem = only_problem(text, filename)
    assert problem.message.startswith(message)
    assert "set_int_max_str_digits" not in problem.message


def test_errors_keep_the_pure_python_wording() -> None:
    # libyaml reads first (fast) but says "found undefined alias" without the name.
    assert only_problem("a: *nope\n").message == "invalid YAML: found undefined alias 'nope'"


def test_json_too_deep_walks_without_recursion() -> None:
    value: object = 1
    for _ in range(50_000):
        value = [value]
    assert inputlimits.json_too_deep(value, 100)
    assert not inputlimits.json_too_deep(json.loads(nested_json(3)), 3)


# --- duplicates ---------------------------------------------------------------------------------


def pod_def(file: str, name: str, uid: str, document: int = 0) -> duplicates.Definition:
    keys = (("namespace/name", f"Pod/default/{name}"), ("UID", uid))
    return duplicates.Definition(file, document, f"pod default/{name}", keys)


def cm_def(file: str, kind: str, name: str, document: int = 0) -> duplicates.Definition:
    subject = f"{kind}/default/{name}"
    return duplicates.Definition(file, document, subject, (("kind/namespace/name", subject),))


@pytest.mark.parametrize(
    ("definitions", "expected"),
    [
        pytest.param([pod_def("a", "web", "u1"), pod_def("b", "db", "u2")], {}, id="distinct"),
        pytest.param(
            [pod_def("a", "web", "u1"), pod_def("b", "web", "u1")],
            {0: "duplicate pod default/web: b has the same namespace/name and UID",
             1: "duplicate pod default/web: a has the same namespace/name and UID"},
            id="same pod twice"),
        pytest.param(
            [pod_def("a", "web", "u1"), pod_def("b", "db", "u1")],
            {0: "duplicate pod default/web: b has the same UID",
             1: "duplicate pod default/db: a has the same UID"},
            id="same uid"),
        pytest.param(
            [pod_def("a", "web", "u1"), pod_def("a", "web", "u2", document=2)],
            {0: "duplicate pod default/web: a (document 2) has the same namespace/name",
             1: "duplicate pod default/web: a has the same namespace/name"},
            id="same name in one file"),
        pytest.param(
            [cm_def("a", "ConfigMap", "cfg"), cm_def("b", "Secret", "cfg"),
             cm_def("c", "ConfigMap", "cfg")],
            {0: "duplicate ConfigMap/default/cfg: c has the same kind/namespace/name",
             2: "duplicate ConfigMap/default/cfg: a has the same kind/namespace/name"},
            id="configmap twice, secret of the same name apart"),
        pytest.param(
            [pod_def("a", "web", "u1"), pod_def("b", "web", "u2"), pod_def("c", "web", "u3")],
            {0: "duplicate pod default/web: b has the same namespace/name; c has the same "
                "namespace/name",
             1: "duplicate pod default/web: a has the same namespace/name; c has the same "
                "namespace/name",
             2: "duplicate pod default/web: a has the same namespace/name; b has the same "
                "namespace/name"},
            id="three times"),
    ],
)
def test_duplicates_refuse_every_definition(
    definitions: list[duplicates.Definition], expected: dict[int, str]
) -> None:
    refused = duplicates.refusals(definitions)
    assert set(refused) == {definitions[position] for position in expected}
    for position, prefix in expected.items():
        message = refused[definitions[position]]
        assert message.startswith(prefix + ";"), message
        assert message.endswith("neither definition is used until all but one are removed or "
                                "renamed")
