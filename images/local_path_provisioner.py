#!/usr/bin/env python3
"""Build the image of rancher's local-path-provisioner (the default StorageClass of
`make cluster`, as kind's) from the binary kube/build.sh built.

    local_path_provisioner.py [--out images/out/local-path-provisioner-<version>.tar]

The archive is an OCI image layout as images/build.py writes them (deterministic, named
through `io.containerd.image.name`), `localhost/nodelet/local-path-provisioner:<version>`:
upstream's image is Alpine with the static binary at `/usr/bin/local-path-provisioner`; here
the same binary on the busybox files of images/build.py (a shell for `kubectl exec`), the
command `local-path-provisioner`. The version is LOCAL_PATH_PROVISIONER_VERSION of
kube/versions.env; the binary is build/kube/local-path-provisioner-<version>/.

There is no registry on a `make cluster` node: the archive is imported into the node's
containerd (`ctr images import`, tests/support/localpath.py), and the Deployment asks for the
image with `imagePullPolicy: IfNotPresent`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUSYBOX = Path("/bin/busybox")
PROGRAM = "local-path-provisioner"


def version() -> str:
    """LOCAL_PATH_PROVISIONER_VERSION of kube/versions.env."""
    for line in (REPO / "kube" / "versions.env").read_text().splitlines():
        if line.startswith("LOCAL_PATH_PROVISIONER_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("kube/versions.env has no LOCAL_PATH_PROVISIONER_VERSION")


def image_name() -> str:
    return f"localhost/nodelet/{PROGRAM}:{version()}"


def binary() -> Path:
    path = REPO / "build" / "kube" / f"{PROGRAM}-{version()}" / PROGRAM
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is missing: run `kube/build.sh {PROGRAM}` (or `make kube`)")
    return path


def default_archive() -> Path:
    return HERE / "out" / f"{PROGRAM}-{version()}.tar"


def entries(program: Path) -> list[build.Entry]:
    """busybox's files (images/build.py) and the program in /usr/bin."""
    files = build.busybox_entries(BUSYBOX, build.available_applets(BUSYBOX))
    files += [build.Entry(d, "dir") for d in ("usr", "usr/bin")]
    files.append(build.Entry(f"usr/bin/{PROGRAM}", "file", 0o755, program.read_bytes()))
    return files


def build_archive(out: Path | None = None) -> Path:
    """Write the archive (atomically) unless it is newer than the binary; its path.
    RuntimeError naming `make kube` when the binary is missing."""
    out = out or default_archive()
    program = binary()
    if out.exists() and out.stat().st_mtime >= program.stat().st_mtime:
        return out
    config: dict[str, object] = {"Cmd": [PROGRAM], "Env": [build.PATH_ENV]}
    build.write_archive(build.layout_files(image_name(), entries(program), config), out)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="archive to write (default: images/out/"
                                                  f"{PROGRAM}-<version>.tar)")
    args = parser.parse_args(argv)
    try:
        out = build_archive(args.out)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    print(f"{out}: {image_name()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
