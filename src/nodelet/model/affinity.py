"""Required node affinity (`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnored...`):
parsed from the pod spec and matched against a node's labels and name (pure), as the kubelet's
admission does with the scheduler's rules (k8s.io/component-helpers nodeaffinity).

Terms are ORed; the expressions and fields of one term are ANDed; a term with neither matches
nothing. Errors are the `fields.ManifestError` tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodelet.model import fields

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")
_TERM_FIELDS = frozenset({"matchExpressions", "matchFields"})
_REQUIREMENT_FIELDS = frozenset({"key", "operator", "values"})
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if value is None or not value.lstrip("-").isdigit():  # Gt, Lt: integers only
            return False
        bound = int(self.values[0])
        return int(value) > bound if self.operator == "Gt" else int(value) < bound


@dataclass(frozen=True)
class Term:
    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()  # on the Node object: only metadata.name

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.expressions and not self.fields:
            return False
        node_fields = {"metadata.name": node_name}
        return all(r.matches(labels) for r in self.expressions) and all(
            r.matches(node_fields) for r in self.fields)


def matches(terms: tuple[Term, ...], labels: Mapping[str, str], node_name: str) -> bool:
    """No terms: no requirement. Otherwise any one term must match."""
    return not terms or any(t.matches(labels, node_name) for t in terms)


def _requirement(item: Mapping[str, Any], path: str, operators: tuple[str, ...]) -> Requirement:
    fields.check_fields(item, _REQUIREMENT_FIELDS, path)
    key = fields.string(item, "key", path, required=True)
    operator = fields.one_of(fields.string(item, "operator", path, required=True), operators,
                             f"{path}.operator")
    values = fields.string_list(item, "values", path)
    if operator in ("In", "NotIn") and not values:
        raise fields.InvalidValueError(
            "must be specified when `operator` is 'In' or 'NotIn'", path=f"{path}.values")
    if operator in ("Exists", "DoesNotExist") and values:
        raise fields.InvalidValueError(
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            path=f"{path}.values")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise fields.InvalidValueError(
            "must be a single integer when `operator` is 'Gt' or 'Lt'", path=f"{path}.values")
    return Requirement(key, operator, values)


def _term(item: Mapping[str, Any], path: str) -> Term:
    fields.check_fields(item, _TERM_FIELDS, path)
    return Term(
        expressions=fields.items(item, "matchExpressions", path,
                                 lambda r, p: _requirement(r, p, OPERATORS)),
        fields=fields.items(item, "matchFields", path,
                            lambda r, p: _requirement(r, p, FIELD_OPERATORS)),
    )


def required_terms(spec: Mapping[str, Any]) -> tuple[Term, ...]:
    """The required node affinity terms of a v1 pod spec (other affinities are the
    scheduler's: only type-checked)."""
    affinity = fields.mapping(spec, "affinity", "spec")
    node = fields.mapping(affinity, "nodeAffinity", "spec.affinity")
    required = fields.mapping(node, _REQUIRED, "spec.affinity.nodeAffinity")
    if not required:
        return ()
    path = f"spec.affinity.nodeAffinity.{_REQUIRED}"
    terms = fields.items(required, "nodeSelectorTerms", path, _term)
    if not terms:
        raise fields.InvalidValueError("must have at least one node selector term",
                                       path=f"{path}.nodeSelectorTerms")
    return terms
