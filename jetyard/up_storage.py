"""What ``jetyard up`` keeps for the storage service in the data directory, and the
environment it hands to the storage service, the gateway and the agent: the token key the
gateway signs data-plane tokens with (``<data-dir>/storage.key``, 0600, made on the first
start), the default volume ``local`` at ``<data-dir>/volumes/local``, and the data plane's
port (kept in ``<data-dir>/storage.port``: 6021 the first time if free, else a free one;
``JETYARD_STORAGE_PORT`` replaces it)."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from jetyard.bootstrap import owner_only
from jetyard.natsserver import free_port, port_is_free

DEFAULT_STORAGE_PORT = 6021
VOLUME = "local"


def kept_key(data_dir: Path, name: str) -> str:
    """A secret kept in ``<data-dir>/<name>`` (0600), made on the first start."""
    path = data_dir / name
    if not path.exists():
        owner_only(path, secrets.token_urlsafe(48) + "\n")
    return path.read_text().strip()


def storage_key(data_dir: Path) -> str:
    return kept_key(data_dir, "storage.key")


def kept_port(path: Path, default: int, wanted: int = 0, what: str = "") -> tuple[int, str | None]:
    """The port kept in ``path`` for this start, and a warning when it is not the kept one
    (the kept one is taken by another program: a free one this time, the kept one stays)."""
    if wanted:
        path.write_text(f"{wanted}\n")
        return wanted, None
    try:
        kept = int(path.read_text().strip())
    except (OSError, ValueError):
        kept = default if port_is_free(default) else free_port()
        path.write_text(f"{kept}\n")
        return kept, None
    if port_is_free(kept):
        return kept, None
    instead = free_port()
    return instead, f"the {what} port {kept} (kept in {path}) is taken; using {instead} this time"


def kept_storage_port(data_dir: Path, wanted: int = 0) -> tuple[int, str | None]:
    return kept_port(data_dir / "storage.port", DEFAULT_STORAGE_PORT, wanted, "storage")


@dataclass(frozen=True)
class StorageSetup:
    key: str
    port: int
    volume_root: Path

    @classmethod
    def of(cls, data_dir: Path) -> tuple[StorageSetup, str | None]:
        wanted = int(os.environ.get("JETYARD_STORAGE_PORT", "0") or 0)
        port, warning = kept_storage_port(data_dir, wanted)
        root = data_dir / "volumes" / VOLUME
        root.mkdir(parents=True, exist_ok=True)
        return cls(storage_key(data_dir), port, root), warning

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """For the storage service, the gateway (which issues tokens for it) and the agent
        (which bind-mounts its folders)."""
        return {
            "JETYARD_STORAGE_TOKEN_KEY": self.key,
            "JETYARD_STORAGE_VOLUMES": json.dumps(
                {VOLUME: {"backend": "local", "root": str(self.volume_root)}}
            ),
            "JETYARD_STORAGE_DEFAULT_VOLUME": VOLUME,
            "JETYARD_STORAGE_HOST": "127.0.0.1",
            "JETYARD_STORAGE_PORT": str(self.port),
            "JETYARD_GATEWAY_STORAGE_URL": self.url,
            "JETYARD_GATEWAY_STORAGE_TOKEN_KEY": self.key,
            "JETYARD_AGENT_VOLUMES": json.dumps({VOLUME: str(self.volume_root)}),
        }
