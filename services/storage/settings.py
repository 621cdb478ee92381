"""Storage settings (``JETYARD_STORAGE_*``), built once at start-up and passed down.

Volumes are configured by name, as JSON in one variable, e.g.::

    JETYARD_STORAGE_VOLUMES='{"local": {"backend": "local", "root": "/srv/jetyard"},
        "shared": {"backend": "shared", "mounts": {"gpu-1": "/mnt/nfs", "*": "/net/nfs"}},
        "fast": {"backend": "btrfs", "root": "/srv/btrfs/jetyard"}}'

Backends: ``local`` (a directory on this machine; quotas checked by the data plane only),
``shared`` (NFS/CephFS-style, mounted on every node), ``btrfs`` (a directory on a btrfs
filesystem on this machine: each folder a subvolume whose quota the kernel enforces, for
sessions too; the service must run as root and turns btrfs quotas on if they are off).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.ids import check_token

MiB = 1024 * 1024


def _volume_path(path: Path) -> Path:
    """A volume's place must be absolute (a relative one would depend on the directory the
    service happens to start in; an empty one is ``.``) and hold no NUL."""
    if not path.is_absolute():
        raise ValueError(f"{str(path)!r} is not an absolute path")
    if "\x00" in str(path):
        raise ValueError("a path cannot hold a NUL character")
    return path


VolumePath = Annotated[Path, AfterValidator(_volume_path)]


class LocalVolumeSettings(BaseModel):
    """A directory on this machine's own disks; only this host can mount its folders."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["local"]
    root: VolumePath


class SharedVolumeSettings(BaseModel):
    """An NFS/CephFS-style tree every node mounts, each at its own path: host name → mount
    path, ``"*"`` for every host not named."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["shared"]
    mounts: dict[str, VolumePath] = Field(min_length=1)


class BtrfsVolumeSettings(BaseModel):
    """A directory on a btrfs filesystem on this machine: folders are subvolumes with hard
    quotas (qgroup limits); only this host can mount them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["btrfs"]
    root: VolumePath


VolumeSettings = Annotated[
    LocalVolumeSettings | SharedVolumeSettings | BtrfsVolumeSettings,
    Field(discriminator="backend"),
]


class StorageSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JETYARD_STORAGE_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=6021, ge=0, le=65535)
    hostname: str = Field(
        default_factory=socket.gethostname,
        description="this machine's name: which of a shared volume's mounts is ours",
    )
    token_key: SecretStr = Field(
        min_length=32,
        description="HMAC key the API signs data-plane tokens with (shared with it)",
    )
    volumes: dict[str, VolumeSettings] = Field(default_factory=dict)
    chunk_bytes: int = Field(
        default=1 * MiB,
        ge=4096,
        le=64 * MiB,
        description="read and write unit of a stream: the most one socket read takes (into one "
        "buffer per thread), an upload's disk write, a download's piece",
    )
    max_upload_bytes: int = Field(default=5 * 1024**4, gt=0, description="Tus-Max-Size")
    upload_ttl_s: float = Field(
        default=86_400.0, gt=0, description="an upload untouched this long is removed"
    )
    sweep_interval_s: float = Field(default=600.0, gt=0)
    max_token_ttl_s: float = Field(
        default=86_400.0, gt=0, description="tokens whose expiry lies further out are refused"
    )
    list_limit: int = Field(default=1000, ge=1, le=100_000, description="entries per page")
    quota_recheck_bytes: int = Field(
        default=256 * MiB,
        ge=4096,
        description="during an upload into a folder with a quota, usage is read again this often",
    )
    drain_limit_bytes: int = Field(
        default=8 * MiB,
        ge=0,
        description="a refused request body up to this size is read and dropped so the client "
        "sees the error; a larger one has its connection closed",
    )

    # ---- the control part (``jetyard serve storage``) ------------------------------------
    default_volume: str | None = Field(
        default=None,
        description="where a folder goes when its creator names no volume (default: 'local' "
        "if there is one, else the first volume by name)",
    )
    durable: str = Field(default="storage", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The durable consumer of ``cmd.vfolder.*``."""
    poll_timeout_s: float = Field(default=1.0, gt=0, le=60)
    command_fetch_timeout_s: float = Field(default=1.0, gt=0, le=60)
    attempts: int = Field(default=5, ge=1, le=100)
    """Decisions per command before a conflict-ridden one is retried later by the runner."""
    usage_interval_s: float = Field(
        default=1.0, ge=0, le=3600, description="a folder's usage is measured at most this often"
    )

    @model_validator(mode="after")
    def _default_volume_known(self) -> StorageSettings:
        if self.default_volume is None and self.volumes:
            self.default_volume = "local" if "local" in self.volumes else min(self.volumes)
        if self.volumes and self.default_volume not in self.volumes:
            known = ", ".join(sorted(self.volumes))
            raise ValueError(f"default_volume {self.default_volume!r} is not a volume ({known})")
        return self

    @field_validator("volumes")
    @classmethod
    def _volume_names(cls, value: dict[str, VolumeSettings]) -> dict[str, VolumeSettings]:
        for name in value:
            check_token(name, "volume name")
        return value
