"""Uploads in progress kept on disk: state, offset, locking and the sweep of expired ones."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from services.storage.upload_state import UploadArea, UploadBusy, UploadState, new_upload_id


def state(**changes: object) -> UploadState:
    values: dict[str, object] = {
        "id": new_upload_id(),
        "volume": "local",
        "folder": "f-1",
        "path": "a/b.bin",
        "length": 10,
        "created": 1000.0,
        "expires": 2000.0,
    }
    values.update(changes)
    return UploadState.model_validate(values)


@pytest.fixture
def area(tmp_path: Path) -> UploadArea:
    return UploadArea(tmp_path)


def test_an_upload_is_created_empty_and_its_offset_is_the_part_size(area: UploadArea) -> None:
    upload = state()
    area.create(upload)
    assert area.load(upload.id) == upload
    assert area.offset(upload) == 0
    (area.directory / area.part_name(upload.id)).write_bytes(b"12345")
    assert area.offset(upload) == 5
    assert (area.directory / area.part_name(upload.id)).stat().st_mode & 0o777 == 0o600


def test_a_state_whose_part_is_gone_is_a_finished_upload(area: UploadArea) -> None:
    upload = state()
    area.create(upload)
    os.unlink(area.directory / area.part_name(upload.id))
    assert area.offset(upload) == upload.length
    assert area.open_part(upload) is None


def test_unknown_and_malformed_ids_load_nothing(area: UploadArea) -> None:
    assert area.load(new_upload_id()) is None
    assert area.load("../../etc/passwd") is None
    (area.directory / f"{'a' * 32}.json").write_text("{not json")
    assert area.load("a" * 32) is None


def test_a_part_being_written_is_locked_against_a_second_writer(area: UploadArea) -> None:
    upload = state()
    area.create(upload)
    fd = area.open_part(upload)
    assert fd is not None
    try:
        with pytest.raises(UploadBusy):
            area.open_part(upload)
    finally:
        os.close(fd)
    second = area.open_part(upload)
    assert second is not None
    os.close(second)


def test_the_sweep_removes_expired_uploads_and_old_orphans_only(area: UploadArea) -> None:
    now = time.time()
    live = state(expires=now + 1000)
    expired, busy = state(expires=now - 10), state(expires=now - 10)
    for upload in (live, expired, busy):
        area.create(upload)
    orphan = area.directory / f"{new_upload_id()}.part"
    orphan.write_bytes(b"x")
    os.utime(orphan, (now - 5000, now - 5000))
    young_orphan = area.directory / f"{new_upload_id()}.part"
    young_orphan.write_bytes(b"y")
    (area.directory / "unrelated.txt").write_text("not ours")
    holder = area.open_part(busy)
    assert holder is not None
    try:
        assert area.sweep(now=now, ttl_s=1000.0) == 2
    finally:
        os.close(holder)
    assert area.load(live.id) == live
    assert area.load(expired.id) is None
    assert not (area.directory / area.part_name(expired.id)).exists()
    assert area.load(busy.id) == busy  # being written: left for the next sweep
    assert not orphan.exists() and young_orphan.exists()
    assert (area.directory / "unrelated.txt").exists()
