"""What ``jetyard up`` keeps for the storage service in the data directory, and the
environment it hands to the storage service, the gateway and the agent: the token key the
gateway signs data-plane tokens with (``<data-dir>/storage.key``, 0600, made on the first
start), the default volume ``local`` at ``<data-dir>/volumes/local``, and the data plane's
port (kept in ``<data-dir>/storage.port``: 6021 the first time if free, else a free one;
``JETYARD_STORAGE_PORT`` replaces it)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from jetyard.runtime.bootstrap import kept_secret
from jetyard.runtime.data_dir import kept_service_port

DEFAULT_STORAGE_PORT = 6021
VOLUME = "local"


@dataclass(frozen=True)
class StorageSetup:
    key: str
    port: int
    volume_root: Path

    @classmethod
    def of(cls, data_dir: Path) -> tuple[StorageSetup, str | None]:
        wanted = int(os.environ.get("JETYARD_STORAGE_PORT", "0") or 0)
        port, warning = kept_service_port(data_dir, "storage", DEFAULT_STORAGE_PORT, wanted)
        root = data_dir / "volumes" / VOLUME
        root.mkdir(parents=True, exist_ok=True)
        return cls(kept_secret(data_dir, "storage.key"), port, root), warning

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
