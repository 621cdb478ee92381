"""Virtual folder values shared by the storage service, the gateway and the agent: who owns a
folder, what it is for, what a share lets one do, where it stands, and the rules for its name.
Pure; no subjects."""

from __future__ import annotations

import re
from enum import StrEnum

MAX_FOLDER_NAME = 64
FOLDER_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
"""Letters, digits, '.', '_' and '-': no slash, no space, nothing that looks like another
character. A name starting with '.' is mounted into every session of its owner (as in
Backend.AI); '.' and '..' themselves are not names."""
_NAME = re.compile(FOLDER_NAME_PATTERN)


class OwnerKind(StrEnum):
    USER = "user"
    PROJECT = "project"
    """Shared with every member of the project."""


class UsageMode(StrEnum):
    GENERAL = "general"
    DATA = "data"
    MODEL = "model"


class Permission(StrEnum):
    """What a share (or membership of a project folder) allows, each including the one before."""

    READ_ONLY = "ro"
    READ_WRITE = "rw"
    READ_WRITE_DELETE = "rwd"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def allows(self, needed: Permission) -> bool:
        return self.rank >= needed.rank


_RANK = {Permission.READ_ONLY: 0, Permission.READ_WRITE: 1, Permission.READ_WRITE_DELETE: 2}


class FolderStatus(StrEnum):
    READY = "ready"
    CLONING = "cloning"
    """Made as a clone; its bytes are being copied (a background job)."""
    CLONE_FAILED = "clone-failed"
    TRASHED = "trashed"
    """In the trash: not mountable, restorable, purgeable."""
    PURGED = "purged"
    """Its bytes are deleted; its name is free again. Nothing follows."""


def folder_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a folder, or None."""
    if name in {".", ".."}:
        return f"{name!r} is not a folder name"
    if not _NAME.match(name):
        return (
            f"folder name {name[:80]!r} must be 1 to {MAX_FOLDER_NAME} characters of A-Z, a-z, "
            "0-9, '.', '_' or '-'"
        )
    return None


def auto_mounted(name: str) -> bool:
    """Folders whose name starts with a dot are mounted into every session of their owner."""
    return name.startswith(".")
