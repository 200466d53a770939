"""Required node affinity (`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnored...`)
matched against a node's labels and name (pure), as the kubelet's admission does with the
scheduler's rules (k8s.io/component-helpers nodeaffinity). `affinityspecs` parses it.

Terms are ORed; the expressions and fields of one term are ANDed; a term with neither matches
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")


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
