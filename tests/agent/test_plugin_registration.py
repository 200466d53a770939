"""The plugin registry as a CSI driver's registrar meets it (tests/support/csiregistrar.py
speaks the kubelet's registration protocol, as the upstream node-driver-registrar does): a
registration socket that appears is asked who it is and told the node's answer — refused,
with the reason, for a driver of a CSI version nodelet does not speak and for one whose Node
service does not answer — and asked again once it comes back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from support.csiregistrar import Registrar
from support.harness import Harness

pytestmark = pytest.mark.runtime


async def test_registrations_are_answered_with_the_nodes_reason(agent: Harness,
                                                                tmp_path: Path) -> None:
    registry = agent.settings.data_dir / "plugins_registry"
    async with Registrar(registry, driver="old.csi.example", endpoint=str(tmp_path / "x.sock"),
                         versions=("0.3.0",)) as old:
        await asyncio.wait_for(old.refused.wait(), 30)
        assert old.error == ("RegisterPlugin error -- plugin validation failed with err: "
                             "none of the CSI versions reported by this driver are supported: "
                             "0.3.0 (nodelet speaks v1)")
    async with Registrar(registry, driver="gone.csi.example",
                         endpoint=str(tmp_path / "nothing-here.sock")) as gone:
        await asyncio.wait_for(gone.refused.wait(), 30)
        assert gone.error.startswith("RegisterPlugin error -- plugin validation failed with "
                                     "err: rpc error: code = Unavailable desc = ")
        assert not gone.registered.is_set()
    assert agent.agent_or_fail().csi_drivers.drivers() == []


async def test_a_plugin_not_told_of_its_registration_is_registered_again(
        agent: Harness, tmp_path: Path) -> None:
    """NotifyRegistrationStatus failing undoes the registration, which is tried again (the
    kubelet's RegisterPlugin; the node suite's "must recover and register after
    NotifyRegistrationStatus failure")."""
    registry = agent.settings.data_dir / "plugins_registry"
    async with Registrar(registry, driver="d.example.com", endpoint=str(tmp_path / "d.sock"),
                         versions=("v1.DRAPlugin",), plugin_type="DRAPlugin",
                         notify_failures=1) as driver:
        await asyncio.wait_for(driver.registered.wait(), 30)
        assert driver.asked >= 2 and driver.notify_failures == 0
        dra = agent.agent_or_fail().dra
        assert dra is not None and dra.drivers() == ["d.example.com"]
