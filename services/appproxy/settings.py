"""App proxy settings (``JETYARD_APPPROXY_*``), built once at start-up and passed down."""

from __future__ import annotations

import socket
from typing import Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.activity import DEFAULT_REPORT_INTERVAL_S
from schemas.app_tokens import MAX_COOKIE_TTL_S
from schemas.ids import derived_id


class AppProxySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JETYARD_APPPROXY_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=6022, ge=0, le=65535)
    public_url: str = Field(
        default="http://127.0.0.1:6022",
        description="the base URL users reach this proxy at (the gateway's "
        "JETYARD_GATEWAY_APPPROXY_URL); https makes the cookie Secure",
    )
    token_key: SecretStr = Field(
        min_length=32,
        description="HMAC key of app tokens, shared with the gateway "
        "(JETYARD_GATEWAY_APPPROXY_TOKEN_KEY)",
    )
    terminal_key: SecretStr | None = Field(
        default=None,
        min_length=32,
        description="HMAC key of terminal tokens, shared with the agents "
        "(JETYARD_AGENT_TERMINAL_KEY); unset: the sessions' terminals answer 503",
    )
    max_url_token_ttl_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="URL tokens whose expiry lies further out are refused (each is good once)",
    )
    cookie_ttl_s: float = Field(
        default=12 * 3600.0,
        gt=0,
        le=MAX_COOKIE_TTL_S,
        description="how long the cookie a URL token becomes lives at most (it ends with its "
        "session, and when its owner revokes access: revokeAppAccess)",
    )
    connect_timeout_s: float = Field(
        default=5.0, gt=0, le=120, description="to open a connection to an app"
    )
    poll_timeout_s: float = Field(default=1.0, gt=0, le=60)
    app_ports: str | None = Field(
        default=None,
        pattern=r"^\d{1,5}-\d{1,5}$",
        description="port mode: a range FIRST-LAST of ports the proxy listens on, one per open "
        "app (each app keeps its port while its session runs; its path URL redirects there). "
        "Unset: path mode only",
    )
    activity_interval_s: float = Field(
        default=DEFAULT_REPORT_INTERVAL_S,
        gt=0,
        le=3600,
        description="how often the sessions that had app or terminal traffic are reported as "
        "activity for idle timeouts (SessionActivityReported on ev.activity.<proxy id>): at "
        "most once per session in that time; keep it well under the shortest idle timeout",
    )
    proxy_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the id this replica writes its activity reports under; unset: made from "
        "the host name and the port (give replicas on one host different ports or ids)",
    )

    @model_validator(mode="after")
    def _app_ports_fit(self) -> Self:
        self.app_port_range()
        return self

    def app_port_range(self) -> range | None:
        """``app_ports`` as a range (checked at start: inside 1-65535, first <= last, not
        the main port, at most 10,000 ports)."""
        if self.app_ports is None:
            return None
        first, last = (int(p) for p in self.app_ports.split("-"))
        if not 1 <= first <= last <= 65535 or last - first >= 10_000:
            raise ValueError(f"JETYARD_APPPROXY_APP_PORTS={self.app_ports}: want FIRST-LAST "
                             "within 1-65535, at most 10,000 ports")  # fmt: skip
        if first <= self.port <= last:
            raise ValueError(f"JETYARD_APPPROXY_APP_PORTS={self.app_ports} holds the proxy's "
                             f"own port {self.port}")  # fmt: skip
        return range(first, last + 1)

    def reporter_id(self) -> str:
        """``proxy_id``, or one made from the host name and the port (stable over restarts)."""
        return self.proxy_id or derived_id("appproxy", socket.gethostname(), str(self.port))
