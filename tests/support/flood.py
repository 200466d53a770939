"""A connection flood against a TCP port, run as its own process (so its CPU is not the
tested agent's event loop): `python tests/support/flood.py HOST PORT --sources 127.0.0.2,...
--per-source N [--half-open-share F] [--reconnect S]`.

It opens N connections from each source address and holds them: idle ones send nothing, half-open
ones send the start of a TLS ClientHello that announces more bytes than ever come. Each
connection the server closes is opened again after `--reconnect` seconds (what an attacker does
to keep them). Every 0.5 s, and at the end (SIGTERM or stdin closed), it prints one JSON line:
`{"open": ..., "opened": ..., "closed_by_server": ..., "failed": ...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import sys

# A TLS record header (handshake, TLS 1.0 record version, 512 bytes) and the start of a
# ClientHello that claims 508 more bytes, then nothing.
HALF_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(24)


class Flood:
    def __init__(self, host: str, port: int, reconnect: float) -> None:
        self.host, self.port, self.reconnect = host, port, reconnect
        self.open = self.opened = self.closed_by_server = self.failed = 0
        self.stopping = asyncio.Event()

    async def hold(self, source: str, half_open: bool) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopping.is_set():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.bind((source, 0))
                await loop.sock_connect(sock, (self.host, self.port))
            except OSError:
                sock.close()
                self.failed += 1
                await asyncio.sleep(max(self.reconnect, 0.05))
                continue
            self.opened += 1
            self.open += 1
            try:
                if half_open:
                    await loop.sock_sendall(sock, HALF_HELLO)
                closed = loop.create_task(loop.sock_recv(sock, 1024))
                stop = loop.create_task(self.stopping.wait())
                await asyncio.wait({closed, stop}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if closed.done():
                    self.closed_by_server += 1
                    closed.exception()  # a reset is a close too
                else:
                    closed.cancel()
            except OSError:
                self.closed_by_server += 1
            finally:
                self.open -= 1
                sock.close()
            await asyncio.sleep(self.reconnect)

    def report(self) -> None:
        try:
            print(json.dumps({"open": self.open, "opened": self.opened,
                              "closed_by_server": self.closed_by_server,
                              "failed": self.failed}), flush=True)
        except BrokenPipeError:  # the test went away first
            self.stopping.set()

    async def reports(self) -> None:
        while not self.stopping.is_set():
            self.report()
            await asyncio.sleep(0.5)


async def main(args: argparse.Namespace) -> None:
    flood = Flood(args.host, args.port, args.reconnect)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, flood.stopping.set)
    loop.add_reader(sys.stdin.fileno(), lambda: os.read(sys.stdin.fileno(), 1024)
                    or flood.stopping.set())
    sources = args.sources.split(",")
    half = int(args.per_source * args.half_open_share)
    tasks = [loop.create_task(flood.hold(source, n < half))
             for source in sources for n in range(args.per_source)]
    reporter = loop.create_task(flood.reports())
    await flood.stopping.wait()
    await asyncio.gather(*tasks, return_exceptions=True)
    reporter.cancel()
    flood.report()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--sources", required=True)
    parser.add_argument("--per-source", type=int, required=True)
    parser.add_argument("--half-open-share", type=float, default=0.5)
    parser.add_argument("--reconnect", type=float, default=0.0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main(parser.parse_args()))
