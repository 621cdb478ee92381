"""What an upload may add to a folder: the folder's quota and its owner's policy total, each
less what other uploads in progress have reserved (``reservations``). Checked when an upload
is created (under ``Creations.creating``, so the check and the new reservation are one step),
at the start of every PATCH and every ``quota_recheck_bytes`` during one (a session may have
filled the folder through its mount meanwhile, where the filesystem does not enforce the
quota itself). Blocking I/O: call from a thread."""

from __future__ import annotations

import time
from collections.abc import Mapping

from services.storage.access import OwnerRoom
from services.storage.errors import StorageError
from services.storage.reservations import Creations, held_by, holdings, parts_arrived
from services.storage.upload_state import UploadArea, UploadState
from services.storage.volumes import Capability, Volume

RECORDS_ROOM = 256 * 1024
"""Where the filesystem enforces the quota (``Capability.QUOTA``), its own records of a new
file (and btrfs's clone of a finished part into place) count against the limit too: an
upload that leaves less than this free passed the check and failed at its end (measured on
btrfs: 128 KiB left failed, 256 KiB was enough). So the check keeps this much free."""


def reserve(
    creations: Creations,
    volumes: Mapping[str, Volume],
    volume: Volume,
    area: UploadArea,
    state: UploadState,
    room: OwnerRoom | None,
) -> None:
    """File a new upload (its state: its reservation) if there is room for it, as one step:
    no other creation on its upload area is decided in between."""
    with creations.creating(area):
        check_room(volumes, volume, state.folder, state.length, room, state.created)
        area.create(state)


def check_room(
    volumes: Mapping[str, Volume],
    volume: Volume,
    folder_id: str,
    length: int,
    room: OwnerRoom | None,
    now: float,
    *,
    upload_id: str | None = None,
) -> int | None:
    """Refuse an upload of ``length`` bytes (``upload_id``, once created: its own reservation
    is not counted twice) that the folder's quota or the owner's total cannot hold; the
    folder's quota as read."""
    quota = check_folder_quota(volume, folder_id, length, now, upload_id=upload_id)
    if room is not None:
        others = held_by(volumes, room.folders, now, besides=upload_id).of_usage
        if room.used + others + length > room.limit:
            raise StorageError(
                "policy_total_exceeded",
                413,
                f"the owner's storage policy allows {room.limit} bytes across their folders: "
                f"{room.used} are used{_reserved(others)} and this upload needs {length} more",
            )
    return quota


def check_folder_quota(
    volume: Volume, folder_id: str, length: int, now: float, *, upload_id: str | None = None
) -> int | None:
    """The folder's quota (None: none), once it is known to hold ``length`` more."""
    quota = volume.quota(folder_id)
    if quota is None:
        return None
    area = UploadArea(volume.upload_area(folder_id))
    mine = length
    others = 0
    if area.directory.is_dir():
        if upload_id is not None:
            mine -= parts_arrived(volume, area, upload_id)
        held = holdings(volume, area, now, (folder_id,), besides=upload_id)
        others = held[folder_id].of_quota if folder_id in held else 0
    used = volume.quota_used(folder_id)
    kept = RECORDS_ROOM if Capability.QUOTA in volume.capabilities else 0
    if used + others + mine + kept > quota:
        records = f" (and {kept} kept for the file system's own records)" if kept else ""
        raise StorageError(
            "quota_exceeded",
            413,
            f"the folder's quota is {quota} bytes: {used} are used{_reserved(others)} and "
            f"this upload needs {mine} more{records}",
        )
    return quota


def recheck(volume: Volume, folder_id: str, state: UploadState) -> None:
    """During a PATCH: whether the folder still has room for the rest of ``state``."""
    check_folder_quota(volume, folder_id, state.length, time.time(), upload_id=state.id)


def _reserved(held: int) -> str:
    return f", {held} are reserved by uploads in progress," if held else ""
