"""`nodelet exec`, `attach`, `port-forward` and `top`: the CLI side of the node server.

They talk to the node server (default `https://127.0.0.1:10250`) as kubectl talks to a kubelet
through the API server, so what is tested here is the same server cluster mode serves. The pod
is found in the server's `/pods` by name (a static pod also by its manifest name). Credentials:
`--token-file` (a token of the server's --token-auth-file) or `--client-certificate` and
`--client-key` (signed by its --client-ca-file); without either, the agent's node-local token
(`<data-dir>/pki/node-local.token`, made at every start and readable by root only), which the
server accepts from loopback. The server's certificate is checked against
`--certificate-authority`, by default the self-signed one in `<data-dir>/pki/nodelet.crt`.

exec and attach speak SPDY/3.1 with remote-command v4, as kubectl does to a kubelet
(`node_client.RemoteCommand`): stdin is sent as it is read (a pipe, a terminal, or a regular
file or /dev/null, which the event loop cannot watch), and its end closes the command's stdin,
so `echo hi | nodelet exec -i POD -- cat` ends with cat's exit code. With `-t` the local
terminal is put in raw mode (restored on exit) and its size is sent as the session opens,
before the runtime starts the command, and on every SIGWINCH, as kubectl does. containerd
applies a size only to a process it has started (CRI's Exec has no size), so a command that
asks at once (`sh -c 'stty size'`) may still see none — as with kubectl. A command that cannot
run (not on the PATH) prints the runtime's reason and exits 1; a refused session prints the
server's (`unable to upgrade connection: container not found ("main")`). As kubectl, the pod
is checked first: a container it does not have, or a completed pod, is refused before any
session.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import termios
import tty
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from nodelet import settings
from nodelet.adapters import node_client as nc
from nodelet.adapters import servingcerts
from nodelet.model.core import summary as sm
from nodelet.model.reports import presenting

DEFAULT_NODE_SERVER = "https://127.0.0.1:10250"
# `nodelet top`: a CPU rate needs two samples; the second is taken this long after the first
# when the server had none to compare with yet.
RATE_WINDOW = 1.0
# Bytes of stdin read and sent at a time.
STDIN_CHUNK = 32 * 1024
# kubectl's words for a session into a pod that has ended.
_COMPLETED = {"exec": "cannot exec into a container in a completed pod; current phase is {}",
              "attach": "cannot attach a container in a completed pod; current phase is {}"}


class CommandError(Exception):
    """A node command cannot run as asked; the message says why."""


def add_parsers(sub: Any) -> None:
    for name, help_text in (("exec", "run a command in a container"),
                            ("attach", "attach to a container's main process")):
        parser = sub.add_parser(name, help=help_text)
        parser.add_argument("pod", metavar="POD")
        parser.add_argument("-c", "--container", default="")
        parser.add_argument("-i", "--stdin", action="store_true", help="pass stdin")
        parser.add_argument("-t", "--tty", action="store_true", help="stdin is a terminal")
        if name == "exec":
            parser.set_defaults(exec_command=[])
            parser.usage = "nodelet exec [-h] [-c CONTAINER] [-i] [-t] POD -- COMMAND [ARG...]"
        _add_connection_flags(parser)
    forward = sub.add_parser("port-forward", help="forward local ports to a pod")
    forward.add_argument("pod", metavar="POD")
    forward.add_argument("ports", nargs="+", metavar="[LOCAL:]REMOTE")
    forward.add_argument("--address", default="127.0.0.1", help="local address to listen on")
    _add_connection_flags(forward)
    top = sub.add_parser("top", help="CPU and memory of the node or its pods")
    top.add_argument("resource", choices=("pods", "pod", "po", "node", "nodes", "no"))
    _add_connection_flags(top)


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """`nodelet exec ... -- CMD ARGS`: the command after `--` is taken off before argparse
    sees it (argparse cannot tell a command's own options from exec's)."""
    if argv[:1] == ["exec"] and "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1:]
    return argv, []


def _add_connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--namespace", default=None)
    parser.add_argument("--node-server", default=DEFAULT_NODE_SERVER,
                        help="the node server (default: %(default)s)")
    parser.add_argument("--data-dir", type=Path, default=settings.DEFAULT_DATA_DIR,
                        help="the agent's data dir, for its self-signed certificate")
    parser.add_argument("--token-file", type=Path, help="bearer token for the node server")
    parser.add_argument("--client-certificate", type=Path)
    parser.add_argument("--client-key", type=Path)
    parser.add_argument("--certificate-authority", type=Path,
                        help="CA of the server's certificate (default: "
                             "<data-dir>/pki/nodelet.crt when it exists)")
    parser.add_argument("--insecure-skip-tls-verify", action="store_true")


def _credentials(args: argparse.Namespace) -> nc.Credentials:
    ca = args.certificate_authority
    if ca is None and (args.data_dir / "pki" / "nodelet.crt").is_file():
        ca = args.data_dir / "pki" / "nodelet.crt"
    token = args.token_file.read_text().strip() if args.token_file else None
    if token is None and args.client_certificate is None:
        token = _node_local_token(args.data_dir)
    return nc.Credentials(token=token, client_cert=args.client_certificate,
                          client_key=args.client_key, ca_file=ca,
                          insecure=args.insecure_skip_tls_verify)


def _node_local_token(data_dir: Path) -> str | None:
    """The running agent's node-local token, when this user may read it (root)."""
    try:
        return servingcerts.local_token_path(data_dir).read_text().strip() or None
    except OSError:
        return None


async def _pod(client: nc.NodeClient, args: argparse.Namespace) -> tuple[str, str]:
    namespace, name, _ = await _find(client, args)
    return namespace, name


async def _find(client: nc.NodeClient, args: argparse.Namespace,
                kind: str = "") -> tuple[str, str, str]:
    """The pod's namespace and name, and the container to use: the one named, else (as
    kubectl) the first, saying so when there are others. For an exec or attach (`kind`),
    kubectl's checks first: a completed pod, or a container the pod does not have, is a
    CommandError in kubectl's words."""
    pod = presenting.find_pod(await client.get_json("/pods"), args.pod, args.namespace)
    if pod is None:
        raise CommandError(f'pods "{args.pod}" not found')
    meta, spec = pod["metadata"], pod.get("spec", {})
    phase = pod.get("status", {}).get("phase")
    if kind in _COMPLETED and phase in ("Succeeded", "Failed"):
        raise CommandError(_COMPLETED[kind].format(phase))
    container = getattr(args, "container", "")
    names = [str(c.get("name")) for c in spec.get("containers", [])]
    others = [str(c.get("name")) for c in
              [*spec.get("ephemeralContainers", []), *spec.get("initContainers", [])]]
    if container and kind and container not in names + others:
        raise CommandError(f"container {container} is not valid for pod {meta['name']} out "
                           f"of: {_all_containers(spec)}")
    if not container and names:
        container = names[0]
        if len(names) > 1 or others:
            print(f'Defaulted container "{container}" out of: {_all_containers(spec)}',
                  file=sys.stderr)
    return str(meta.get("namespace", "default")), str(meta["name"]), container


def _all_containers(spec: dict[str, Any]) -> str:
    """kubectl's list of a pod's containers: `main, debugger (ephem), setup (init)`."""
    return ", ".join([str(c.get("name")) for c in spec.get("containers", [])]
                     + [f"{c.get('name')} (ephem)" for c in spec.get("ephemeralContainers", [])]
                     + [f"{c.get('name')} (init)" for c in spec.get("initContainers", [])])


# -- exec / attach --------------------------------------------------------------------------------


def cmd_exec(args: argparse.Namespace) -> int:
    command = args.exec_command
    if not command:
        raise CommandError("exec needs a command after --, e.g. nodelet exec POD -- sh")
    return asyncio.run(_stream(args, "exec", command))


def cmd_attach(args: argparse.Namespace) -> int:
    return asyncio.run(_stream(args, "attach", []))


async def _stream(args: argparse.Namespace, kind: str, command: list[str]) -> int:
    use_tty = args.tty and sys.stdin.isatty()
    async with nc.NodeClient(args.node_server, _credentials(args)) as client:
        namespace, name, container = await _find(client, args, kind)
        options = nc.CommandOptions(command=tuple(command), stdin=args.stdin, tty=use_tty,
                                    size=_terminal_size() if use_tty else None)
        path = nc.pod_path(kind, namespace, name, container)
        async with client.remote_command(path, options, _write) as session:
            with _raw_terminal(use_tty):
                result = await _interact(session, stdin=args.stdin, use_tty=use_tty)
    if result.message:  # the command did not run, or failed without an exit code
        print(f"Error: {result.message}", file=sys.stderr)
    return result.code


def _write(channel: int, data: bytes) -> None:
    out = sys.stderr.buffer if channel == nc.STDERR else sys.stdout.buffer
    out.write(data)
    out.flush()


def _terminal_size() -> tuple[int, int] | None:
    """The local terminal's (columns, rows); None when stdin is no terminal."""
    try:
        size = os.get_terminal_size(sys.stdin.fileno())
    except OSError:
        return None
    return size.columns, size.lines


async def _interact(session: nc.RemoteCommand, *, stdin: bool, use_tty: bool) -> nc.Exit:
    """stdin (with `stdin`) and the terminal's new sizes (with `use_tty`) to the session
    until it ends; how the command ended."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    def start(coro: Any, name: str) -> None:
        task = loop.create_task(coro, name=name)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def resize() -> None:
        size = _terminal_size()
        if size is not None:
            start(session.resize(*size), "exec-resize")

    if use_tty:
        loop.add_signal_handler(signal.SIGWINCH, resize)
    if stdin:
        start(_send_stdin(session), "exec-stdin")
    try:
        return await session.run()
    finally:
        if use_tty:
            loop.remove_signal_handler(signal.SIGWINCH)
        for task in tasks:
            task.cancel()
        # The senders swallow a closed connection; a cancelled one has nothing to report.
        await asyncio.gather(*tasks, return_exceptions=True)


async def _send_stdin(session: nc.RemoteCommand) -> None:
    """stdin to the command, then its end (kubectl closes the remote stdin once its copy
    ends). An unreadable stdin (a terminal hung up: EIO) ends as well."""
    with contextlib.suppress(OSError):
        async for chunk in _stdin_chunks(sys.stdin.fileno()):
            await session.send_stdin(chunk)
    await session.close_stdin()


async def _stdin_chunks(fd: int) -> AsyncIterator[bytes]:
    """What `fd` gives, as it comes, until its end. A pipe or terminal is read when the event
    loop sees it readable; a regular file or /dev/null, which epoll refuses (EPERM) and whose
    reads never wait, is read straight on."""
    loop = asyncio.get_running_loop()
    watched = True
    while True:
        if watched:
            try:
                await _readable(loop, fd)
            except PermissionError:
                watched = False
        if not (data := os.read(fd, STDIN_CHUNK)):
            return
        yield data


async def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Once `fd` can be read without waiting (one read at a time: a command that reads
    slower than stdin comes holds stdin back rather than the memory growing)."""
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


@contextlib.contextmanager
def _raw_terminal(enabled: bool) -> Iterator[None]:
    """The local terminal in raw mode (keys go to the container unchanged), restored after."""
    if not enabled:
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


# -- port-forward ---------------------------------------------------------------------------------


def _port_pairs(specs: list[str]) -> list[tuple[int, int]]:
    pairs = []
    for spec in specs:
        local, _, remote = spec.rpartition(":")
        local = local or remote
        if not (local.isdigit() and remote.isdigit()) or not 0 < int(remote) < 65536:
            raise CommandError(f"port-forward: {spec!r} is not [LOCAL:]REMOTE")
        pairs.append((int(local), int(remote)))
    return pairs


def cmd_port_forward(args: argparse.Namespace) -> int:
    pairs = _port_pairs(args.ports)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_port_forward(args, pairs))
    return 0


async def _port_forward(args: argparse.Namespace, pairs: list[tuple[int, int]]) -> None:
    async with nc.NodeClient(args.node_server, _credentials(args)) as client:
        namespace, name = await _pod(client, args)
        path = nc.pod_path("portForward", namespace, name)
        servers = []
        for local, remote in pairs:
            def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      remote: int = remote) -> Any:
                return _forward_one(client, path, remote, reader, writer)

            server = await asyncio.start_server(serve, args.address, local)
            bound = server.sockets[0].getsockname()[1]
            print(f"Forwarding from {args.address}:{bound} -> {remote}", flush=True)
            servers.append(server)
        try:
            await asyncio.Event().wait()  # until interrupted
        finally:
            for server in servers:
                server.close()


async def _forward_one(client: nc.NodeClient, path: str, remote: int,
                       reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    print(f"Handling connection for {remote}", flush=True)
    try:
        await nc.forward_connection(client, path, remote, reader, writer)
    except nc.NodeClientError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)


# -- top ------------------------------------------------------------------------------------------


def cmd_top(args: argparse.Namespace) -> int:
    body = asyncio.run(_summary(args))
    if args.resource in ("node", "nodes", "no"):
        print(top_node_table(body))
    else:
        print(top_pods_table(body, args.namespace))
    return 0


def _has_rates(body: dict[str, Any]) -> bool:
    entries = [body["node"], *(c for p in body.get("pods", []) for c in p.get("containers", []))]
    return all("usageNanoCores" in e.get("cpu", {}) for e in entries)


async def _summary(args: argparse.Namespace) -> dict[str, Any]:
    async with nc.NodeClient(args.node_server, _credentials(args)) as client:
        body: dict[str, Any] = await client.get_json("/stats/summary")
        if not _has_rates(body):
            await asyncio.sleep(RATE_WINDOW)  # a CPU rate needs a second sample
            body = await client.get_json("/stats/summary")
        return body


def top_pods_table(body: dict[str, Any], namespace: str | None) -> str:
    """`kubectl top pods`: NAME CPU(cores) MEMORY(bytes), the pods' containers summed."""
    rows = [("NAME", "CPU(cores)", "MEMORY(bytes)")]
    for pod in body.get("pods", []):
        ref = pod["podRef"]
        if namespace is not None and ref["namespace"] != namespace:
            continue
        containers = pod.get("containers", [])
        cpu = [c.get("cpu", {}).get("usageNanoCores") for c in containers]
        memory = [c.get("memory", {}).get("workingSetBytes") for c in containers]
        rows.append((ref["name"],
                     sm.cores_text(None if None in cpu else sum(int(v or 0) for v in cpu)),
                     sm.bytes_text(None if None in memory else
                                   sum(int(v or 0) for v in memory))))
    return _table(rows)


def top_node_table(body: dict[str, Any]) -> str:
    node = body["node"]
    rows = [("NAME", "CPU(cores)", "MEMORY(bytes)"),
            (node["nodeName"], sm.cores_text(node.get("cpu", {}).get("usageNanoCores")),
             sm.bytes_text(node.get("memory", {}).get("workingSetBytes")))]
    return _table(rows)


def _table(rows: list[tuple[str, str, str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


HANDLERS = {"exec": cmd_exec, "attach": cmd_attach, "port-forward": cmd_port_forward,
            "top": cmd_top}
ERRORS = (CommandError, nc.NodeClientError)
