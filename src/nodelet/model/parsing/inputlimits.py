"""Limits on manifest input (pure): nesting depth and YAML alias expansion.

Both are checked on the YAML parser's event stream, before any node or object is built, so a
hostile document is refused after reading only as far as the limit: PyYAML builds aliased
values as shared references (an 870-byte "billion laughs" bomb loads in microseconds), but
everything after it that walks the object (validation, hashing, copying) expands them, and
nesting deeper than Python's recursion limit kills whatever walks it with RecursionError.
go-yaml (behind sigs.k8s.io/yaml) has the same two guards: an alias-to-node ratio and a depth
limit. JSON has no aliases; its depth is checked on the loaded value, without recursion.

`LimitExceeded` (a `yaml.YAMLError`) carries `.message`, which names the limit and its setting,
and `.line`, the 0-based line of the document where it broke the limit (None for JSON).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

_DEPTH_SETTING = "manifest_limits.max_depth"
_ALIAS_SETTING = "manifest_limits.max_alias_nodes"


class LimitExceeded(yaml.YAMLError):
    """A document breaks a limit on manifest input; `message` says which and what to do."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class AliasBudget:
    """The nodes YAML aliases may still add to one file, shared by all of its documents (so
    many documents cannot each expand to just under the limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    def spend(self, nodes: int, line: int | None) -> None:
        self.spent += nodes
        if self.spent > self.limit:
            raise LimitExceeded(
                f"YAML aliases expand this file by more than {self.limit} nodes (the limit, "
                f"setting {_ALIAS_SETTING}); write the repeated values out or use fewer "
                "anchors", line)


def too_deep(limit: int, line: int | None = None) -> LimitExceeded:
    return LimitExceeded(
        f"mappings and lists nested more than {limit} levels deep (the limit, setting "
        f"{_DEPTH_SETTING}); real pods nest far less, check the indentation and brackets", line)


@dataclass
class _Open:
    """A mapping or list whose end event has not come yet: its anchor and expanded size."""

    anchor: str | None
    size: int = 1


def check_events(events: Iterable[yaml.Event], *, max_depth: int, budget: AliasBudget) -> None:
    """Raise LimitExceeded when the events of one document nest deeper than `max_depth`
    collections or its aliases (each counted at its target's expanded size) overspend
    `budget`, or an alias refers to the collection that contains it (infinite expansion).
    An alias to an unknown anchor is left for the composer to report."""
    sizes: dict[str, int] = {}  # anchor → expanded size of its node
    stack: list[_Open] = []
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= max_depth:
                raise too_deep(max_depth, _line(event))
            if event.anchor is not None:
                sizes.pop(event.anchor, None)  # an alias to it from inside is recursive
            stack.append(_Open(event.anchor))
        elif isinstance(event, yaml.CollectionEndEvent):
            done = stack.pop()
            _add(stack, sizes, done.anchor, done.size)
        elif isinstance(event, yaml.ScalarEvent):
            _add(stack, sizes, event.anchor, 1)
        elif isinstance(event, yaml.AliasEvent):
            _add(stack, sizes, None, _alias_size(event, sizes, stack, budget))


def _add(stack: list[_Open], sizes: dict[str, int], anchor: str | None, size: int) -> None:
    if anchor is not None:
        sizes[anchor] = size
    if stack:
        stack[-1].size += size


def _alias_size(
    event: yaml.AliasEvent, sizes: Mapping[str, int], stack: list[_Open], budget: AliasBudget
) -> int:
    anchor = event.anchor
    size = sizes.get(anchor) if anchor is not None else None
    if size is None:
        if any(open_.anchor == anchor for open_ in stack):
            raise LimitExceeded(
                f"alias *{anchor} refers to the mapping or list that contains it (an endless "
                "value); refer to a value defined before it instead", _line(event))
        return 0
    budget.spend(size, _line(event))
    return size


def _line(event: yaml.Event) -> int | None:
    return event.start_mark.line if event.start_mark is not None else None


def json_too_deep(value: Any, limit: int) -> bool:
    """True when `value` (as loaded from JSON) nests more than `limit` dicts and lists."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
