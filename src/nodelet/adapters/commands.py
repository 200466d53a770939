"""Running short host commands (mount, umount, ctr, runc) with a time limit."""

from __future__ import annotations

import asyncio


async def run(argv: list[str], *, limit: float) -> tuple[int, str]:
    """Run `argv`; returns (exit status, combined stdout+stderr, stripped). The command is
    killed after `limit` seconds, which reports status -1."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), limit)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return -1, f"{argv[0]} timed out after {limit:g}s"
    return proc.returncode or 0, out.decode(errors="replace").strip()
