"""Tenancy service settings (``JETYARD_TENANCY_*``), built once at start-up and passed down."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.settings import MetricsListener


class TenancySettings(BaseSettings, MetricsListener):
    model_config = SettingsConfigDict(env_prefix="JETYARD_TENANCY_", extra="forbid")

    durable: str = Field(default="admin", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The durable consumer of ``cmd.<tenancy aggregate>.*``. "admin" is the name it had when
    the gateway ran this writer: an installation's consumer, and the commands waiting on it,
    carry over (a work queue allows one consumer per subject)."""
    poll_timeout_s: float = Field(default=1.0, gt=0, le=60)
    command_fetch_timeout_s: float = Field(default=1.0, gt=0, le=60)
    attempts: int = Field(default=5, ge=1, le=100)
    """Decisions per command before a conflict-ridden one is retried later by the runner."""
