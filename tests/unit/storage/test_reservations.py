"""Reservations of uploads against a folder's quota and an owner's total, on real files
(``services/storage/reservations.py``, ``quota.py``): what active uploads hold, what expiry
and completion release, and creations that race decided one after the other."""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path

import pytest

from schemas.ids import new_id
from services.storage.access import OwnerRoom
from services.storage.errors import StorageError
from services.storage.quota import check_room, reserve
from services.storage.reservations import Creations, held_by, holdings
from services.storage.upload_state import UploadArea, UploadState, new_upload_id
from services.storage.volumes import LocalVolume

NOW = 1_000_000.0


class SlowVolume(LocalVolume):
    """A local volume whose usage takes a while to read, as on a busy disk: it widens the
    window between a creation's check and its state being written."""

    def quota_used(self, folder_id: str) -> int:
        time.sleep(0.02)
        return super().quota_used(folder_id)


def state(folder: str, length: int, *, expires: float = NOW + 60) -> UploadState:
    return UploadState(
        id=new_upload_id(), volume="local", folder=folder, path="/x.bin", length=length,
        created=NOW, expires=expires,
    )  # fmt: skip


@pytest.fixture
def volume(tmp_path: Path) -> LocalVolume:
    made = LocalVolume("local", tmp_path / "volume", "host")
    made.create_folder("f1")
    made.create_folder("f2")
    return made


def test_active_uploads_hold_their_length_and_finished_or_expired_ones_nothing(
    volume: LocalVolume,
) -> None:
    area = UploadArea(volume.upload_area("f1"))
    area.create(state("f1", 100))
    area.create(state("f1", 20))
    area.create(state("f2", 7))
    area.create(state("f1", 1000, expires=NOW - 1))
    done = state("f1", 5000)
    area.create(done)
    area.save(done.model_copy(update={"completed": True}))

    held = holdings(volume, area, NOW)
    assert {folder: h.of_quota for folder, h in held.items()} == {"f1": 120, "f2": 7}
    assert held_by({"local": volume}, ["f1", "f2"], NOW).of_usage == 127
    assert held_by({"local": volume}, ["f2"], NOW).of_usage == 7


def test_the_quota_check_counts_others_but_not_the_upload_itself(volume: LocalVolume) -> None:
    volume.set_quota("f1", 1000)
    (volume.folder_root("f1") / "old.bin").write_bytes(b"o" * 300)
    area = UploadArea(volume.upload_area("f1"))
    mine = state("f1", 400)
    area.create(mine)
    check_room({"local": volume}, volume, "f1", 400, None, NOW, upload_id=mine.id)
    check_room({"local": volume}, volume, "f1", 300, None, NOW)  # 300 + 400 held + 300
    with pytest.raises(StorageError) as refused:
        check_room({"local": volume}, volume, "f1", 301, None, NOW)
    assert refused.value.code == "quota_exceeded"
    assert refused.value.message == (
        "the folder's quota is 1000 bytes: 300 are used, 400 are reserved by uploads in "
        "progress, and this upload needs 301 more"
    )


def test_the_owners_total_counts_uploads_into_every_folder_of_theirs(
    volume: LocalVolume,
) -> None:
    UploadArea(volume.upload_area("f1")).create(state("f1", 500))
    room = OwnerRoom("user u", limit=1000, used=200, folders=frozenset({"f1", "f2"}))
    check_room({"local": volume}, volume, "f2", 300, room, NOW)
    with pytest.raises(StorageError) as refused:
        check_room({"local": volume}, volume, "f2", 301, room, NOW)
    assert refused.value.code == "policy_total_exceeded"
    assert "200 are used, 500 are reserved by uploads in progress," in refused.value.message
    # Another owner's uploads are not theirs to count.
    other = OwnerRoom("user v", limit=1000, used=200, folders=frozenset({"f2"}))
    check_room({"local": volume}, volume, "f2", 800, other, NOW)


def test_creations_that_race_are_decided_one_after_the_other(tmp_path: Path) -> None:
    volume = SlowVolume("local", tmp_path / "volume", "host")
    folder = f"f-{new_id()[:8]}"
    volume.create_folder(folder)
    volume.set_quota(folder, 1000)
    area = UploadArea(volume.upload_area(folder))
    creations = Creations()

    def create(_: int) -> bool:
        try:
            reserve(creations, {"local": volume}, volume, area, state(folder, 300), None)
        except StorageError:
            return False
        return True

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        made = list(pool.map(create, range(8)))
    assert made.count(True) == 3
    assert sum(h.of_quota for h in holdings(volume, area, NOW).values()) == 900
