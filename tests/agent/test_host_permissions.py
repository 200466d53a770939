"""Pod secrets stay root's on the host: a real non-root host user (`nobody`, through
`setpriv`) and a non-root pod with the host's `/` as a hostPath can read no pod's Secret,
ConfigMap or service account token and cannot forge its termination message, while the pod's
own non-root container reads its volumes and writes its message.

The files keep the kubelet's modes (0644 by defaultMode, 0666 for the termination message):
the data dir, `pods/` and `logs/` (0750, root's) keep other users out. The data dir starts as
an older nodelet left it (0755) and is closed at start. The agent is a node of the real
control plane, whose ServiceAccount admission gives the pod a projected token.
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.controlplane import AdminClient, pod, pod_path
from support.harness import Harness
from support.polling import eventually

pytestmark = pytest.mark.runtime

NODE = "perm-node"
NOBODY = 65534
PASSWORD = "hunter2-s3cret"
DSN = "postgres://app:pa55@db"
# The pod's own container (uid 1000) reads its Secret, ConfigMap and token, prints that it
# did, and writes its termination message; then waits.
APP = ("test \"$(cat /etc/db/password)\" = " + PASSWORD + " && test -s /etc/cfg/dsn && "
       "test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo read-all-mine; "
       "echo written-by-uid-$(id -u) > /dev/termination-log; sleep 1000000")


def as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                           "--clear-groups", "--", *command],
                          capture_output=True, text=True, timeout=10)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def snoop_command(targets: dict[str, Path], term: Path) -> str:
    """What the snooping pod tries, through its hostPath of `/`, with each result printed."""
    lines = [f"cat /host{path} >/dev/null 2>&1 && echo got-{name} || echo denied-{name}"
             for name, path in targets.items()]
    lines.append(f"(echo forged > /host{term}) 2>/dev/null && echo forged-term || "
                 "echo denied-term")
    lines.append("echo snoop-done; sleep 1000000")
    return "; ".join(lines)


def log_text(harness: Harness, namespace: str, pod: dict[str, Any]) -> str:
    directory = (harness.settings.data_dir / "logs" /
                 f"{namespace}_{pod['metadata']['name']}_{pod['metadata']['uid']}" / "main")
    try:
        return (directory / "0.log").read_text()
    except FileNotFoundError:
        return ""


async def test_another_host_user_reaches_no_pod_secret(join: Any, admin: AdminClient,
                                                       namespace: str) -> None:
    async with join(NODE, start=False) as harness:
        data = harness.settings.data_dir
        (data / "pods").mkdir(parents=True)
        for loose in (data, data / "pods"):  # as an older nodelet made them, with the umask
            os.chmod(loose, 0o755)
        await _check(admin, namespace, harness, data)


async def _check(admin: AdminClient, namespace: str, harness: Harness, data: Path) -> None:
    await admin.create(f"/api/v1/namespaces/{namespace}/secrets", {
        "metadata": {"name": "db"},
        "data": {"password": base64.b64encode(PASSWORD.encode()).decode()}})
    await admin.create(f"/api/v1/namespaces/{namespace}/configmaps",
                       {"metadata": {"name": "cfg"}, "data": {"dsn": DSN}})
    await harness.start()
    assert (mode(data), mode(data / "pods"), mode(data / "logs")) == (0o750, 0o750, 0o750)
    assert os.stat(data).st_uid == 0
    app = pod("app", node=NODE, command=APP, dnsPolicy="Default",
              securityContext={"runAsUser": 1000, "runAsGroup": 1000},
              volumes=[{"name": "db", "secret": {"secretName": "db"}},
                       {"name": "cfg", "configMap": {"name": "cfg"}}])
    app["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "db", "mountPath": "/etc/db", "readOnly": True},
        {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True}]
    app = await admin.create(pod_path(namespace), app)
    await eventually(lambda: log_text(harness, namespace, app),
                     until=lambda t: "read-all-mine" in t, within=60,
                     what="the pod's own non-root container read its volumes")

    pod_dir = data / "pods" / app["metadata"]["uid"]
    volumes = pod_dir / "volumes"
    token_volume = next((volumes / "kubernetes.io~projected").iterdir())
    targets = {"secret": volumes / "kubernetes.io~secret" / "db" / "password",
               "configmap": volumes / "kubernetes.io~configmap" / "cfg" / "dsn",
               "token": token_volume / "token",
               "log": next((data / "logs").iterdir()) / "main" / "0.log"}
    term = pod_dir / "containers" / "main" / "0"
    # The files' own modes are the kubelet's: readable (the message writable) by anyone who
    # could reach them; root reads them all.
    assert {name: mode(path) & 0o004 for name, path in targets.items() if name != "log"} == {
        "secret": 0o004, "configmap": 0o004, "token": 0o004}
    assert mode(term) == 0o666 and term.read_text() == "written-by-uid-1000\n"
    assert targets["secret"].read_text() == PASSWORD
    assert mode(pod_dir) == 0o750

    # A host user other than root: nothing is reached, not even the list of pods.
    seen = {name: as_nobody("cat", str(path)) for name, path in targets.items()}
    assert {name: r.returncode for name, r in seen.items()} == dict.fromkeys(targets, 1), seen
    assert all("Permission denied" in r.stderr and PASSWORD not in r.stdout
               for r in seen.values()), seen
    forged = as_nobody("sh", "-c", f"echo forged > {term}")
    assert forged.returncode != 0 and "Permission denied" in forged.stderr, forged
    assert term.read_text() == "written-by-uid-1000\n"
    for listed in (data, data / "pods"):
        listing = as_nobody("ls", str(listed))
        assert listing.returncode != 0 and "Permission denied" in listing.stderr, listing
    control = as_nobody("cat", "/etc/hostname")  # setpriv itself works: it is the modes
    assert control.returncode == 0, control

    # A non-root pod with the host's / mounted (as node exporters run): the same.
    snoop = pod("snoop", node=NODE, dnsPolicy="Default", command=snoop_command(targets, term),
                securityContext={"runAsUser": NOBODY, "runAsGroup": NOBODY},
                volumes=[{"name": "host", "hostPath": {"path": "/"}}])
    snoop["spec"]["containers"][0]["volumeMounts"] = [{"name": "host", "mountPath": "/host"}]
    snoop = await admin.create(pod_path(namespace), snoop)
    text = await eventually(lambda: log_text(harness, namespace, snoop),
                            until=lambda t: "snoop-done" in t, within=60,
                            what="the snooping pod's attempts")
    results = [line.rsplit(" ", 1)[-1] for line in text.splitlines() if " stdout " in line]
    assert results == [*(f"denied-{name}" for name in (*targets, "term")), "snoop-done"], text
    assert term.read_text() == "written-by-uid-1000\n"
    print(f"\nnon-root host user and hostPath pod: {len(targets)} files denied "
          f"({', '.join(targets)}), termination message not forged; modes: data dir "
          f"{mode(data):04o}, pods {mode(data / 'pods'):04o}, pod dir {mode(pod_dir):04o}, "
          f"secret {mode(targets['secret']):04o}, token {mode(targets['token']):04o}, "
          f"message {mode(term):04o}")
