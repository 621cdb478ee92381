"""Volume backends, configured by name (``StorageSettings.volumes``)."""

from __future__ import annotations

from schemas.vfolder import folder_relpath
from services.storage.settings import (
    LocalVolumeSettings,
    SharedVolumeSettings,
    StorageSettings,
)
from services.storage.volumes.base import Capability, FolderNotFound, Volume
from services.storage.volumes.btrfs import BtrfsVolume, BtrfsVolumeError
from services.storage.volumes.local import LocalVolume
from services.storage.volumes.shared import SharedVolume

__all__ = [
    "BtrfsVolume",
    "BtrfsVolumeError",
    "Capability",
    "FolderNotFound",
    "LocalVolume",
    "SharedVolume",
    "Volume",
    "folder_relpath",
    "open_volumes",
]


def open_volumes(settings: StorageSettings) -> dict[str, Volume]:
    """Every configured volume, its service directory made (start-up: fails loudly)."""
    volumes: dict[str, Volume] = {}
    for name, config in settings.volumes.items():
        if isinstance(config, LocalVolumeSettings):
            volumes[name] = LocalVolume(name, config.root, settings.hostname)
        elif isinstance(config, SharedVolumeSettings):
            volumes[name] = SharedVolume(name, config.mounts, settings.hostname)
        else:
            volumes[name] = BtrfsVolume(name, config.root, settings.hostname)
    return volumes
