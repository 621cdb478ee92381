"""What ``jetyard up`` keeps for the app proxy in the data directory, and the environment it
hands to the proxy and the gateway: the key app tokens are signed with
(``<data-dir>/appproxy.key``, 0600, made on the first start) and the proxy's port (kept in
``<data-dir>/appproxy.port``: 6022 the first time if free, else a free one;
``JETYARD_APPPROXY_PORT`` replaces it). The terminal key (``<data-dir>/terminal.key``, 0600)
signs the proxy's grants to the agent's terminal endpoint: the proxy and the agent get it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from jetyard.runtime.bootstrap import kept_secret
from jetyard.runtime.data_dir import kept_service_port

DEFAULT_APPPROXY_PORT = 6022


@dataclass(frozen=True)
class AppProxySetup:
    key: str
    port: int
    terminal_key: str

    @classmethod
    def of(cls, data_dir: Path) -> tuple[AppProxySetup, str | None]:
        wanted = int(os.environ.get("JETYARD_APPPROXY_PORT", "0") or 0)
        port, warning = kept_service_port(
            data_dir, "appproxy", DEFAULT_APPPROXY_PORT, wanted, "app proxy"
        )
        keys = kept_secret(data_dir, "appproxy.key"), kept_secret(data_dir, "terminal.key")
        return cls(keys[0], port, keys[1]), warning

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """For the proxy, the gateway (which signs its tokens) and the agent (terminals)."""
        return {
            "JETYARD_APPPROXY_TERMINAL_KEY": self.terminal_key,
            "JETYARD_AGENT_TERMINAL_KEY": self.terminal_key,
            "JETYARD_APPPROXY_TOKEN_KEY": self.key,
            "JETYARD_APPPROXY_HOST": "127.0.0.1",
            "JETYARD_APPPROXY_PORT": str(self.port),
            "JETYARD_APPPROXY_PUBLIC_URL": os.environ.get("JETYARD_APPPROXY_PUBLIC_URL", self.url),
            "JETYARD_GATEWAY_APPPROXY_URL": os.environ.get("JETYARD_APPPROXY_PUBLIC_URL", self.url),
            "JETYARD_GATEWAY_APPPROXY_TOKEN_KEY": self.key,
        }
