"""What ``jetyard up`` keeps for the storage service in the data directory, and the
environment it hands to the storage service, the gateway and the agent: the token key the
gateway signs data-plane tokens with (``<data-dir>/storage.key``, 0600, made on the first
start), the default volume ``local`` at ``<data-dir>/volumes/local``, and the data plane's
port (kept in ``<data-dir>/storage.port``: 6021 the first time if free, else a free one;
``JETYARD_STORAGE_PORT`` replaces it).

An operator adds volumes by setting ``JETYARD_STORAGE_VOLUMES`` (the storage service's own
JSON: ``services/storage/settings.py``) before ``jetyard up``, e.g. a btrfs volume whose
quotas the kernel enforces; they are served beside ``local`` (a volume of theirs called
``local`` replaces it), ``JETYARD_STORAGE_DEFAULT_VOLUME`` chooses where new folders go, and
the agent is told where each volume lies on this machine."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from jetyard.runtime.bootstrap import kept_secret
from jetyard.runtime.data_dir import kept_service_port
from schemas.ids import Token
from services.storage.settings import (
    LocalVolumeSettings,
    SharedVolumeSettings,
    VolumeSettings,
)
from services.storage.volumes.shared import mount_for

DEFAULT_STORAGE_PORT = 6021
VOLUME = "local"
_VOLUMES = TypeAdapter(dict[Token, VolumeSettings])


class VolumesError(ValueError):
    """``JETYARD_STORAGE_VOLUMES`` or ``JETYARD_STORAGE_DEFAULT_VOLUME`` cannot be used."""


@dataclass(frozen=True)
class StorageSetup:
    key: str
    port: int
    volume_root: Path
    volumes: dict[str, VolumeSettings]
    default_volume: str

    @classmethod
    def of(cls, data_dir: Path) -> tuple[StorageSetup, str | None]:
        wanted = int(os.environ.get("JETYARD_STORAGE_PORT", "0") or 0)
        port, warning = kept_service_port(data_dir, "storage", DEFAULT_STORAGE_PORT, wanted)
        root = data_dir / "volumes" / VOLUME
        root.mkdir(parents=True, exist_ok=True)
        volumes = {
            VOLUME: LocalVolumeSettings(backend="local", root=root),
            **operator_volumes(os.environ.get("JETYARD_STORAGE_VOLUMES")),
        }
        default = os.environ.get("JETYARD_STORAGE_DEFAULT_VOLUME") or VOLUME
        if default not in volumes:
            known = ", ".join(sorted(volumes))
            raise VolumesError(
                f"JETYARD_STORAGE_DEFAULT_VOLUME is {default!r}, which is no volume "
                f"(volumes: {known})"
            )
        key = kept_secret(data_dir, "storage.key")
        return cls(key, port, root, volumes, default), warning

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def agent_volumes(self) -> dict[str, str]:
        """Where each volume lies on this machine, for the agent's bind mounts (a shared
        volume without a mount for this host is left out: its folders cannot be mounted
        here)."""
        host = os.environ.get("JETYARD_STORAGE_HOSTNAME") or socket.gethostname()
        paths: dict[str, str] = {}
        for name, config in self.volumes.items():
            if isinstance(config, SharedVolumeSettings):
                mount = mount_for(config.mounts, host)
                if mount is not None:
                    paths[name] = str(mount)
            else:
                paths[name] = str(config.root)
        return paths

    def env(self) -> dict[str, str]:
        """For the storage service, the gateway (which issues tokens for it) and the agent
        (which bind-mounts its folders)."""
        return {
            "JETYARD_STORAGE_TOKEN_KEY": self.key,
            "JETYARD_STORAGE_VOLUMES": _VOLUMES.dump_json(self.volumes).decode(),
            "JETYARD_STORAGE_DEFAULT_VOLUME": self.default_volume,
            "JETYARD_STORAGE_HOST": "127.0.0.1",
            "JETYARD_STORAGE_PORT": str(self.port),
            "JETYARD_GATEWAY_STORAGE_URL": self.url,
            "JETYARD_GATEWAY_STORAGE_TOKEN_KEY": self.key,
            "JETYARD_AGENT_VOLUMES": json.dumps(self.agent_volumes()),
        }


def operator_volumes(text: str | None) -> dict[str, VolumeSettings]:
    """The volumes an operator configured (``JETYARD_STORAGE_VOLUMES``), checked now so that
    ``jetyard up`` refuses a bad one with a sentence instead of a storage service that
    never starts."""
    if not text or not text.strip():
        return {}
    try:
        return _VOLUMES.validate_json(text)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc']) or 'the value'}: {problem['msg']}"
            for problem in error.errors()
        )
        raise VolumesError(f"JETYARD_STORAGE_VOLUMES cannot be used: {problems}") from None
