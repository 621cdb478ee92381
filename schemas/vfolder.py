"""Virtual folder values shared by the storage service, the scheduler, the gateway and the
agent: who owns a folder, what it is for, what a share lets one do, where it stands, the rules
for its name, where it lies on a volume, and how a session mounts it. Pure; no subjects."""

from __future__ import annotations

import hashlib
import posixpath
import re
from enum import StrEnum
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.ids import TOKEN_PATTERN, check_token

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


def folder_relpath(folder_id: str) -> PurePosixPath:
    """Where a folder lies under its volume's root: ``<h[0:2]>/<h[2:4]>/<id>`` with ``h`` the
    SHA-256 of the id: 65,536 buckets spread evenly whatever the ids look like (an id-prefix
    layout would pile up ids made from names or counters), so millions of folders never share
    one directory. The storage service makes folders there; an agent bind-mounts them from
    there (below where the volume is mounted on its node)."""
    check_token(folder_id, "folder id")
    digest = hashlib.sha256(folder_id.encode()).hexdigest()
    return PurePosixPath(digest[0:2], digest[2:4], folder_id)


# ---- mounts ---------------------------------------------------------------------------------

MOUNT_ROOT = "/home/work"
"""Where a folder is mounted when the request names no path: ``/home/work/<folder name>``."""
MAX_MOUNTS = 32
MAX_MOUNT_PATH = 255
RESERVED_MOUNT_PATHS = ("/", "/proc", "/sys", "/dev", "/etc", "/bin", "/sbin", "/lib",
                         "/lib64", "/usr", "/boot", "/run", "/tmp", "/var")  # fmt: skip
MOUNT_PATH_CHARS = re.compile(r"^/[A-Za-z0-9._/-]*$")


def mount_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be where a folder is mounted in a container, or None: an absolute,
    normal path of plain characters, not a system directory nor inside one."""
    if len(path) > MAX_MOUNT_PATH:
        return f"a mount path is at most {MAX_MOUNT_PATH} characters"
    if not MOUNT_PATH_CHARS.match(path):
        return (
            f"mount path {path[:80]!r} must be absolute and made of A-Z, a-z, 0-9, '.', '_', "
            "'-' and '/'"
        )
    if posixpath.normpath(path) != path or "//" in path:
        return f"mount path {path[:80]!r} is not normal (no '.', '..', '//' or trailing '/')"
    for reserved in RESERVED_MOUNT_PATHS:
        if path == reserved or (reserved != "/" and path.startswith(reserved + "/")):
            return f"mount path {path!r} is a system directory (or inside one)"
    return None


class MountRequest(BaseModel):
    """A folder a session asks to mount: by id or by name (the caller's own, then the
    session's project's, then one shared with them), at ``path`` (default
    ``/home/work/<name>``), read-only if ``read_only`` (a read-only share is read-only
    whatever is asked)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    folder: str = Field(min_length=1, max_length=64)
    path: str | None = None
    read_only: bool = False

    @field_validator("folder")
    @classmethod
    def _folder(cls, value: str) -> str:
        if folder_name_problem(value) is not None and not TOKEN_PATTERN.match(value):
            raise ValueError(f"{value[:80]!r} is neither a folder name nor a folder id")
        return value

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        problem = None if value is None else mount_path_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class Mount(BaseModel):
    """A folder a session mounts, as admission resolved it: recorded on the session and
    carried to the agent with each kernel's allocation."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    folder_id: str
    name: str
    volume: str
    path: str
    """Where it appears in the container."""
    read_only: bool
    """Read-only because the request or the caller's permission says so (enforced by the
    container engine)."""


def default_mount_path(name: str) -> str:
    return f"{MOUNT_ROOT}/{name}"
