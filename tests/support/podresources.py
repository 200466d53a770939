"""The pod resources API asked through the kubelet's own client: `podresources-client`
(kube/kubernetes/podresourcesclient, kube/build.sh podresources-client), upstream's
GetV1Client and GetV1alpha1Client with each answer printed as JSON. It runs in a thread, since
the server under test may answer on the caller's event loop."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

from support import controlplane


async def ask(socket: Path, *request: str) -> subprocess.CompletedProcess[str]:
    """`request`: list, list-v1alpha1, allocatable, or get NAMESPACE NAME."""
    return await asyncio.to_thread(
        subprocess.run, [str(controlplane.binary("podresources-client")), f"--socket={socket}",
                         *request], capture_output=True, text=True, timeout=60, check=False)


async def answer(socket: Path, *request: str) -> Any:
    """The answer as JSON; the test fails with the client's error if the call failed."""
    done = await ask(socket, *request)
    assert done.returncode == 0, f"podresources-client {' '.join(request)}: {done.stderr}"
    return json.loads(done.stdout)
