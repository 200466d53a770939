"""User namespace ranges (pure): the kubelet's allocation and its mapping file."""

from __future__ import annotations

import pytest

from nodelet.model.core import runtime
from nodelet.model.core import userns as u


def test_ranges_start_above_the_hosts_ids_and_never_overlap() -> None:
    first = u.allocate(set())
    assert (first.host_id, first.length) == (65536, 65536)
    second = u.allocate({first.host_id})
    assert second.host_id == 131072
    assert u.allocate({131072}).host_id == 65536  # a freed range is used again


def test_a_kept_range_reads_back_and_a_foreign_one_is_refused() -> None:
    kept = runtime.UserNamespace(host_id=196608, length=65536)
    assert u.from_json(u.to_json(kept)) == kept


@pytest.mark.parametrize("data", [
    b"not json", b"{}",
    b'{"uidMappings": [{"hostId": 0, "containerId": 0, "length": 65536}], '
    b'"gidMappings": [{"hostId": 0, "containerId": 0, "length": 65536}]}',  # the host's IDs
    b'{"uidMappings": [{"hostId": 65537, "containerId": 0, "length": 65536}], '
    b'"gidMappings": [{"hostId": 65537, "containerId": 0, "length": 65536}]}',  # unaligned
])
def test_unusable_mapping_files(data: bytes) -> None:
    with pytest.raises(u.UserNamespaceError):
        u.from_json(data)
