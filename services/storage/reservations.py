"""Quota reservations for uploads: an upload in progress holds the bytes it has declared
(``Upload-Length``) against its folder's quota and its owner's policy total until it finishes
or expires, so uploads that run side by side cannot together pass a limit that each alone
would meet.

The reservations are the upload states themselves (``upload_state``), not a ledger kept
beside them: a state that is not completed and not expired holds its length, minus what has
already arrived where the volume counts partial uploads against the quota (btrfs). A crash,
an expiry swept or a terminated upload thus releases its reservation with no bookkeeping to
get wrong. An upload is created under one lock per data plane and the folder's upload area's
``flock`` (``creating``), so two creations on one folder are decided one after the other,
across processes sharing the volume too. The owner's total spans volumes and processes: it
is decided under the plane's lock only, so two storage services on different hosts sharing
one owner's total can still pass it together (by at most one upload each); the measurement
after the uploads corrects the view, and the next upload is refused.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from services.storage.upload_state import UploadArea
from services.storage.volumes import Volume

LOCK_NAME = "reserve.lock"


@dataclass(frozen=True)
class Held:
    """What active uploads hold: against quota usage (which includes arrived parts where the
    volume counts them) and against measured usage (which never includes parts)."""

    of_quota: int = 0
    of_usage: int = 0

    def __add__(self, other: Held) -> Held:
        return Held(self.of_quota + other.of_quota, self.of_usage + other.of_usage)


def holdings(
    volume: Volume,
    area: UploadArea,
    now: float,
    folders: Collection[str] | None = None,
    *,
    besides: str | None = None,
) -> dict[str, Held]:
    """Folder id -> what the active uploads in ``area`` (of ``volume``) hold; only the
    folders in ``folders`` if given, never the upload ``besides``."""
    held: dict[str, Held] = {}
    for state, arrived in area.active(now):
        if state.volume != volume.name or state.id == besides:
            continue
        if folders is not None and state.folder not in folders:
            continue
        counted = arrived if volume.parts_counted else 0
        more = Held(of_quota=max(0, state.length - counted), of_usage=state.length)
        held[state.folder] = held.get(state.folder, Held()) + more
    return held


def held_by(
    volumes: Mapping[str, Volume],
    folders: Collection[str],
    now: float,
    *,
    besides: str | None = None,
) -> Held:
    """What active uploads into ``folders``, on any of ``volumes``, hold together."""
    total = Held()
    for volume in volumes.values():
        seen: set[Path] = set()
        for folder_id in folders:
            directory = volume.upload_area(folder_id)
            if directory in seen or not directory.is_dir():
                continue
            seen.add(directory)
            area = UploadArea(directory)
            for held in holdings(volume, area, now, folders, besides=besides).values():
                total += held
    return total


def parts_arrived(volume: Volume, area: UploadArea, upload_id: str) -> int:
    """How much of ``upload_id`` already counts against its folder's quota."""
    if not volume.parts_counted:
        return 0
    state = area.load(upload_id)
    return 0 if state is None or state.completed else area.offset(state)


class Creations:
    """Serialises the creation of uploads in this process (``creating``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @contextmanager
    def creating(self, area: UploadArea) -> Iterator[None]:
        """Hold while checking room for a new upload in ``area`` and writing its state.
        Blocking: call from a thread."""
        with self._lock:
            fd = os.open(
                area.directory / LOCK_NAME,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock
