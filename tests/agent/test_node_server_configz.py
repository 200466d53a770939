"""GET /configz on the node server: the running configuration as a KubeletConfiguration, the
kubelet's shape (`{"kubeletconfig": {...}}`), behind the node server's auth."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import aiohttp
import pytest

from conftest import AgentFactory
from nodelet import settings

pytestmark = pytest.mark.runtime

TOKEN = "c0nfigz-test-token"


async def _get(url: str, ca: Path, token: str | None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connector = aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=str(ca)))
    async with aiohttp.ClientSession(connector=connector) as session, \
            session.get(url, headers=headers) as response:
        return response.status, await response.read()


async def test_configz_serves_the_running_configuration(make_agent: AgentFactory,
                                                        tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"{TOKEN},bob,uid-bob,admins\n")
    agent = await make_agent(node_server=settings.NodeServerSettings(token_auth_file=tokens))
    url = f"https://127.0.0.1:{agent.agent_or_fail().node_server_port}/configz"
    ca = agent.settings.data_dir / "pki" / "nodelet.crt"
    status, _ = await _get(url, ca, None)
    assert status == 401
    status, body = await _get(url, ca, TOKEN)
    assert status == 200, body
    config = json.loads(body)["kubeletconfig"]
    assert config["maxPods"] == agent.settings.node.max_pods
    assert config["featureGates"]["PodReadyToStartContainersCondition"] is True
    assert config["syncFrequency"] == "1m0s" or config["syncFrequency"].endswith("s")
    assert config["containerRuntimeEndpoint"].startswith("unix://")
    assert config["authentication"]["anonymous"] == {"enabled": False}
