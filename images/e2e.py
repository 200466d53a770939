#!/usr/bin/env python3
"""Build the images Kubernetes' e2e suite runs, under the names and tags it asks for.

    e2e.py build [--out images/out/e2e]            # one OCI archive per image
    e2e.py list                                    # what is built, and what is not (and why)

`e2e.test --list-images` names about 40 images; the [NodeConformance] tests use these (counted
in the v1.37.2 sources: busybox 86 times, agnhost 62, pause 20, the rest once or twice):

- `e2e-test-images/agnhost:2.66.1` (and `:2.55`, the suite's "previous" agnhost): agnhost built
  from `k8s.io/kubernetes/test/images/agnhost` at the pinned release (kube/build.sh agnhost),
  on the busybox base below, with what upstream's Dockerfile adds: `/agnhost-2`, `/uploads`,
  porter's `localhost.crt`/`.key`, the user `user-defined-in-image` (uid 1000) in
  `group-defined-in-image` (gid 50000), and `curl`, `bash` and netcat-openbsd's `nc` (the
  host's, with their shared libraries: tests run them in agnhost containers, `nc -u` for the
  node-to-pod UDP check; Alpine's dig, socat and iperf are not there), bash as `/bin/sh`
  (`AGNHOST_SHELL`, why there), util-linux's `nsenter` behind a wrapper (`NSENTER_WRAPPER`:
  the storage tests' hostexec pod enters the host's mount namespace through pid 1, which
  this machine does not let anyone open; the wrapper enters kthreadd's, the same one), and
  `/var/registry`
  holding `pause:testing` (the pause image below) for agnhost's `fake-registry-server`, as
  upstream's build fetches it. Both tags hold the v1.37.2
  agnhost: the module has one agnhost, not 2.55's.
- `e2e-test-images/busybox:1.37.0-2` and `:1.36.1-1`: Debian's busybox-static (1.35) with a
  link for every applet it has, where Alpine/busybox put them (`busybox --list-full`) and in
  `/bin`; its ash is `/bin/sh`, as upstream's (tests compare its messages: `/bin/sh: can't
  create /file: Read-only file system`). One difference from upstream's busybox 1.37 remains:
  Debian's ash drops environment variables whose names are not shell identifiers (`env
  data-1=x busybox sh -c env` prints no data-1), which upstream's ash imports since 1.36
  (shell/ash.c: "Used to have endofname() here ... but this breaks scenarios where people do
  want them passed to children"); Debian's 1.37 build drops them too. Debian's build has no
  `nmeter` applet, which the node suite's container lifecycle specs run to time their log
  lines (`nmeter -d0 '%3t'`): images/nmeter.c stands in for that use of it (the time with
  milliseconds; any other specifier is refused), at /usr/bin/nmeter.
- `pause:3.10.2`: images/pause.c, as upstream's pause image: `/pause`, user 65535:65535.
- `e2e-test-images/nonroot:1.5`: the busybox base with `USER 1234` (upstream: debian-base).
- `e2e-test-images/glibc-dns-testing:2.1.1`: glibc's `hostname` and dash (this host's, a
  Debian bookworm as upstream's base) on the busybox base (the hostnameOverride tests).
- `e2e-test-images/nonewprivs:1.4`: `/usr/local/bin/nnp` (k8s.io/kubernetes/test/images/
  nonewprivs, setuid root) on the busybox base, `CMD ["nnp"]`.

- `e2e-test-images/nginx:1.27.0-2`: NOT nginx — the busybox base whose default command is
  busybox's httpd serving `/usr/share/nginx/html` on port 80. The one [NodeConformance] test
  that uses it (`Pods should have their auto-restart back-off timer reset on image update`)
  switches a crashing container's image to it and keeps the container's own command; it
  needs an image that differs, not nginx. Debian has no static nginx to put in its place.

- `e2e-test-images/sample-device-plugin:1.8.0`: the node suite's sample device plugin
  (`k8s.io/kubernetes/test/images/sample-device-plugin`, kube/build.sh sample-device-plugin)
  at `/sampledeviceplugin` on the busybox base, entrypoint `-alsologtostderr` as upstream's.
  Its DaemonSet manifest names it as it is (`PRELOADED`): runs import it into the node's
  runtime instead of pushing it.

Not built (`NOT_BUILT` says why): the private registry's `k8s-authenticated-test/agnhost:2.6`,
and the images of other suites (storage drivers, node-perf, sample-apiserver...).

Each archive is named with the suite's own reference (`registry.k8s.io/...`); conformance runs
push it to a local registry under the paths of a KUBE_TEST_REPO_LIST file (`push_all`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out" / "e2e"
BUSYBOX = Path("/bin/busybox")
PAUSE = HERE / "out" / "pause"
# busybox's nmeter applet, which Debian's busybox-static lacks: the node suite's container
# lifecycle specs time every log line with `nmeter -d0 '%3t'` (images/nmeter.c, built by
# `make images`), at /usr/bin/nmeter as Alpine/busybox put it, and in /bin.
NMETER = HERE / "out" / "nmeter"
AGNHOST_SOURCE = "k8s.io/kubernetes/test/images/agnhost"

# The registries of the suite's image list (test/utils/image/manifest.go, initRegistry), by
# the key KUBE_TEST_REPO_LIST gives each one.
PROMOTER = "promoterE2eRegistry"
GC = "gcRegistry"
REGISTRIES = {
    PROMOTER: "registry.k8s.io/e2e-test-images",
    GC: "registry.k8s.io",
}

NOT_BUILT = {
    "k8s-authenticated-test/agnhost": "the private-registry image needs the registry's "
                                      "credentials of upstream's test project",
}


@dataclass(frozen=True)
class Image:
    """One test image: the registry key and path of its reference, and how to make its files."""

    registry: str  # a REGISTRIES key
    path: str  # e.g. "agnhost"
    tag: str
    archive: str  # file name under OUT
    make: Callable[[], tuple[list[build.Entry], dict[str, object]]]

    @property
    def name(self) -> str:
        return f"{REGISTRIES[self.registry]}/{self.path}:{self.tag}"

    def repo(self, prefix: str) -> str:
        """The repository path under a registry whose KUBE_TEST_REPO_LIST value ends in
        `prefix` (the part after host:port), e.g. e2e-test-images/agnhost."""
        return "/".join(p for p in (prefix.strip("/"), self.path) if p)


def kube_bin(name: str) -> Path:
    version = next(line.split("=", 1)[1].strip()
                   for line in (REPO / "kube" / "versions.env").read_text().splitlines()
                   if line.startswith("KUBE_VERSION="))
    path = REPO / "build" / "kube" / version / name
    if not os.access(path, os.X_OK):
        raise SystemExit(f"{path} is missing: run kube/build.sh {name}")
    return path


# -- the file systems ----------------------------------------------------------------------------

PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "daemon:x:1:1:daemon:/usr/sbin:/bin/false\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
)
GROUP = "root:x:0:\ndaemon:x:1:\nnogroup:x:65534:\n"


def applet_links(binary: Path) -> list[build.Entry]:
    """A link to busybox for every applet, at its --list-full path and in /bin."""
    listed = subprocess.run([str(binary), "--list-full"], check=True, capture_output=True,
                            text=True).stdout.split()
    paths = set(listed) | {f"bin/{p.rsplit('/', 1)[-1]}" for p in listed}
    paths.discard("bin/busybox")
    return [build.Entry(p, "link", 0o777, target="/bin/busybox") for p in sorted(paths)]


# agnhost's `sh`. Upstream's agnhost is Alpine's, whose busybox ash looks commands up in PATH
# and so runs netcat-openbsd's `nc` (`nc -u`, the node-to-pod UDP check); Debian's
# busybox-static ash runs its own applets first, and busybox's nc has no `-u`. The host's bash,
# as agnhost's `sh`, looks `nc` up in PATH. (The busybox image keeps busybox's ash: tests
# compare its messages.)
AGNHOST_SHELL = Path("/bin/bash")


def base_entries(*, passwd: str = PASSWD, group: str = GROUP) -> list[build.Entry]:
    dirs = ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "usr/local", "usr/local/bin", "etc",
            "root", "home", "var", "var/www", "dev", "proc", "sys")
    entries = [build.Entry(d, "dir") for d in dirs]
    entries.append(build.Entry("tmp", "dir", 0o1777))
    entries.append(build.Entry("bin/busybox", "file", 0o755, BUSYBOX.read_bytes()))
    entries += applet_links(BUSYBOX)
    entries += [build.Entry("usr/bin/nmeter", "file", 0o755, NMETER.read_bytes()),
                build.Entry("bin/nmeter", "link", 0o777, target="/usr/bin/nmeter")]
    entries += [build.Entry("etc/passwd", "file", 0o644, passwd.encode()),
                build.Entry("etc/group", "file", 0o644, group.encode())]
    return entries


# Programs of upstream's agnhost image (Alpine packages) that e2e tests run inside it and
# busybox lacks: exec hooks and probes `curl`, some commands need `bash`. Taken from this host
# (Debian's curl and bash) with the shared libraries `ldd` names, at the same paths.
HOST_PROGRAMS = (Path("/usr/bin/curl"),)
# netcat-openbsd's nc (Debian's netcat-openbsd), where Alpine's netcat-openbsd puts it: first
# in PATH, before busybox's /bin/nc.
NETCAT = Path("/bin/nc.openbsd")
# The storage tests' hostexec pod (test/e2e/storage/utils/host_exec.go: privileged, hostNetwork,
# the host's / at /rootfs) runs `nsenter --mount=/rootfs/proc/1/ns/mnt -- sh -c CMD`, so CMD
# (mkdir, mount -t tmpfs, dd, losetup, mkfs -t ext4, `losetup | grep | awk`) runs the host's
# programs in the host's mount namespace: the image needs only nsenter. util-linux's, not
# busybox's applet: Debian's static busybox runs its own ash and applets before PATH, and its
# `losetup` lists loops in another format than the one the tests parse.
NSENTER = Path("/usr/bin/nsenter")
# On these machines no process may open pid 1's namespaces (`nsenter: cannot open
# /proc/1/ns/mnt: Permission denied`, as root, on the host too: pid 1 is the VM's agent), so
# the tests' nsenter would fail on any node agent. First in PATH, this wrapper passes the
# arguments on to util-linux's nsenter, with `/proc/1/ns/mnt` made `/proc/2/ns/mnt` when pid
# 1's cannot be read: kthreadd (pid 2), whose mount namespace is the initial one, where the
# node agent and its runtime run. On a machine that lets pid 1 be read it changes nothing.
NSENTER_WRAPPER = b"""#!/bin/bash
# images/e2e.py, NSENTER_WRAPPER: pid 1's namespaces cannot be opened on these machines.
args=()
for arg in "$@"; do
  case "$arg" in
    --mount=*/proc/1/ns/mnt)
      file=${arg#--mount=}
      readlink "$file" >/dev/null 2>&1 || arg="--mount=${file%/1/ns/mnt}/2/ns/mnt" ;;
  esac
  args+=("$arg")
done
exec /usr/bin/nsenter "${args[@]}"
"""


def shared_libraries(program: Path) -> list[Path]:
    """The files `ldd` says `program` loads (its interpreter included)."""
    listed = subprocess.run(["ldd", str(program)], check=True, capture_output=True,
                            text=True).stdout
    found = []
    for line in listed.splitlines():
        words = line.split()
        path = words[2] if "=>" in words and len(words) > 2 else words[0] if words else ""
        if path.startswith("/"):
            found.append(Path(path))
    return found


def host_program_entries(programs: Iterable[Path]) -> list[build.Entry]:
    """Each program and its libraries as regular files at their paths, with parent dirs."""
    files: dict[str, bytes] = {}
    for program in programs:
        for path in (program, *shared_libraries(program)):
            files[str(path).lstrip("/")] = path.read_bytes()
    dirs = {str(parent) for name in files for parent in Path(name).parents if str(parent) != "."}
    entries = [build.Entry(d, "dir") for d in sorted(dirs)]
    return entries + [build.Entry(name, "file", 0o755, data) for name, data in files.items()]


def merged(*groups: list[build.Entry]) -> list[build.Entry]:
    """Entries by path, a later group's entry replacing an earlier one's."""
    by_path: dict[str, build.Entry] = {}
    for group in groups:
        by_path.update((e.path, e) for e in group)
    return list(by_path.values())


def fake_registry_entries(files: dict[str, bytes], image: str = "pause",
                          tag: str = "testing") -> list[build.Entry]:
    """/var/registry for agnhost's fake-registry-server: `image:tag` laid out as upstream's
    prepare_registry.sh does (a tag file naming the index's digest, manifests and blobs at
    `<sha256>/<2 hex>/<hex>/data`), from an OCI layout (`files` by path, as images/build.py
    writes it). The suite's private-registry tests pull `localhost:5000/pause:testing` from it."""
    def at(kind: str, digest_: str) -> str:
        hex_ = digest_.split(":", 1)[1]
        return f"var/registry/{image}/{kind}/sha256/{hex_[:2]}/{hex_}/data"

    index = files["index.json"]
    blobs: dict[str, bytes] = {at("manifests", build.digest(index)): index}
    for descriptor in json.loads(index)["manifests"]:
        manifest = files[f"blobs/sha256/{descriptor['digest'].split(':')[1]}"]
        blobs[at("manifests", descriptor["digest"])] = manifest
        parsed = json.loads(manifest)
        for blob in (parsed["config"], *parsed["layers"]):
            blobs[at("blobs", blob["digest"])] = files[
                f"blobs/sha256/{blob['digest'].split(':')[1]}"]
    blobs[f"var/registry/{image}/manifests/{tag}"] = build.digest(index).encode() + b"\n"
    dirs = {str(p) for name in blobs for p in Path(name).parents if str(p) not in (".", "var")}
    return [build.Entry(d, "dir") for d in sorted(dirs)] + [
        build.Entry(name, "file", 0o644, data) for name, data in blobs.items()]


def busybox() -> tuple[list[build.Entry], dict[str, object]]:
    return base_entries(), {"Cmd": ["sh"], "Env": [build.PATH_ENV]}


def agnhost() -> tuple[list[build.Entry], dict[str, object]]:
    source = module_dir() / "test" / "images" / "agnhost"
    entries = base_entries(
        passwd=PASSWD + "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n",
        group=GROUP + "user-defined-in-image:x:1000:\n"
                      "group-defined-in-image:x:50000:user-defined-in-image\n")
    netcat = [build.Entry("usr/bin/nc", "file", 0o755, NETCAT.read_bytes()),
              build.Entry("bin/sh", "link", 0o777, target=AGNHOST_SHELL.name),
              build.Entry("usr/local/bin/nsenter", "file", 0o755, NSENTER_WRAPPER)]
    programs = (*HOST_PROGRAMS, AGNHOST_SHELL, NETCAT, NSENTER)
    entries = merged(entries, host_program_entries(programs), netcat)
    pause_entries, pause_config = pause()
    pause_files = build.layout_files("registry.k8s.io/pause:testing", pause_entries, pause_config)
    entries += fake_registry_entries(pause_files)
    entries += [
        build.Entry("agnhost", "file", 0o755, kube_bin("agnhost").read_bytes()),
        build.Entry("agnhost-2", "link", 0o777, target="agnhost"),
        build.Entry("uploads", "dir"),
        build.Entry("home/user-defined-in-image", "dir"),
        build.Entry("localhost.crt", "file", 0o644, (source / "porter/localhost.crt").read_bytes()),
        build.Entry("localhost.key", "file", 0o644, (source / "porter/localhost.key").read_bytes()),
    ]
    return entries, {"Entrypoint": ["/agnhost"], "Cmd": ["pause"], "Env": [build.PATH_ENV],
                     "ExposedPorts": {f"{p}/tcp": {} for p in (80, 8080, 8081, 9376, 5000)}}


def glibc_dns_testing() -> tuple[list[build.Entry], dict[str, object]]:
    """Upstream's is debian:bookworm-slim with dnsutils: tests run glibc's `hostname -f`
    under dash. Here: the busybox base with this host's (Debian bookworm) dash as /bin/sh and
    hostname, with their libraries, and an nsswitch.conf that reads /etc/hosts first."""
    nsswitch = build.Entry("etc/nsswitch.conf", "file", 0o644, b"hosts: files dns\n")
    programs = host_program_entries((Path("/bin/dash"), Path("/bin/hostname")))
    shell = build.Entry("bin/sh", "link", 0o777, target="dash")
    return merged(base_entries(), programs, [shell, nsswitch]), {
        "Cmd": ["sh"], "Env": [build.PATH_ENV]}


def pause() -> tuple[list[build.Entry], dict[str, object]]:
    return build.pause_entries(PAUSE), {"Entrypoint": ["/pause"], "User": "65535:65535",
                                        "Env": [build.PATH_ENV]}


def nonroot() -> tuple[list[build.Entry], dict[str, object]]:
    return base_entries(), {"Cmd": ["sh"], "User": "1234", "Env": [build.PATH_ENV]}


def nginx() -> tuple[list[build.Entry], dict[str, object]]:
    """A stand-in, not nginx (see the module docstring): busybox's httpd on port 80."""
    page = b"<html><body><h1>nginx stand-in (busybox httpd)</h1></body></html>\n"
    entries = [*base_entries(), build.Entry("usr/share", "dir"),
               build.Entry("usr/share/nginx", "dir"), build.Entry("usr/share/nginx/html", "dir"),
               build.Entry("usr/share/nginx/html/index.html", "file", 0o644, page)]
    return entries, {"Cmd": ["httpd", "-f", "-p", "80", "-h", "/usr/share/nginx/html"],
                     "Env": [build.PATH_ENV], "ExposedPorts": {"80/tcp": {}}}


def nonewprivs() -> tuple[list[build.Entry], dict[str, object]]:
    entries = base_entries()
    entries.append(build.Entry("usr/local/bin/nnp", "file", 0o4755, kube_bin("nnp").read_bytes()))
    return entries, {"Cmd": ["nnp"], "Env": [build.PATH_ENV]}


def sample_device_plugin() -> tuple[list[build.Entry], dict[str, object]]:
    """The node suite's sample device plugin (kube/build.sh sample-device-plugin) as upstream's
    image has it: `/sampledeviceplugin`, run with `-alsologtostderr`."""
    entries = base_entries()
    entries.append(build.Entry("sampledeviceplugin", "file", 0o755,
                               kube_bin("sample-device-plugin").read_bytes()))
    return entries, {"Entrypoint": ["/sampledeviceplugin", "-alsologtostderr"],
                     "Env": [build.PATH_ENV]}


def module_dir() -> Path:
    """k8s.io/kubernetes's source in the Go module cache (kube/kubernetes pins it)."""
    done = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"],
                          cwd=REPO / "kube" / "kubernetes", check=True, capture_output=True,
                          text=True, env={**os.environ, "GOTOOLCHAIN": "local",
                                          "GOFLAGS": "-mod=mod"})
    return Path(done.stdout.strip())


IMAGES = (
    Image(PROMOTER, "agnhost", "2.66.1", "agnhost.tar", agnhost),
    Image(PROMOTER, "agnhost", "2.55", "agnhost.tar", agnhost),
    Image(PROMOTER, "busybox", "1.37.0-2", "busybox.tar", busybox),
    Image(PROMOTER, "busybox", "1.36.1-1", "busybox.tar", busybox),
    Image(PROMOTER, "nonroot", "1.5", "nonroot.tar", nonroot),
    Image(PROMOTER, "nonewprivs", "1.4", "nonewprivs.tar", nonewprivs),
    Image(GC, "pause", "3.10.2", "pause.tar", pause),
    Image(PROMOTER, "glibc-dns-testing", "2.1.1", "glibc-dns-testing.tar", glibc_dns_testing),
    Image(PROMOTER, "nginx", "1.27.0-2", "nginx.tar", nginx),
)

# Images a suite names in its manifests as they are, which KUBE_TEST_REPO_LIST does not move
# (the node suite's sample device plugin DaemonSet): a run imports them into the node's
# runtime under that name before the suite starts, as upstream's node e2e pre-pulls its images.
PRELOADED = (
    Image(PROMOTER, "sample-device-plugin", "1.8.0", "sample-device-plugin.tar",
          sample_device_plugin),
)


# -- building and pushing ------------------------------------------------------------------------


def build_all(out: Path = OUT) -> dict[str, Path]:
    """Write each archive (one per distinct file system) that is missing; {archive: path}."""
    done: dict[str, Path] = {}
    for image in (*IMAGES, *PRELOADED):
        path = out / image.archive
        if image.archive not in done and _stale(path):
            entries, config = image.make()
            build.write_archive(build.layout_files(image.name, entries, config), path)
            print(f"{path}: {image.name}")
        done[image.archive] = path
    return done


def _stale(archive: Path) -> bool:
    """Missing, or older than this script, images/build.py or the programs built for the
    images (what decides its contents)."""
    inputs = (Path(__file__), HERE / "build.py", PAUSE, NMETER)
    return not archive.exists() or archive.stat().st_mtime < max(p.stat().st_mtime
                                                                 for p in inputs)


def repo_list(registry_host: str) -> dict[str, str]:
    """KUBE_TEST_REPO_LIST for a local registry: every suite registry moved under it (the
    invalid one to a path nothing is pushed to, so its pulls fail as the suite expects)."""
    return {
        PROMOTER: f"{registry_host}/e2e-test-images",
        "buildImageRegistry": f"{registry_host}/build-image",
        GC: registry_host,
        "gcEtcdRegistry": registry_host,
        "sigStorageRegistry": f"{registry_host}/sig-storage",
        "privateRegistry": f"{registry_host}/k8s-authenticated-test",
        "dockerLibraryRegistry": f"{registry_host}/library",
        "cloudProviderGcpRegistry": f"{registry_host}/cloud-provider-gcp",
        "invalidRegistry": f"{registry_host}/invalid",
    }


def push_all(push: Callable[[Path, str, str], object], registry_host: str,
             images: Iterable[Image] = IMAGES, out: Path = OUT) -> list[str]:
    """Build what is missing and push every image with `push(archive, repo, tag)` under the
    paths `repo_list(registry_host)` gives; returns the pushed references."""
    archives = build_all(out)
    moved = repo_list(registry_host)
    pushed = []
    for image in images:
        prefix = moved[image.registry].removeprefix(registry_host)
        push(archives[image.archive], image.repo(prefix), image.tag)
        pushed.append(f"{registry_host}/{image.repo(prefix)}:{image.tag}")
    return pushed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "list"])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.command == "build":
        build_all(args.out)
        return 0
    for image in IMAGES:
        print(f"built      {image.name}  ({args.out / image.archive})")
    for image in PRELOADED:
        print(f"built      {image.name}  ({args.out / image.archive}; imported, not pushed)")
    for path, why in NOT_BUILT.items():
        print(f"not built  {path}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
