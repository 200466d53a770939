"""Parsing required node affinity from a v1 pod spec into `affinity` terms, checked as the API
server's ValidateNodeSelector does. Errors are the `fields.ManifestError` tree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodelet.model.core import affinity, fields

_TERM_FIELDS = frozenset({"matchExpressions", "matchFields"})
_REQUIREMENT_FIELDS = frozenset({"key", "operator", "values"})
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _requirement(
    item: Mapping[str, Any], path: str, operators: tuple[str, ...]
) -> affinity.Requirement:
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
    return affinity.Requirement(key, operator, values)


def _term(item: Mapping[str, Any], path: str) -> affinity.Term:
    fields.check_fields(item, _TERM_FIELDS, path)
    return affinity.Term(
        expressions=fields.items(item, "matchExpressions", path,
                                 lambda r, p: _requirement(r, p, affinity.OPERATORS)),
        fields=fields.items(item, "matchFields", path,
                            lambda r, p: _requirement(r, p, affinity.FIELD_OPERATORS)),
    )


def required_terms(spec: Mapping[str, Any]) -> tuple[affinity.Term, ...]:
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
