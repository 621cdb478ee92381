"""The folder quota as the data plane enforces it where the filesystem does not: what an
upload may add to a folder."""

from __future__ import annotations

from services.storage.errors import StorageError
from services.storage.volumes import Volume


def check_quota(volume: Volume, folder_id: str, length: int) -> None:
    quota = volume.quota(folder_id)
    if quota is None:
        return
    used = volume.quota_used(folder_id)
    if used + length > quota:
        raise StorageError(
            "quota_exceeded",
            413,
            f"the folder's quota is {quota} bytes: {used} are used and this upload needs "
            f"{length} more",
        )
