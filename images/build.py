#!/usr/bin/env python3
"""Build nodelet's local OCI image archives (stdlib only; the machines have no internet).

    build.py pause   --binary images/out/pause --out images/out/pause.tar
    build.py busybox --binary /bin/busybox     --out images/out/busybox.tar

Each archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) holding one
manifest for this machine's architecture, one config and one gzip layer, and is named through
the `io.containerd.image.name` annotation so that
`ctr -n k8s.io images import <archive>` registers it under the expected reference.

Builds are deterministic: fixed timestamps, owners and ordering, so an unchanged input gives a
byte-identical archive (and the same image ID) every time.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PAUSE_NAME = "localhost/nodelet/pause:1.0"
BUSYBOX_NAME = "localhost/nodelet/busybox:latest"
# A fixed time for every file and the image itself: the archives must not change between builds.
EPOCH = 946684800  # 2000-01-01T00:00:00Z
CREATED = "2000-01-01T00:00:00Z"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"

# Applets linked into the busybox image (only those the binary actually has are linked).
_APPLET_NAMES = """
    sh ash sleep echo cat ls env wget nc httpd ip true false mkdir rm rmdir touch ps kill
    grep egrep head tail date hostname id printf test [ [[ seq wc sed awk tee cp mv chmod ln
    pwd uname nslookup ping ping6 ifconfig netstat route sort uniq cut tr xargs find du df
    stat mount umount which whoami timeout usleep yes expr basename dirname readlink
    realpath mktemp nproc free top vi less more dd md5sum sha256sum base64 tar gzip gunzip
    zcat nohup traceroute telnet uptime watch
"""
BUSYBOX_APPLETS = tuple(_APPLET_NAMES.split())

ETC_FILES = {
    "etc/passwd": (
        "root:x:0:0:root:/root:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
    ),
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
    "etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
}


@dataclass(frozen=True)
class Entry:
    """One file-system entry of a layer: a directory, a regular file or a symlink."""

    path: str
    kind: str  # "dir", "file" or "link"
    mode: int = 0o755
    data: bytes = b""
    target: str = ""


def machine_arch() -> str:
    """The OCI architecture name of this machine (amd64, arm64...)."""
    machine = platform.machine().lower()
    aliases = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}
    return aliases.get(machine, machine)


def pause_entries(binary: Path) -> list[Entry]:
    return [Entry("pause", "file", 0o755, binary.read_bytes())]


def busybox_entries(binary: Path, applets: Iterable[str]) -> list[Entry]:
    """busybox, links for the applets it has, and a minimal /etc, /tmp, /root and /var/www."""
    entries = [Entry(d, "dir") for d in ("bin", "etc", "root", "var", "var/www")]
    entries.append(Entry("tmp", "dir", 0o1777))
    entries.append(Entry("bin/busybox", "file", 0o755, binary.read_bytes()))
    entries += [Entry(f"bin/{a}", "link", 0o777, target="busybox") for a in applets]
    entries += [Entry(p, "file", 0o644, text.encode()) for p, text in ETC_FILES.items()]
    return entries


def available_applets(binary: Path) -> list[str]:
    """The wanted applets that this busybox binary provides."""
    listed = subprocess.run(
        [str(binary), "--list"], check=True, capture_output=True, text=True
    ).stdout.split()
    return [a for a in BUSYBOX_APPLETS if a in set(listed)]


def _tarinfo(
    name: str, *, kind: str, mode: int, size: int = 0, target: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = {"dir": tarfile.DIRTYPE, "file": tarfile.REGTYPE, "link": tarfile.SYMTYPE}[kind]
    info.mode, info.size, info.linkname = mode, size, target
    info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "", ""
    return info


def layer_tar(entries: list[Entry]) -> bytes:
    """An uncompressed layer tar with entries in path order and fixed metadata."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in sorted(entries, key=lambda e: e.path):
            info = _tarinfo(e.path, kind=e.kind, mode=e.mode, size=len(e.data), target=e.target)
            tar.addfile(info, io.BytesIO(e.data) if e.kind == "file" else None)
    return buf.getvalue()


def gzip_bytes(data: bytes) -> bytes:
    """gzip with no name and a zero mtime in the header, so output depends only on input."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return buf.getvalue()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def image_config(diff_id: str, arch: str, config: dict[str, object]) -> bytes:
    return canonical_json(
        {
            "architecture": arch,
            "os": "linux",
            "created": CREATED,
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": CREATED, "created_by": "nodelet images/build.py"}],
        }
    )


def layout_files(name: str, entries: list[Entry], config: dict[str, object]) -> dict[str, bytes]:
    """Every file of the OCI image layout, by path inside the archive."""
    arch = machine_arch()
    raw = layer_tar(entries)
    layer = gzip_bytes(raw)
    config_blob = image_config(digest(raw), arch, config)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {"mediaType": MEDIA_CONFIG, "digest": digest(config_blob),
                       "size": len(config_blob)},
            "layers": [{"mediaType": MEDIA_LAYER, "digest": digest(layer), "size": len(layer)}],
        }
    )
    index = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                {
                    "mediaType": MEDIA_MANIFEST,
                    "digest": digest(manifest),
                    "size": len(manifest),
                    "platform": {"architecture": arch, "os": "linux"},
                    "annotations": {
                        "org.opencontainers.image.ref.name": name,
                        "io.containerd.image.name": name,
                    },
                }
            ],
        }
    )
    blobs = {f"blobs/sha256/{digest(b).split(':')[1]}": b for b in (layer, config_blob, manifest)}
    return {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}', "index.json": index, **blobs}


def write_archive(files: dict[str, bytes], out: Path) -> None:
    """Write the layout as a tar, atomically (a half-written archive never has the final name)."""
    dirs = sorted({"blobs", "blobs/sha256"})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in dirs:
            tar.addfile(_tarinfo(d, kind="dir", mode=0o755))
        for path in sorted(files):
            data = files[path]
            tar.addfile(_tarinfo(path, kind="file", mode=0o644, size=len(data)), io.BytesIO(data))
    os.replace(tmp, out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image", choices=["pause", "busybox"])
    parser.add_argument("--binary", type=Path, required=True, help="static binary to package")
    parser.add_argument("--out", type=Path, required=True, help="archive to write (.tar)")
    parser.add_argument("--name", help="image reference (default: nodelet's name for it)")
    args = parser.parse_args(argv)
    if args.image == "pause":
        name = args.name or PAUSE_NAME
        entries = pause_entries(args.binary)
        config: dict[str, object] = {"Entrypoint": ["/pause"], "Env": [PATH_ENV]}
    else:
        name = args.name or BUSYBOX_NAME
        entries = busybox_entries(args.binary, available_applets(args.binary))
        config = {"Cmd": ["sh"], "Env": [PATH_ENV]}
    write_archive(layout_files(name, entries, config), args.out)
    print(f"{args.out}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
