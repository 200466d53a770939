"""The pulled-image records' life (services/podwork/pullmanager.py) on real files in a temp dir:
intents around pulls, what a restart finds, and failing safe when a file cannot be written or
read. The runtime's image list is the one seam replaced (`Images`, the ImageLister Protocol):
these cases need an earlier run that crashed mid-pull, which a live containerd cannot stage."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodelet.adapters import pullrecordfiles as files
from nodelet.model.core import pullrecords as pr
from nodelet.model.core import runtime as rt
from nodelet.services.podwork import pullmanager

IMAGE = "registry.test:5000/team/app:v1"
REF = "sha256:" + "a" * 64
SECRET = pr.PullSecret("default", "regcred", "uid-1", "hash-1")


class Images:
    def __init__(self, *images: rt.ImageInfo) -> None:
        self.images = list(images)

    async def list_images(self) -> list[rt.ImageInfo]:
        return self.images


def manager(root: Path, *images: rt.ImageInfo, policy: pr.Policy = pr.DEFAULT_POLICY
            ) -> pullmanager.PullManager:
    return pullmanager.PullManager(
        store=files.PullRecordFiles(root), verification=pr.Verification(policy),
        images=Images(*images), clock=lambda: datetime(2025, 1, 1, tzinfo=UTC))


def secrets(*found: pr.PullSecret) -> pullmanager.PodSecrets:
    async def lookup() -> list[pr.PullSecret]:
        return list(found)
    return lookup


async def test_a_pull_leaves_a_record_and_no_intent(tmp_path: Path) -> None:
    records = manager(tmp_path)
    assert await records.must_pull(IMAGE, REF, secrets()) == pr.ALLOWED_BY_POLICY  # preloaded
    await records.pulling(IMAGE)
    assert files.PullRecordFiles(tmp_path).load().intents == (IMAGE,)
    # While it is pulled, the image counts as the agent's: verified.
    assert (await records.must_pull(IMAGE, REF, secrets())).pull
    await records.pulled(IMAGE, REF, SECRET)
    loaded = files.PullRecordFiles(tmp_path).load()
    assert loaded.intents == ()
    assert [r.credentials for r in loaded.records] == [
        {"registry.test:5000/team/app": pr.PullCredentials(secrets=(SECRET,))}]
    again = manager(tmp_path)  # a restart
    assert (await again.must_pull(IMAGE, REF, secrets())).pull
    assert not (await again.must_pull(IMAGE, REF, secrets(SECRET))).pull


async def test_an_intent_left_by_a_crash_becomes_a_record_without_credentials(
    tmp_path: Path,
) -> None:
    files.PullRecordFiles(tmp_path).write_intent(IMAGE)
    present = rt.ImageInfo(id=REF, repo_tags=(IMAGE,))
    records = manager(tmp_path, present)
    assert (await records.must_pull(IMAGE, REF, secrets(SECRET))).pull
    loaded = files.PullRecordFiles(tmp_path).load()
    assert loaded.intents == ()
    assert [(r.image_ref, dict(r.credentials)) for r in loaded.records] == [(REF, {})]


async def test_an_intent_of_an_image_not_there_keeps_it_verified(tmp_path: Path) -> None:
    files.PullRecordFiles(tmp_path).write_intent(IMAGE)
    records = manager(tmp_path)  # the runtime has no such image (yet)
    assert (await records.must_pull(IMAGE, REF, secrets(SECRET))).pull
    assert files.PullRecordFiles(tmp_path).load().intents == (IMAGE,)


async def test_a_record_that_cannot_be_read_is_verified(tmp_path: Path) -> None:
    (tmp_path / "pulled").mkdir(parents=True)
    (tmp_path / "pulled" / pr.file_name(REF)).write_text("{not json")
    records = manager(tmp_path)
    assert await records.must_pull(IMAGE, REF, secrets(SECRET)) == pr.MUST_PULL


async def test_no_pull_without_its_intent(tmp_path: Path) -> None:
    """As the kubelet: an intent that cannot be written stops the pull (the ImagePuller
    reports it as a failed pull)."""
    (tmp_path / "pulling").write_text("in the way")
    records = manager(tmp_path)
    with pytest.raises(OSError):
        await records.pulling(IMAGE)
    # Records it cannot read: every present image is verified, as the kubelet does.
    assert await records.must_pull(IMAGE, REF, secrets()) == pr.MUST_PULL


async def test_a_record_that_cannot_be_written_leaves_the_intent(tmp_path: Path) -> None:
    records = manager(tmp_path)
    await records.pulling(IMAGE)
    # A file in the way of the `pulled` directory: the record cannot be written.
    (tmp_path / "pulled").write_text("in the way")
    await records.pulled(IMAGE, REF, SECRET)
    assert [p.name for p in (tmp_path / "pulling").iterdir()] == [pr.file_name(IMAGE)]


async def test_forget_drops_the_records_of_removed_images(tmp_path: Path) -> None:
    records = manager(tmp_path)
    await records.pulling(IMAGE)
    await records.pulled(IMAGE, REF, None)
    assert not (await records.must_pull(IMAGE, REF, secrets())).pull  # node-wide
    # Written at or after the collection began: pulled again meanwhile, kept.
    await records.forget([REF], datetime(2025, 1, 1, tzinfo=UTC))
    assert len(files.PullRecordFiles(tmp_path).load().records) == 1
    await records.forget([REF, "sha256:gone"], datetime(2025, 1, 2, tzinfo=UTC))
    assert files.PullRecordFiles(tmp_path).load().records == ()
