"""The node server (port 10250) on real containerd: auth, exec, run, port-forward, logs, stats,
and the CLI (`nodelet exec -it` through a pty, `port-forward`, `top`) against it.

One agent with one pod serves every check of a test, to keep the suite's wall time small.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import fcntl
import json
import os
import re
import ssl
import struct
import sys
import termios
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import AgentFactory
from nodelet import settings
from nodelet.adapters import node_client as nc
from support.harness import Harness, all_ready, http_get, pod_manifest, port_forwarded_page
from support.polling import eventually

pytestmark = pytest.mark.runtime

TOKEN = "n0de-server-test-token"
POD = "served"
FULL = f"{POD}-testnode"
# httpd in the background, five numbered lines, then a tick a second (for following).
COMMAND = ("mkdir -p /www && echo hello-through-port-forward > /www/index.html && "
           "httpd -p 8080 -h /www && for i in 1 2 3 4 5; do echo line $i; done; "
           "while true; do sleep 1; echo tick; done")


@dataclass
class Served:
    agent: Harness
    url: str
    ca: Path  # the server's self-signed certificate
    token_file: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # from another CA
    stranger_key: Path

    def ssl(self, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if cert is not None:
            context.load_cert_chain(cert, key)
        return context

    def credentials(self, **kwargs: object) -> nc.Credentials:
        return nc.Credentials(ca_file=self.ca, **kwargs)  # type: ignore[arg-type]

    def cli(self) -> list[str]:
        token = self.token_file.with_name("token")
        token.write_text(TOKEN + "\n")
        return ["--node-server", self.url, "--token-file", str(token),
                "--data-dir", str(self.agent.settings.data_dir)]


def _name(cn: str, org: str = "") -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
    return x509.Name(attributes)


def _certificate(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
                 signer: ec.EllipticCurvePrivateKey, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(signer, hashes.SHA256()))


def _write_pair(directory: Path, name: str, cert: x509.Certificate,
                key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _client_pair(directory: Path, name: str, ca_name: str) -> tuple[Path, Path, Path]:
    """A CA and a client certificate it signed (CN alice, O admins): (ca, cert, key)."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = _certificate(_name(ca_name), ca_key, _name(ca_name), ca_key, ca=True)
    ca_path, _ = _write_pair(directory, f"{name}-ca", ca_cert, ca_key)
    cert = _certificate(_name("alice", "admins"), key, _name(ca_name), ca_key, ca=False)
    cert_path, key_path = _write_pair(directory, name, cert, key)
    return ca_path, cert_path, key_path


@pytest_asyncio.fixture(loop_scope="session")
async def served(make_agent: AgentFactory, tmp_path: Path) -> AsyncIterator[Served]:
    token_file = tmp_path / "tokens.csv"
    token_file.write_text(f'{TOKEN},bob,uid-bob,"admins,devs"\n')
    client_ca, cert, key = _client_pair(tmp_path, "client", "test client CA")
    _, stranger_cert, stranger_key = _client_pair(tmp_path, "stranger", "another CA")
    agent = await make_agent(node_server=settings.NodeServerSettings(
        token_auth_file=token_file, client_ca_file=client_ca))
    agent.write(f"{POD}.yaml", pod_manifest(POD, command=COMMAND, container_extra="""\
        readinessProbe:
          exec: {command: ["true"]}
          periodSeconds: 1
        """))
    await agent.wait_status(POD, all_ready, what="pod running")
    port = agent.agent_or_fail().node_server_port
    yield Served(agent, f"https://127.0.0.1:{port}",
                 agent.settings.data_dir / "pki" / "nodelet.crt", token_file, cert, key,
                 stranger_cert, stranger_key)


async def _get(served: Served, path: str, *, token: str | None = None,
               cert: Path | None = None, key: Path | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connector = aiohttp.TCPConnector(ssl=served.ssl(cert, key))
    async with aiohttp.ClientSession(connector=connector) as session, \
            session.get(served.url + path, headers=headers) as response:
        return response.status, await response.read()


async def test_authentication_and_authorization(served: Served) -> None:
    for path in ("/pods", f"/exec/default/{FULL}/main?command=true&output=1",
                 "/stats/summary", f"/containerLogs/default/{FULL}/main"):
        assert (await _get(served, path))[0] == 401, path
    assert (await _get(served, "/pods", token="wrong"))[0] == 401
    status, body = await _get(served, "/pods", token=TOKEN)
    assert status == 200 and FULL.encode() in body
    status, _ = await _get(served, "/healthz", cert=served.client_cert, key=served.client_key)
    assert status == 200
    # A certificate from another CA fails the TLS handshake: never a request.
    with pytest.raises(aiohttp.ClientError):
        await _get(served, "/pods", cert=served.stranger_cert, key=served.stranger_key)


async def test_exec_run_and_port_forward(served: Served) -> None:
    async with nc.NodeClient(served.url, served.credentials(token=TOKEN)) as client:
        out: dict[int, bytes] = {nc.STDOUT: b"", nc.STDERR: b""}

        def write(channel: int, data: bytes) -> None:
            out[channel] += data

        query = [("command", "sh"), ("command", "-c"),
                 ("command", "echo out; echo err >&2; exit 3"),
                 ("output", "1"), ("error", "1")]
        async with client.channels(nc.pod_path("exec", "default", FULL, "main"),
                                   query) as session:
            code = await session.run(write)
        assert (code, out[nc.STDOUT], out[nc.STDERR]) == (3, b"out\n", b"err\n")

        # attach: the main process's output as it is printed.
        async with client.channels(nc.pod_path("attach", "default", FULL, "main"),
                                   [("output", "1"), ("error", "1")]) as session:
            async with asyncio.timeout(15):
                async for channel, data in session.messages():
                    if (channel, data) == (nc.STDOUT, b"tick\n"):
                        break

        status, body = await _get(served, f"/run/default/{FULL}/main?cmd=echo%20ran",
                                   token=TOKEN)
        assert status == 405  # /run is POST only, as in the kubelet
        connector = aiohttp.TCPConnector(ssl=served.ssl())
        async with aiohttp.ClientSession(connector=connector) as session, session.post(
                f"{served.url}/run/default/{FULL}/main?cmd=echo%20ran",
                headers={"Authorization": f"Bearer {TOKEN}"}) as response:
            assert (response.status, await response.read()) == (200, b"ran\n")

        server = await asyncio.start_server(
            lambda r, w: nc.forward_connection(
                client, nc.pod_path("portForward", "default", FULL), 8080, r, w),
            "127.0.0.1", 0)
        try:
            port = server.sockets[0].getsockname()[1]
            body = await http_get(port)
            assert b"hello-through-port-forward" in body
        finally:
            server.close()
            await server.wait_closed()



async def test_container_logs_parameters(served: Served) -> None:
    base = f"/containerLogs/default/{FULL}/main"
    status, body = await _get(served, base, token=TOKEN)
    assert status == 200 and body.startswith(b"line 1\nline 2\nline 3\nline 4\nline 5\n")
    _, body = await _get(served, base + "?tailLines=1", token=TOKEN)
    assert body.count(b"\n") == 1
    _, body = await _get(served, base + "?limitBytes=4", token=TOKEN)
    assert body == b"line"
    _, body = await _get(served, base + "?timestamps=true&limitBytes=40", token=TOKEN)
    assert re.match(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\S* line 1\n", body), body
    _, body = await _get(served, base + "?sinceTime=2999-01-01T00:00:00Z", token=TOKEN)
    assert body == b""
    _, body = await _get(served, base + "?sinceSeconds=3600", token=TOKEN)
    assert body.startswith(b"line 1\n")
    status, body = await _get(served, base + "?previous=true", token=TOKEN)
    assert status == 400 and b"previous terminated container" in body  # as the kubelet
    assert (await _get(served, base + "?sinceSeconds=1&sinceTime=2020-01-01T00:00:00Z",
                       token=TOKEN))[0] == 400
    # follow: the ticks logged after the request arrive on the open response.
    async with nc.NodeClient(served.url, served.credentials(token=TOKEN)) as client:
        seen = b""
        chunks = client.stream(base, [("follow", "true"), ("tailLines", "0")])
        try:
            async with asyncio.timeout(15):
                async for chunk in chunks:
                    seen += chunk
                    if seen.count(b"tick\n") >= 2:
                        break
        finally:
            await chunks.aclose()
        assert seen.startswith(b"tick\n")


def _cgroup_path(cgroup_file: bytes, controller: str) -> Path:
    for line in cgroup_file.decode().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path(path.lstrip("/"))
    raise AssertionError(f"no {controller} cgroup in {cgroup_file!r}")


async def test_stats_summary_matches_the_cgroup(served: Served) -> None:
    # The exec'd process shares the container's cgroups (cgroup v1 on these machines).
    connector = aiohttp.TCPConnector(ssl=served.ssl())
    async with aiohttp.ClientSession(connector=connector) as session, session.post(
            f"{served.url}/run/default/{FULL}/main?cmd=cat%20/proc/self/cgroup",
            headers={"Authorization": f"Bearer {TOKEN}"}) as response:
        cgroups = await response.read()
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        pytest.skip("cgroup v2 host: this test reads cgroup v1 files")
    cpuacct = next(p for p in (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup/cpu,cpuacct"))
                   if p.is_dir())
    cpu = cpuacct / _cgroup_path(cgroups, "cpuacct") / "cpuacct.usage"
    memory = Path("/sys/fs/cgroup/memory") / _cgroup_path(cgroups, "memory")
    before = int(cpu.read_text())
    status, body = await _get(served, "/stats/summary", token=TOKEN)
    after = int(cpu.read_text())
    assert status == 200
    summary = json.loads(body)
    pod = next(p for p in summary["pods"] if p["podRef"]["name"] == FULL)
    container = next(c for c in pod["containers"] if c["name"] == "main")
    assert before <= container["cpu"]["usageCoreNanoSeconds"] <= after
    stat = dict(line.split() for line in (memory / "memory.stat").read_text().splitlines())
    working_set = int((memory / "memory.usage_in_bytes").read_text()) - int(
        stat["total_inactive_file"])
    assert abs(container["memory"]["workingSetBytes"] - working_set) <= 1024 * 1024
    assert pod["network"]["name"] == "eth0" and pod["network"]["rxBytes"] > 0
    assert summary["node"]["nodeName"] == "testnode"
    assert summary["node"]["memory"]["workingSetBytes"] > 0
    # The second scrape has CPU rates (the first may have none to compare with).
    _, body = await _get(served, "/stats/summary", token=TOKEN)
    assert "usageNanoCores" in json.loads(body)["node"]["cpu"]
    _, body = await _get(served, "/metrics/resource", token=TOKEN)
    assert f'container_memory_working_set_bytes{{container="main",namespace="default",' \
           f'pod="{FULL}"}}'.encode() in body
    _, body = await _get(served, "/metrics/probes", token=TOKEN)
    assert re.search(rb'prober_probe_total\{[^}]*probe_type="Readiness"[^}]*'
                     rb'result="successful"[^}]*\} [1-9]', body), body


# -- the CLI -------------------------------------------------------------------------------------


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "nodelet.cli", *args]


async def _read_until(master: int, pattern: bytes, seen: bytearray) -> bytes:
    """What the terminal showed, once it shows `pattern` (the master is non-blocking)."""
    def check() -> bytes:
        with contextlib.suppress(BlockingIOError, OSError):
            seen.extend(os.read(master, 4096))
        return bytes(seen)

    return await eventually(check, until=lambda s: pattern in s, within=20,
                            what=f"{pattern!r} on the terminal", every=0.01)


async def test_cli_exec_interactive_through_a_pty(served: Served) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    process = await asyncio.create_subprocess_exec(
        *_cli("exec", "-it", POD, *served.cli(), "--", "sh"),
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    os.set_blocking(master, False)
    seen = bytearray()
    try:
        await _read_until(master, b"# ", seen)  # the shell's prompt
        os.write(master, b"stty size; echo $((6*7))\r")
        await _read_until(master, b"33 101", seen)  # the terminal's size reached the container
        await _read_until(master, b"42", seen)
        os.write(master, b"exit 5\r")
        assert await asyncio.wait_for(process.wait(), 20) == 5
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)


async def test_cli_exec_port_forward_and_top(served: Served) -> None:
    process = await asyncio.create_subprocess_exec(
        *_cli("exec", POD, *served.cli(), "--", "sh", "-c", "echo hi; exit 4"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert (process.returncode, stdout) == (4, b"hi\n"), stderr

    process = await asyncio.create_subprocess_exec(
        *_cli("top", "pods", *served.cli()), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr
    assert re.search(rf"^{FULL}\s+\d+m\s+\d+Mi$", stdout.decode(), re.M), stdout

    page = await port_forwarded_page(_cli("port-forward", POD, "0:8080", *served.cli()))
    assert b"hello-through-port-forward" in page
