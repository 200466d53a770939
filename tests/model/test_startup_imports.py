"""What `nodelet run` loads at start-up (`nodelet.cli` and `nodelet.app`), read in a fresh
interpreter: none of what only some nodes or only the CLI tools use. Each of these costs the
agent memory for all its life (cryptography and its OpenSSL state ~11 MiB; see
docs/benchmarks.md, "Peak RSS"), so each loads where it is used."""

from __future__ import annotations

import json
import subprocess
import sys

# Loaded only when used: a client CA file (cryptography), the progress lines (rich), the
# read-only CLI commands, the web UI, the analysis of dumps, and cluster mode.
NOT_AT_START = (
    "cryptography",
    "rich",
    "nodelet.readcommands",
    "nodelet.adapters.clientcas",
    "nodelet.adapters.web",
    "nodelet.adapters.kube",
    "nodelet.services.analysis",
    "nodelet.services.cluster.cluster",
    "nodelet.services.sources.apisource",
)


def test_nodelet_run_loads_nothing_it_may_not_use() -> None:
    found = subprocess.run(
        [sys.executable, "-c",
         "import json, sys, nodelet.cli, nodelet.app; print(json.dumps(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True, timeout=120)
    loaded = set(json.loads(found.stdout))
    assert "nodelet.app" in loaded
    early = [name for name in NOT_AT_START
             if name in loaded or any(m.startswith(f"{name}.") for m in loaded)]
    assert early == [], f"loaded at start-up: {early}"
