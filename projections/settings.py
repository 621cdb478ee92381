"""Projection settings (``JETYARD_PROJECTIONS_*``): where the views live and how the log is read."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.settings import MetricsListener


def default_data_dir() -> Path:
    """``JETYARD_DATA_DIR``, else the same per-user directory ``jetyard up`` uses."""
    if os.environ.get("JETYARD_DATA_DIR"):
        return Path(os.environ["JETYARD_DATA_DIR"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "jetyard"


class ProjectionSettings(BaseSettings, MetricsListener):
    model_config = SettingsConfigDict(env_prefix="JETYARD_PROJECTIONS_", extra="forbid")

    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str = Field(
        default="",
        description="SQLAlchemy URL; empty means sqlite+aiosqlite:///<data dir>/views.db. "
        "PostgreSQL: postgresql+asyncpg://user@host/db",
    )
    batch: int = Field(default=256, ge=1, le=1000, description="events fetched per transaction")
    fetch_timeout_s: float = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _default_database(self) -> ProjectionSettings:
        if not self.database_url:
            self.database_url = f"sqlite+aiosqlite:///{self.data_dir / 'views.db'}"
        return self
