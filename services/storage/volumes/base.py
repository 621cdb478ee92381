"""The volume backend interface: where a folder's tree lives and what the backend can do.

A backend declares capabilities as Backend.AI's do: ``quota`` when the filesystem itself
enforces a folder's limit (hard, for writes from sessions too), ``fast_size`` when usage is
read without walking the tree. Every backend stores a folder's quota; without ``quota`` the
data plane enforces it (soft: checked before and during its own uploads). Blocking I/O:
call from a thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Protocol

from services.storage.foldertree import Usage

# The hidden directory at a volume's root that holds the service's own files (upload
# areas, folder metadata); folders live under two-hex-digit buckets, so it never clashes.
SERVICE_DIR = ".jetyard"


class Capability(StrEnum):
    QUOTA = "quota"
    FAST_SIZE = "fast_size"


class FolderNotFound(LookupError):
    def __init__(self, volume: str, folder_id: str) -> None:
        super().__init__(f"folder {folder_id!r} does not exist on volume {volume!r}")


class Volume(Protocol):
    """One configured volume. ``folder_id`` is an id token (``[A-Za-z0-9_-]{1,64}``)."""

    name: str
    capabilities: frozenset[Capability]
    parts_counted: bool
    """Whether a partial upload's bytes count against its folder's quota as they arrive
    (``quota_used`` includes them): then an upload reserves only what has not arrived."""

    def create_folder(self, folder_id: str) -> Path:
        """Make the folder's empty root (idempotent) and return it."""
        ...

    def remove_folder(self, folder_id: str) -> None:
        """Remove the folder's tree and metadata (idempotent; symlinks never followed)."""
        ...

    def folder_root(self, folder_id: str) -> Path:
        """The folder's root on this machine; ``FolderNotFound`` if it does not exist."""
        ...

    def host_path(self, folder_id: str, host: str) -> PurePosixPath | None:
        """Where ``host`` sees the folder (to bind-mount it), or None if it cannot."""
        ...

    def usage(self, folder_id: str) -> Usage: ...

    def record_change(self, folder_id: str, change: Usage) -> None:
        """The data plane added or removed this much; fast-size backends keep count."""
        ...

    def recount(self, folder_id: str) -> Usage:
        """Walk the tree for the exact usage (and keep it, where usage is kept)."""
        ...

    def quota_used(self, folder_id: str) -> int:
        """The bytes that count against the folder's quota now (its usage, and the parts of
        its uploads where ``parts_counted``)."""
        ...

    def quota(self, folder_id: str) -> int | None:
        """The folder's limit in bytes, or None for none."""
        ...

    def set_quota(self, folder_id: str, limit: int | None) -> None: ...

    def upload_area(self, folder_id: str) -> Path:
        """The directory holding ``folder_id``'s partial uploads and their state: on the same
        filesystem as the folder (a finished upload is renamed into place), inside no folder's
        tree (a session that mounts a folder must not see or change them). Tree backends keep
        one per volume (the sweep reads one small directory); a hard-quota backend whose
        renames cannot cross quota units (btrfs subvolumes) keeps one per folder, inside its
        unit, so the bytes of an upload count against the folder's quota as they arrive."""
        ...

    def upload_areas(self) -> Iterator[Path]:
        """Every upload area that exists on this volume (for the sweep of expired uploads)."""
        ...
