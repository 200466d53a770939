"""Keys on disk: the one private-file writer (`helpers/privatefiles.py`) that the client
certificate store and the node server's self-signed pair both use — a leftover temp file's
wider mode is not kept, a symlink planted as the temp file is not followed, an existing
directory is tightened to 0700 — and the store refuses a pair whose key does not match."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nodelet.adapters import certs, servingcerts
from nodelet.helpers import privatefiles
from support.controlplane import Authority


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_leftover_temp_file_s_mode_is_not_kept(tmp_path: Path) -> None:
    target = tmp_path / "key.pem"
    leftover = tmp_path / ".key.pem.tmp"
    leftover.write_bytes(b"old")
    leftover.chmod(0o666)
    privatefiles.write(target, b"secret")
    assert target.read_bytes() == b"secret" and mode(target) == 0o600
    assert not leftover.exists()


def test_a_symlink_planted_as_the_temp_file_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "elsewhere"
    victim.write_bytes(b"untouched")
    (tmp_path / ".key.pem.tmp").symlink_to(victim)
    privatefiles.write(tmp_path / "key.pem", b"secret")
    assert victim.read_bytes() == b"untouched"
    assert not (tmp_path / "key.pem").is_symlink() and mode(tmp_path / "key.pem") == 0o600


def test_the_mode_is_exact_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        privatefiles.write(tmp_path / "cert.pem", b"public", mode=0o644)
    finally:
        os.umask(old)
    assert mode(tmp_path / "cert.pem") == 0o644


def test_the_store_tightens_its_directory_and_refuses_a_mismatched_pair(tmp_path: Path) -> None:
    directory = tmp_path / "pki"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    (tmp_path / "ca").mkdir()
    authority = Authority(tmp_path / "ca", "ca")
    issued = [authority.issue(name, "system:node:n1", orgs=("system:nodes",))
              for name in ("one", "two")]
    cert, key = issued[0].cert.read_bytes(), issued[0].key.read_bytes()
    other_key = issued[1].key.read_bytes()
    store = certs.CertStore(directory)
    with pytest.raises(certs.CertError, match="private key does not match public key"):
        store.write(cert, other_key)
    with pytest.raises(certs.CertError, match=r"not a PEM X\.509 certificate"):
        store.write(b"garbage", key)
    assert list(directory.iterdir()) == []  # nothing written
    written = store.write(cert, key)
    assert mode(directory) == 0o700 and mode(written) == 0o600
    assert store.load() == (cert, key)


def test_the_serving_key_is_written_the_same_way(tmp_path: Path) -> None:
    paths = servingcerts.self_signed_paths(tmp_path)
    paths.key.parent.mkdir(mode=0o755)
    paths.key.parent.chmod(0o755)
    leftover = paths.key.with_name(f".{paths.key.name}.tmp")
    leftover.write_bytes(b"old")
    leftover.chmod(0o666)
    servingcerts.ensure_self_signed(paths, hostname="n1", ips=["10.1.2.3"])
    assert mode(paths.key) == 0o600 and mode(paths.cert) == 0o644
    assert mode(paths.key.parent) == 0o700 and not leftover.exists()
