"""Reading v1 JSON leniently: objects served by nodelet's API or by any kubelet (pure).

The presenters (`presenting`, `timeline`) and the log lookup (`crilogs`) read Pods and Events
that another program wrote: a missing or mistyped field reads as empty instead of failing, so
a partial object still renders. (Manifests are read strictly, by `fields`.) No exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A v1 object nodelet reads (never changed) and one it builds or receives to change and send.
JSON = Mapping[str, Any]
Obj = dict[str, Any]


def obj(value: Any) -> JSON:
    """`value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def objs(value: Any) -> list[JSON]:
    """The JSON objects of a list (other items skipped); empty when `value` is not a list."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def about_pod(pod: JSON, event: JSON) -> bool:
    """Whether the v1 Event's involvedObject is the v1 Pod `pod`: same name and namespace, and
    the same UID when both carry one (an event about an earlier pod of that name is not)."""
    meta, involved = obj(pod.get("metadata")), obj(event.get("involvedObject"))
    if (involved.get("name"), involved.get("namespace")) != (meta.get("name"),
                                                               meta.get("namespace")):
        return False
    uid = meta.get("uid")
    return not uid or not involved.get("uid") or involved.get("uid") == uid
