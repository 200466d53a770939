"""/containerLogs gives a last line without its newline (a `P` record at the file's end), as the
kubelet's ReadLogs does.

Found by the [NodeConformance] test "Projected combined should project all components that
make up the projection API": its container runs `cat` on three files without newlines, so the
whole output is one partial record, and nodelet's node server served nothing.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest

from conftest import AgentFactory
from nodelet import settings
from support.harness import pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

TOKEN = "partial-l0gs-token"


async def test_an_unfinished_last_line_is_served(make_agent: AgentFactory,
                                                 tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"{TOKEN},bob,uid-bob,admins\n")
    agent = await make_agent(node_server=settings.NodeServerSettings(token_auth_file=tokens))
    # containerd writes an unfinished line once the stream ends: the container exits.
    agent.write("partial.yaml", pod_manifest("partial", command="printf no-newline-here",
                                             restart_policy="Never"))
    port = agent.agent_or_fail().node_server_port
    url = f"https://127.0.0.1:{port}/containerLogs/default/partial-testnode/main"
    context = ssl.create_default_context(
        cafile=str(agent.settings.data_dir / "pki" / "nodelet.crt"))

    async def logs() -> bytes:
        connector = aiohttp.TCPConnector(ssl=context)
        async with aiohttp.ClientSession(connector=connector) as session, \
                session.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as response:
            return f"{response.status} ".encode() + await response.read()

    body = await eventually(logs, within=30, until=lambda b: b"no-newline-here" in b,
                            seen=repr, what="the partial line in /containerLogs")
    assert body.startswith(b"200 no-newline-here")
