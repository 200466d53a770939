"""Objects defined twice across static pod manifests (pure): which definitions to refuse.

Two documents that define the same pod (namespace/name, or `metadata.uid`) or the same
ConfigMap or Secret (kind/namespace/name) are both refused, wherever they are: picking one
would depend on file names and scan order, and silently running the other is what the user
did not check. Each refusal names the other definitions, so the user knows what to remove;
once one is removed, the other is used again. No exceptions of its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# The unique keys of a definition: (what people call it, value), e.g.
# ("namespace/name", "Pod default/web-node1") or ("metadata.uid", "0f3c...").
Key = tuple[str, str]


@dataclass(frozen=True)
class Definition:
    """One object defined by a document: `subject` names it for people ("pod
    default/web-node1"); `keys` must each be unique across all definitions."""

    file: str
    document: int
    subject: str
    keys: tuple[Key, ...]

    @property
    def where(self) -> str:
        return self.file if self.document == 0 else f"{self.file} (document {self.document})"


def refusals(definitions: Sequence[Definition]) -> dict[Definition, str]:
    """Every definition that shares a key with another one, and why it is refused."""
    by_key: dict[Key, list[Definition]] = defaultdict(list)
    for definition in definitions:
        for key in definition.keys:
            by_key[key].append(definition)
    refused: dict[Definition, str] = {}
    for definition in definitions:
        shared = _shared(definition, by_key)
        if shared:
            refused[definition] = _message(definition, shared)
    return refused


def _shared(
    definition: Definition, by_key: Mapping[Key, Iterable[Definition]]
) -> dict[Definition, list[str]]:
    """The other definitions with a key of `definition`, and the names of those keys."""
    shared: dict[Definition, list[str]] = {}
    for key in definition.keys:
        for other in by_key[key]:
            if other != definition:
                shared.setdefault(other, []).append(key[0])
    return shared


def _message(definition: Definition, shared: Mapping[Definition, list[str]]) -> str:
    others = "; ".join(f"{other.where} has the same {' and '.join(labels)}"
                       for other, labels in shared.items())
    return (f"duplicate {definition.subject}: {others}; neither definition is used until "
            "all but one are removed or renamed")
