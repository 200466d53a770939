"""Hostile manifests on a real agent: alias and nesting bombs and a 50 MB file are refused
(named in /manifests with their limit, logged once) without the agent's memory growing, and
manifests written afterwards still run; a crashed manifest source is restarted while /healthz
fails; pods, ConfigMaps and Secrets defined twice are refused in both files until one goes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from conftest import Instance
from nodelet.model.core import health
from nodelet.model.core import status as st
from nodelet.model.parsing import manifests
from nodelet.services.sources import sources
from support.harness import Harness, all_ready, exec_in, pod_manifest
from support.polling import eventually

pytestmark = pytest.mark.runtime

MIB = 1024 * 1024
# The in-process agent (and pytest) may grow by this much while refusing the hostile files;
# without the limits the alias bomb alone reached 4.9 GB and the 50 MB file ~800 MB.
MAX_PEAK_GROWTH = 50 * MIB


def proc_status_bytes(field: str) -> int:
    """A `kB` field of /proc/self/status (VmRSS, VmHWM), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"{field} not in /proc/self/status")


def reset_peak_rss() -> None:
    """Start VmHWM over from the current RSS (Linux 4.0+), so the peak measures this test."""
    Path("/proc/self/clear_refs").write_text("5")


def alias_bomb() -> str:
    """870 bytes: nine levels of anchors, each a list of nine aliases of the one before."""
    lines = ["apiVersion: v1", "kind: Pod", "metadata: {name: bomb}", "spec:",
             "  containers: [{name: c, image: localhost/nodelet/busybox:latest}]",
             "  affinity:",
             '    a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        lines.append(f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    lines.append("    nodeAffinity: *a8")
    return "\n".join(lines) + "\n"


def nesting_bomb(levels: int = 500) -> str:
    body = "".join("  " * (i + 2) + "a:\n" for i in range(levels))
    return ("apiVersion: v1\nkind: Pod\nmetadata: {name: deep}\nspec:\n  affinity:\n"
            + body + "  " * (levels + 2) + "b: 1\n")


def write_big(directory: Path, filename: str, size: int) -> None:
    """A `size`-byte ConfigMap, written in 1 MiB chunks (the test process never holds it
    whole) and renamed into place, so the poller never sees half of it."""
    tmp = directory / f".{filename}.tmp"
    chunk = ("  k: " + "x" * (MIB - 6) + "\n").encode()
    with tmp.open("wb") as out:
        out.write(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n")
        for _ in range(size // MIB):
            out.write(chunk)
    tmp.rename(directory / filename)


def reports_of(agent: Harness) -> dict[str, list[health.ManifestReport]]:
    found: dict[str, list[health.ManifestReport]] = {}
    for report in agent.agent_or_fail().manifests():
        found.setdefault(Path(report.file).name, []).append(report)
    return found


def errors_of(agent: Harness, filename: str) -> list[str]:
    return [r.error for r in reports_of(agent).get(filename, []) if not r.ok]


class LoopLag:
    """The longest the event loop was late for a 10 ms tick (measured, not asserted)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            self.worst = max(self.worst, time.monotonic() - before - 0.01)

    def __enter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._tick(), name="loop-lag")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


HOSTILE: dict[str, tuple[Callable[[Harness], None], str]] = {
    "alias.yaml": (lambda a: a.write("alias.yaml", alias_bomb()),
                   "refused: YAML aliases expand this file by more than 100000 nodes"),
    "deep.yaml": (lambda a: a.write("deep.yaml", nesting_bomb()),
                  "refused: mappings and lists nested more than 100 levels deep"),
    "deep.json": (lambda a: a.write("deep.json", '{"a": ' * 500 + "1" + "}" * 500),
                  "refused: mappings and lists nested more than 100 levels deep"),
    "big.yaml": (lambda a: write_big(a.manifests, "big.yaml", 50 * MIB),
                 f"refused: the file is {50 * MIB + 59} bytes, over the limit of 10485760 "
                 "bytes"),
}


async def test_hostile_files_are_refused_without_growing_memory_and_later_manifests_run(
    agent: Harness, caplog: pytest.LogCaptureFixture,
) -> None:
    assert len(alias_bomb()) < 1000
    caplog.set_level(logging.ERROR, logger=sources.__name__)
    reset_peak_rss()
    rss_before = proc_status_bytes("VmRSS")
    with LoopLag() as lag:
        for filename, (write, message) in HOSTILE.items():
            began = time.monotonic()
            await asyncio.to_thread(write, agent)  # the loop lag is the agent's, not ours
            errors = await eventually(lambda f=filename: errors_of(agent, f), within=10,
                                      what=f"{filename} refused")
            print(f"{filename}: refused {time.monotonic() - began:.3f}s after the write")
            assert message in errors[0], errors
    peak = proc_status_bytes("VmHWM")
    print(f"RSS before {rss_before / MIB:.1f} MiB, peak {peak / MIB:.1f} MiB, "
          f"worst loop lag {lag.worst * 1000:.0f} ms")
    assert peak - rss_before < MAX_PEAK_GROWTH, (rss_before, peak)
    assert "manifest_limits.max_bytes" in errors_of(agent, "big.yaml")[0]

    agent.write("after.yaml", pod_manifest("after"))
    await agent.wait_status("after", all_ready, what="a manifest written afterwards Ready")
    assert health.healthy(agent.agent_or_fail().health())
    for filename in HOSTILE:  # logged once, though the source published again since
        logged = [r for r in caplog.records if filename in r.getMessage()]
        assert len(logged) == 1, [r.getMessage() for r in logged]

    # An agent started with the files present starts, refuses them and keeps the pod.
    uid = agent.find("after")[0].uid  # type: ignore[index]
    await agent.stop(terminate_pods=False)
    await agent.start()
    assert all(errors_of(agent, filename) for filename in HOSTILE), reports_of(agent)
    found = await agent.wait_status("after", all_ready, what="after adopted and Ready")
    assert agent.find("after")[0].uid == uid, found  # type: ignore[index]


async def healthz(agent: Harness) -> tuple[int, str]:
    url = f"http://127.0.0.1:{agent.agent_or_fail().server_port}/healthz?verbose"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_a_crashed_manifest_source_is_restarted_and_fails_healthz_meanwhile(
    agent: Harness, monkeypatch: pytest.MonkeyPatch,
) -> None:
    faults = ["injected fault"]
    merge = sources.ManifestSource._merge

    def failing_merge(self: sources.ManifestSource, paths: list[Path]) -> sources.SourceSnapshot:
        if faults:
            raise RuntimeError(faults[0])
        return merge(self, paths)

    monkeypatch.setattr(sources.ManifestSource, "_merge", failing_merge)
    agent.write("during.yaml", pod_manifest("during"))  # the change the crash must not lose

    async def down() -> tuple[int, str] | None:
        status, text = await healthz(agent)
        return (status, text) if status == 500 else None

    _, text = await eventually(down, within=10, what="/healthz failing while the source is down")
    assert ("[-]manifest-source failed: crashed (RuntimeError: injected fault); restarting in"
            in text), text
    faults.clear()

    async def up() -> bool:
        return (await healthz(agent))[0] == 200

    await eventually(up, within=40, what="/healthz passing once the source runs again")
    await agent.wait_status("during", all_ready, what="the pod written during the crash Ready")
    assert (await healthz(agent))[1].count("[+]manifest-source ok") == 1


DUP_POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}{uid}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: localhost/nodelet/busybox:latest
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "sleep {sleep}"]
      env:
        - {{name: V, valueFrom: {{configMapKeyRef: {{name: cfg, key: k}}}}}}
"""


def dup_pod(name: str, *, sleep: int = 1000000, uid: str = "") -> str:
    return DUP_POD.format(name=name, sleep=sleep, uid=f", uid: {uid}" if uid else "")


def config_map(value: str, kind: str = "ConfigMap") -> str:
    data = "data" if kind == "ConfigMap" else "stringData"
    return f"apiVersion: v1\nkind: {kind}\nmetadata: {{name: cfg}}\n{data}: {{k: {value}}}\n"


async def test_pods_defined_twice_are_refused_in_both_files_until_one_is_removed(
    agent: Harness,
) -> None:
    agent.write("cfg.yaml", config_map("one"))
    agent.write("a.yaml", dup_pod("web"))
    await agent.wait_status("web", all_ready, what="web Ready")
    agent.write("b.yaml", dup_pod("web", sleep=999999))  # same name, another UID

    def both_refused() -> dict[str, list[str]] | None:
        found = {f: errors_of(agent, f) for f in ("a.yaml", "b.yaml")}
        return found if all(found.values()) else None

    errors = await eventually(both_refused, within=30, what="a.yaml and b.yaml both refused")
    path_a, path_b = (str(agent.manifests / f) for f in ("a.yaml", "b.yaml"))
    assert errors["a.yaml"] == [
        f"duplicate pod default/web-testnode: {path_b} has the same namespace/name; neither "
        "definition is used until all but one are removed or renamed"]
    assert errors["b.yaml"][0].startswith(f"duplicate pod default/web-testnode: {path_a} has")
    refused = [r for r in reports_of(agent)["a.yaml"] if not r.ok]
    assert refused[0].pod == "default/web-testnode" and refused[0].document == 0
    await eventually(lambda: agent.find("web") is None, within=30, what="web terminated")

    agent.remove("a.yaml")
    pod_status = await agent.wait_status("web", all_ready, what="b.yaml's web back and Ready")
    assert "999999" in str(agent.find("web")[0].spec)  # type: ignore[index]
    assert all(r.ok for r in agent.agent_or_fail().manifests()), pod_status

    # The same metadata.uid under two names: neither runs.
    agent.write("u1.yaml", dup_pod("first", uid="same-uid"))
    agent.write("u2.yaml", dup_pod("second", uid="same-uid"))
    await eventually(lambda: errors_of(agent, "u1.yaml") and errors_of(agent, "u2.yaml"),
                     within=30, what="both pods with one UID refused")
    assert "has the same UID" in errors_of(agent, "u1.yaml")[0]
    assert agent.find("first") is None and agent.find("second") is None
    agent.remove("u2.yaml")
    await agent.wait_status("first", all_ready, what="first Ready once u2.yaml is gone")


async def test_config_maps_defined_twice_are_refused_until_one_is_removed(
    agent: Harness, runtime: Instance,
) -> None:
    agent.write("one.yaml", config_map("one"))
    agent.write("two.yaml", config_map("two"))
    agent.write("secret.yaml", config_map("apart", kind="Secret"))  # another kind: no conflict
    agent.write("web.yaml", dup_pod("web"))

    def config_error(pod_status: st.PodStatus) -> bool:
        return any(isinstance(c.state, st.ContainerStateWaiting)
                   and c.state.reason == "CreateContainerConfigError"
                   and 'configmap "cfg" not found' in c.state.message
                   for c in pod_status.container_statuses)

    await agent.wait_status("web", config_error, what="the ConfigMap refused: not found")
    errors = errors_of(agent, "one.yaml")
    assert errors == [f"duplicate ConfigMap/default/cfg: {agent.manifests / 'two.yaml'} has the "
                      "same kind/namespace/name; neither definition is used until all but one "
                      "are removed or renamed"]
    assert errors_of(agent, "two.yaml") and not errors_of(agent, "secret.yaml")

    agent.remove("one.yaml")
    pod_status = await agent.wait_status("web", all_ready, what="web Ready with two.yaml's value")
    result = await exec_in(runtime.client, pod_status, "echo $V")
    assert result.stdout.strip() == b"two"


def test_hostile_texts_are_what_the_issue_describes() -> None:
    """The bombs of these tests are the ones of issue 10 (and refused by the parser alone)."""
    for text, filename in ((alias_bomb(), "a.yaml"), (nesting_bomb(), "d.yaml")):
        (problem,) = manifests.parse_documents(text, filename=filename)
        assert isinstance(problem, manifests.ManifestProblem)
