"""nodelet's places on the host (adapters/hostdirs.py) on real directories: made and fixed
at every start to the kubelet's modes and root's ownership, symlinks planted by another user
refused, the directories above the data dir that another user could swap named."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nodelet.adapters import hostdirs

NOBODY = 65534


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def owner(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_uid, info.st_gid


def test_a_new_data_dir_gets_the_kubelet_modes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    old = os.umask(0o022)
    try:
        assert hostdirs.secure_data_dir(data) == []  # made so, nothing to fix
    finally:
        os.umask(old)
    assert {p: mode(data / p) for p in ("", "pods", "logs", "pki")} == {
        "": 0o750, "pods": 0o750, "logs": 0o750, "pki": 0o700}
    assert owner(data) == owner(data / "pods") == hostdirs.owner()


def test_an_existing_data_dir_is_fixed_at_every_start(tmp_path: Path) -> None:
    """What an older nodelet left (the umask's 0755), or a data dir a user made and owns."""
    data = tmp_path / "data"
    (data / "pods" / "uid-1").mkdir(parents=True)
    (data / "logs").mkdir()
    for path, wide in ((data, 0o777), (data / "pods", 0o755), (data / "pods" / "uid-1", 0o755),
                       (data / "logs", 0o755)):
        os.chmod(path, wide)
    os.chown(data, NOBODY, NOBODY)
    changes = hostdirs.secure_data_dir(data)
    assert {(c.path, c.mode, c.uid, c.made) for c in changes} == {
        (data, 0o777, NOBODY, 0o750), (data / "pods", 0o755, 0, 0o750),
        (data / "pods" / "uid-1", 0o755, 0, 0o750), (data / "logs", 0o755, 0, 0o750)}
    assert owner(data) == hostdirs.owner() and mode(data) == 0o750
    assert mode(data / "pods" / "uid-1") == 0o750
    assert hostdirs.secure_data_dir(data) == []  # and then it stays so


def test_a_symlink_planted_by_another_user_is_refused(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    elsewhere.mkdir(mode=0o755)
    os.chmod(elsewhere, 0o755)
    (data / "logs").symlink_to(elsewhere)
    os.lchown(data / "logs", NOBODY, NOBODY)
    with pytest.raises(hostdirs.HostDirError, match="symlink owned by uid 65534"):
        hostdirs.secure_data_dir(data)
    assert mode(elsewhere) == 0o755  # never chmod-ed through the link
    # One root made (logs on another disk) is followed.
    os.lchown(data / "logs", 0, 0)
    hostdirs.secure_data_dir(data)
    assert mode(elsewhere) == 0o750
    (data / "pods" / "x").touch()
    (data / "pods" / "x").rename(data / "pods" / "not-a-dir")
    assert hostdirs.secure_data_dir(data) == []  # files in pods/ are not pod directories


def test_a_path_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pods").touch()
    with pytest.raises((hostdirs.HostDirError, FileExistsError)):
        hostdirs.secure_dir(tmp_path / "pods")


def test_the_checkpoint_files_become_private(tmp_path: Path) -> None:
    db = tmp_path / "checkpoint.db"
    db.touch(mode=0o644)
    os.chmod(db, 0o644)
    changes = hostdirs.secure_files((db, tmp_path / "checkpoint.db-wal"))
    assert [(c.path, c.mode, c.made) for c in changes] == [(db, 0o644, 0o600)]
    assert mode(db) == 0o600


def test_pod_directories_are_0750_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        made = hostdirs.pod_dir(tmp_path, "uid-2")
    finally:
        os.umask(old)
    assert made == tmp_path / "uid-2" and mode(made) == 0o750
    assert hostdirs.pod_dir(tmp_path, "uid-2") == made  # an existing one is left as it is


def test_directories_another_user_could_swap_are_named(tmp_path: Path) -> None:
    shared, owned = tmp_path / "shared", tmp_path / "owned"
    (shared / "data").mkdir(parents=True)
    os.chmod(shared, 0o777)
    (owned / "data").mkdir(parents=True)
    os.chown(owned, NOBODY, NOBODY)
    assert hostdirs.exposed_ancestors(shared / "data")[0] == f"{shared} (mode 0777, no sticky bit)"
    assert hostdirs.exposed_ancestors(owned / "data")[0] == f"{owned} (owned by uid {NOBODY})"
    os.chmod(shared, 0o1777)  # sticky, as /tmp: only the owner may rename what is in it
    assert hostdirs.exposed_ancestors(shared / "data") == hostdirs.exposed_ancestors(tmp_path)
