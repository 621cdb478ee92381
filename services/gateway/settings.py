"""Gateway settings (``JETYARD_GATEWAY_*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JETYARD_GATEWAY_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    command_timeout_s: float = Field(
        default=10.0, gt=0, description="how long a mutation waits for its outcome"
    )
    read_your_writes_s: float = Field(
        default=2.0, ge=0, description="how long a mutation waits for the views to catch up"
    )
    graphiql: bool = True
    history_dir: Path | None = Field(
        default=None,
        description="where asOf keeps the views it builds and their snapshots (unset: a "
        "temporary directory, emptied on stop; `jetyard up` keeps it in the data directory)",
    )
    history_snapshot_every: int = Field(
        default=50_000, ge=1, description="asOf snapshots the past views every this many events"
    )
    history_snapshots: int = Field(
        default=40, ge=0, description="at most this many asOf snapshots are kept"
    )
    secrets_key: str | None = Field(
        default=None,
        description="Fernet key sealing secret keys and personal data (`jetyard up` makes one)",
    )
    rate_limit: int = Field(default=600, ge=1, description="requests a minute per keypair/user")
    anonymous_rate_limit: int = Field(
        default=30, ge=1, description="requests a minute per address without credentials"
    )
    storage_url: str = Field(
        default="http://127.0.0.1:6021",
        description="public base URL of the storage data plane (folder access tokens' URLs)",
    )
    storage_token_key: SecretStr | None = Field(
        default=None,
        description="key signing folder access tokens, the storage service's "
        "JETYARD_STORAGE_TOKEN_KEY (unset: vfolderAccess is refused)",
    )
    storage_token_ttl_s: float = Field(
        default=300.0, gt=0, le=86_400, description="how long a folder access token lives"
    )
    appproxy_url: str = Field(
        default="http://127.0.0.1:6022",
        description="public base URL of the app proxy (startApp's URLs)",
    )
    appproxy_token_key: SecretStr | None = Field(
        default=None,
        description="key signing app tokens, the app proxy's JETYARD_APPPROXY_TOKEN_KEY "
        "(unset: startApp is refused)",
    )
    appproxy_token_ttl_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="how long a startApp URL's token lives (it is good for one use; keep it "
        "within the app proxy's JETYARD_APPPROXY_MAX_URL_TOKEN_TTL_S)",
    )
