"""The node-local credential: root on the node runs `nodelet exec`, `logs`, `port-forward` and
`top` against the agent's node server with no credential flags, as it could reach the pods
through containerd's socket anyway; the same token from another address, another host user
and the network without credentials get 401.

The agent's node server listens on `::` (both families), so one agent serves loopback and its
host address: a client on 127.0.0.1 arrives as `::ffff:127.0.0.1`.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import stat
import sys
from pathlib import Path

import aiohttp
import pytest

from conftest import AgentFactory
from nodelet import settings
from nodelet.adapters import host, servingcerts
from support.harness import Harness, all_ready, pod_manifest, port_forwarded_page
from support.polling import eventually

pytestmark = pytest.mark.runtime

POD = "local"
COMMAND = ("mkdir -p /www && echo served-locally > /www/index.html && httpd -p 8080 -h /www "
           "&& echo started && while true; do sleep 1; done")


def _cli(agent: Harness, *args: str, node_server: str = "") -> list[str]:
    port = agent.agent_or_fail().node_server_port
    return [sys.executable, "-m", "nodelet.cli", *args[:1],
            "--node-server", node_server or f"https://127.0.0.1:{port}",
            "--data-dir", str(agent.settings.data_dir), *args[1:]]


async def _run(command: list[str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def _status(url: str, ca: Path, token: str | None) -> int:
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session, \
            session.get(url + "/pods", headers=headers) as response:
        return response.status


async def _served(make_agent: AgentFactory, **node: object) -> Harness:
    agent = await make_agent(node_server=settings.NodeServerSettings(
        address="::", **node))  # type: ignore[arg-type]
    agent.write(f"{POD}.yaml", pod_manifest(POD, command=COMMAND))
    await agent.wait_status(POD, all_ready, what="pod running")
    return agent


async def test_root_on_the_node_needs_no_credential_flags(make_agent: AgentFactory) -> None:
    agent = await _served(make_agent)
    token_file = servingcerts.local_token_path(agent.settings.data_dir)
    mode = token_file.stat()
    assert (stat.S_IMODE(mode.st_mode), mode.st_uid) == (0o600, 0), "root-only"

    code, out, err = await _run(_cli(agent, "exec", POD, "--", "sh", "-c", "echo hi; exit 3"))
    assert (code, out) == (3, "hi\n"), err
    code, out, err = await _run(_cli(agent, "top", "pods"))
    assert code == 0 and re.search(rf"^{POD}-\S+\s+\d+m\s+\d+Mi$", out, re.M), (out, err)
    code, out, err = await _run([sys.executable, "-m", "nodelet.cli", "logs", POD,
                                 "--server", f"http://127.0.0.1:{agent.agent_or_fail().server_port}",
                                 "--data-dir", str(agent.settings.data_dir)])
    assert (code, out) == (0, "started\n"), err

    page = await port_forwarded_page(_cli(agent, "port-forward", POD, "0:8080"))
    assert b"served-locally" in page

    # Without the token (another host user cannot read it: 0600 root, checked above): 401,
    # and the CLI says what to do.
    elsewhere = agent.settings.data_dir.parent / "not-the-agents"
    elsewhere.mkdir()
    ca = agent.settings.data_dir / "pki" / "nodelet.crt"
    command = _cli(agent, "exec", POD, "--", "echo", "hi")
    command[command.index("--data-dir") + 1] = str(elsewhere)
    code, out, err = await _run([*command[:-3], "--certificate-authority", str(ca),
                                 *command[-3:]])
    assert code != 0 and "401" in err and "run this as root on the node" in err, (code, err)


async def test_the_token_proves_nothing_from_the_network(make_agent: AgentFactory) -> None:
    agent = await _served(make_agent)
    port = agent.agent_or_fail().node_server_port
    ca = agent.settings.data_dir / "pki" / "nodelet.crt"
    token = servingcerts.local_token_path(agent.settings.data_dir).read_text().strip()
    address = host.host_ip()
    assert address != "127.0.0.1", "the test needs a non-loopback address"
    remote = f"https://{address}:{port}"

    assert await _status(f"https://127.0.0.1:{port}", ca, token) == 200
    assert await _status(remote, ca, token) == 401  # the same token, not from loopback
    assert await _status(remote, ca, None) == 401
    assert await _status(f"https://127.0.0.1:{port}", ca, None) == 401  # no token: no access
    code, _, err = await _run(_cli(agent, "exec", POD, "--", "echo", "hi", node_server=remote))
    assert code != 0 and "401" in err, err

    # A new start makes a new token: the old one stops working.
    await agent.stop(terminate_pods=False)
    await agent.start()
    new_port = agent.agent_or_fail().node_server_port
    fresh = servingcerts.local_token_path(agent.settings.data_dir).read_text().strip()
    assert fresh != token
    local = f"https://127.0.0.1:{new_port}"
    assert await eventually(lambda: _status(local, ca, fresh), until=lambda s: s == 200,
                            within=20, what="the new token accepted") == 200
    assert await _status(local, ca, token) == 401


async def test_turned_off(make_agent: AgentFactory) -> None:
    agent = await _served(make_agent, node_local_credential=False)
    assert not servingcerts.local_token_path(agent.settings.data_dir).exists()
    code, _, err = await _run(_cli(agent, "exec", POD, "--", "echo", "hi"))
    assert code != 0 and "401" in err, err
