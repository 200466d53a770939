"""ConfigMap and Secret values (pure): what volumes, environment variables and pull secrets
read. `configobjects` parses and validates them from v1 objects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConfigMap:
    name: str
    namespace: str
    data: Mapping[str, str] = field(default_factory=dict)
    binary_data: Mapping[str, bytes] = field(default_factory=dict)
    immutable: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Secret:
    """`data` holds the decoded bytes; `stringData` entries are merged in and win."""

    name: str
    namespace: str
    type: str = "Opaque"
    data: Mapping[str, bytes] = field(default_factory=dict)
    immutable: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    # metadata.uid: the API's; "" for a Secret from the manifest directory that names none.
    # Pulled-image records name a pull Secret by it (`model.core.pullrecords`).
    uid: str = ""


ConfigObject = ConfigMap | Secret
