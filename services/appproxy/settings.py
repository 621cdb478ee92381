"""App proxy settings (``JETYARD_APPPROXY_*``), built once at start-up and passed down."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


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
        default=900.0, gt=0, description="URL tokens whose expiry lies further out are refused"
    )
    cookie_ttl_s: float = Field(
        default=12 * 3600.0, gt=0, description="how long the cookie a URL token becomes lives"
    )
    connect_timeout_s: float = Field(
        default=5.0, gt=0, le=120, description="to open a connection to an app"
    )
    poll_timeout_s: float = Field(default=1.0, gt=0, le=60)
