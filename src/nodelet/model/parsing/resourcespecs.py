"""A container's `resources` (requests and limits), checked as the API server checks them
(validateResourceRequirements, validateContainerResourceName, ValidateResourceQuantityValue) and
converted into `pods.Resources` (CPU in millicores, memory in bytes).

The rules: names are cpu, memory, ephemeral-storage, hugepages-<size> or qualified names
(`example.com/gpu`); quantities are not negative; a missing request is its limit; a request is at
most its limit; extended resources and huge pages cannot be overcommitted (request = limit) and
extended resources are whole numbers; huge pages need cpu or memory. Amounts beyond the int64
range are accepted, as the API server accepts them (`memory: 1e30`), and saturate when converted
(`quantities.ceil`). On top, nodelet refuses a CPU amount whose CFS quota the runtime cannot
take (an int64 of microseconds): the kubelet's conversion would overflow. Errors are the
`fields.ManifestError` tree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal, localcontext
from typing import Any

from nodelet.model.core import fields, names, pods, quantities
from nodelet.model.core import resources as podresources
from nodelet.model.parsing import apifields, podfields

INT64_MAX = 2**63 - 1
# A CPU limit becomes a CFS quota of millicores * 100 000 µs / 1000, an int64 in CRI.
_MAX_CPU_MILLI = INT64_MAX // 100
_STANDARD = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"


def _overcommit_allowed(name: str) -> bool:
    return podresources.is_native_resource(name) and not name.startswith(HUGEPAGES_PREFIX)


def resource_name(name: str, path: str) -> None:
    """validateContainerResourceName."""
    names.qualified_name(name, path)
    if "/" not in name and name not in _STANDARD and not name.startswith(HUGEPAGES_PREFIX):
        raise fields.InvalidValueError(
            f'"{name}": must be a standard resource for containers (cpu, memory, '
            'ephemeral-storage, hugepages-<size>) or fully qualified, such as "example.com/gpu"',
            path=path,
        )
    if "/" in name and not podresources.is_native_resource(name) \
            and not podresources.is_extended_resource(name):
        raise fields.InvalidValueError(
            f'"{name}": doesn\'t follow extended resource name standard (a domain and a name, '
            'not starting with "requests.")',
            path=path,
        )


def _too_large(name: str, value: Decimal, path: str) -> None:
    limit = Decimal(_MAX_CPU_MILLI) / 1000
    if name == "cpu" and value > limit:
        raise fields.InvalidValueError(
            f"{_shown(value)} is too large: the container runtime's CPU quota can express at "
            f"most {limit} CPUs",
            path=path,
        )


def _shown(raw: Any) -> str:
    text = str(raw)
    return text if len(text) <= 40 else text[:37] + "..."


def _quantity(name: str, raw: Any, path: str) -> Decimal:
    """ValidateResourceQuantityValue, and the runtime's bound."""
    resource_name(name, path)
    value = quantities.parse_quantity(raw, path=path)
    if value < 0:
        raise fields.InvalidValueError(
            f"{_shown(raw)}: must be greater than or equal to 0", path=path
        )
    _too_large(name, value, path)
    if podresources.is_extended_resource(name) and value != value.to_integral_value():
        raise fields.InvalidValueError(f"{_shown(raw)}: must be an integer", path=path)
    if name.startswith(HUGEPAGES_PREFIX) and not _hugepages_divisible(name, value):
        raise fields.InvalidValueError(
            f"{_shown(raw)} is not positive integer multiple of {name}", path=path
        )
    return value


def _hugepages_divisible(name: str, value: Decimal) -> bool:
    """helper.IsHugePageResourceValueDivisible: the page size is the name's quantity."""
    try:
        size = quantities.parse_quantity(name.removeprefix(HUGEPAGES_PREFIX))
    except fields.ManifestError:
        return False
    if size <= 0 or size != size.to_integral_value() or size > INT64_MAX:
        return False
    return quantities.ceil(value) % int(size) == 0


def _quantities(res: Mapping[str, Any], key: str, path: str) -> dict[str, Decimal]:
    """`limits` or `requests`; an entry's path is `limits[cpu]`, as the API server writes it."""
    out = {}
    for name, raw in fields.mapping(res, key, path).items():
        if not isinstance(name, str):  # YAML keys can be numbers, booleans or null
            raise fields.type_error(f"{path}.{key}", "resource names as keys", name)
        out[name] = _quantity(name, raw, f"{path}.{key}[{name}]")
    return out


def _check_requests(
    requests: Mapping[str, Decimal], limits: Mapping[str, Decimal], raw: Mapping[str, Any],
    path: str,
) -> None:
    """Requests against limits (`requests` as written, before defaulting)."""
    written = fields.mapping(raw, "limits", path)
    for name, request in requests.items():
        limit = limits.get(name)
        shown = f"{name} limit of {written.get(name)}"
        if limit is None and not _overcommit_allowed(name):
            raise fields.InvalidValueError(
                f"required: Limit must be set for non overcommitable resources ({name})",
                path=f"{path}.limits",
            )
        if limit is not None and request != limit and not _overcommit_allowed(name):
            raise fields.InvalidValueError(f"must be equal to {shown}", path=f"{path}.requests")
        if limit is not None and request > limit:
            raise fields.InvalidValueError(
                f"must be less than or equal to {shown}", path=f"{path}.requests"
            )


def _check_hugepages(names_: set[str], path: str) -> None:
    huge = any(n.startswith(HUGEPAGES_PREFIX) for n in names_)
    if huge and not names_ & {"cpu", "memory"}:
        raise fields.InvalidValueError("forbidden: HugePages require cpu or memory", path=path)


def _milli(cpu: Decimal | None) -> int:
    """Millicores, rounded up like Quantity.MilliValue, exactly: "1.0000000000000000000000000001"
    has more digits than the default decimal context keeps."""
    if cpu is None:
        return 0
    with localcontext() as context:
        context.prec = max(28, len(cpu.as_tuple().digits) + 4)
        return quantities.ceil(cpu * 1000)


def resources(obj: Mapping[str, Any], path: str, *, strict: bool) -> pods.Resources:
    """The `resources` of the container `obj` at `path`, checked and converted."""
    res = fields.mapping(obj, "resources", path)
    path = f"{path}.resources"
    if strict:
        fields.check_fields(res, apifields.RESOURCES_FIELDS, path)
        podfields.check_refused(res, "resources", path)
    limits = _quantities(res, "limits", path)
    written_requests = _quantities(res, "requests", path)
    _check_requests(written_requests, limits, res, path)
    _check_hugepages({*limits, *written_requests}, path)
    # The API server defaults a missing request to its limit.
    requests = {**limits, **written_requests}
    converted = _converted(requests, limits, _written(res, requests))
    claims = fields.items(res, "claims", path, _claim)
    return dataclasses.replace(converted, claims=claims) if claims else converted


def _claim(item: Mapping[str, Any], path: str) -> tuple[str, str]:
    """A `resources.claims` entry: (name of a spec.resourceClaims entry, request)."""
    name = fields.string(item, "name", path, required=True)
    return name, fields.string(item, "request", path)


def overhead(spec: Mapping[str, Any]) -> dict[str, int]:
    """`spec.overhead`, checked as the API server checks it (validateOverhead: as a
    container's limits), in `resources.Amounts` units (cpu in millicores)."""
    amounts = _quantities(spec, "overhead", "spec")
    _check_hugepages(set(amounts), "spec.overhead")
    return {name: _milli(value) if name == "cpu" else quantities.ceil(value)
            for name, value in amounts.items()}


def _written(res: Mapping[str, Any], requests: Mapping[str, Decimal]) -> dict[str, dict[str, str]]:
    """The requirements as written, quantities in their canonical form as the kubelet writes
    them back ("1000" → "1k"), requests defaulted from limits."""
    limits = {name: quantities.canonical(raw)
              for name, raw in fields.mapping(res, "limits", "").items()}
    written = {name: quantities.canonical(raw)
               for name, raw in fields.mapping(res, "requests", "").items()}
    out: dict[str, dict[str, str]] = {}
    if limits:
        out["limits"] = limits
    defaulted = {name: written.get(name) or limits[name] for name in requests}
    if defaulted:
        out["requests"] = defaulted
    return out


def pod_resources(
    spec: Mapping[str, Any], containers: Sequence[pods.Container],
    init_containers: Sequence[pods.Container], *, strict: bool,
) -> pods.Resources | None:
    """`spec.resources`, the pod-level requests and limits (PodLevelResources), checked as the
    API server checks them (cpu, memory and hugepages only; requests at least what the
    containers ask together, init containers and sidecars counted as the scheduler counts
    them; no app container's limit above the pod's) and defaulted as it defaults them: once
    pod-level limits are set, a missing cpu or memory request is the containers' aggregate
    request, or else the pod's limit. None: not set."""
    if spec.get("resources") is None:
        return None
    path = "spec.resources"
    res = fields.mapping(spec, "resources", "spec")
    if strict:
        fields.check_fields(res, apifields.RESOURCES_FIELDS, path)
    limits = _quantities(res, "limits", path)
    written_requests = _quantities(res, "requests", path)
    for key, amounts in (("limits", limits), ("requests", written_requests)):
        for name in amounts:
            if not _pod_level(name):
                raise fields.InvalidValueError(
                    f'Unsupported value: "{name}": supported values: "cpu", "hugepages-*", '
                    '"memory"', path=f"{path}.{key}[{name}]")
    _check_requests(written_requests, limits, res, path)
    _check_hugepages({*limits, *written_requests}, path)
    written = _written(res, written_requests)
    requests = dict(written_requests)
    # What the containers ask together (AggregateContainerRequests): it defaults the pod's
    # requests and bounds them.
    totals = {name: total for name, total in podresources.aggregate(
        containers, init_containers, podresources.container_requests).items()
        if _pod_level(name)}
    if limits:  # defaultPodRequests: only when pod-level limits are set
        for name in ("cpu", "memory"):  # the overcommittable ones, from the containers
            if name not in requests and totals.get(name):
                requests[name] = _decimal(name, totals[name])
                written.setdefault("requests", {})[name] = _as_quantity(name, totals[name])
        for name, limit in limits.items():
            if name not in requests:
                requests[name] = limit
                written.setdefault("requests", {})[name] = written["limits"][name]
    out = _converted(requests, limits, written)
    for name, total in totals.items():
        if name in requests and _decimal(name, total) > requests[name]:
            raise fields.InvalidValueError(
                "must be greater than or equal to aggregate container requests of "
                f"{_as_quantity(name, total)}", path=f"{path}.requests[{name}]")
    _check_container_limits(containers, limits, written, path)
    return out


def _pod_level(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith(HUGEPAGES_PREFIX)


def _decimal(name: str, amount: int) -> Decimal:
    """An amount in `resources.Amounts` units (cpu in millicores) as a quantity."""
    return Decimal(amount) / 1000 if name == "cpu" else Decimal(amount)


def _as_quantity(name: str, amount: int) -> str:
    """An amount as Quantity.String writes the sum of the containers' quantities."""
    return quantities.format_millis(amount) if name == "cpu" \
        else quantities.format_binary(amount)


def _check_container_limits(containers: Sequence[pods.Container],
                            limits: Mapping[str, Decimal],
                            written: Mapping[str, Mapping[str, str]], path: str) -> None:
    """No app container's limit above the pod's (the API server's path and words)."""
    for i, container in enumerate(containers):
        for name, theirs in (("cpu", _decimal("cpu", container.resources.cpu_limit_milli)),
                             ("memory", Decimal(container.resources.memory_limit))):
            if name in limits and theirs > limits[name]:
                raise fields.InvalidValueError(
                    f"must be less than or equal to pod limits of {written['limits'][name]}",
                    path=f"{path}.containers[{i}][{name}].limits")


def _converted(requests: Mapping[str, Decimal], limits: Mapping[str, Decimal],
               written: Mapping[str, Mapping[str, str]]) -> pods.Resources:
    return pods.Resources(
        cpu_request_milli=_milli(requests.get("cpu")),
        cpu_limit_milli=_milli(limits.get("cpu")),
        memory_request=quantities.ceil(requests.get("memory", Decimal(0))),
        memory_limit=quantities.ceil(limits.get("memory", Decimal(0))),
        other_requests={name: quantities.ceil(value) for name, value in requests.items()
                        if name not in ("cpu", "memory")},
        ephemeral_storage_limit=quantities.ceil(limits.get("ephemeral-storage", Decimal(0))),
        written=written,
    )
