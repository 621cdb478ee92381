"""Sealer settings (``JETYARD_SEALER_*``), built once at start-up and passed down."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.settings import MetricsListener


class SealerSettings(BaseSettings, MetricsListener):
    model_config = SettingsConfigDict(env_prefix="JETYARD_SEALER_", extra="forbid")

    key_file: Path
    """The Ed25519 private key (PEM) seals are signed with: readable by the sealer alone, kept
    apart from NATS's credentials (docs/audit.md)."""
    every_events: int = Field(default=1000, ge=1, le=16_000)
    """A seal once this many events wait (a seal keeps 8 bytes per event: 16,000 fit in a
    message with room to spare)."""
    every_s: float = Field(default=5.0, gt=0, le=3600)
    """A seal at the latest this long after the first event it covers was read."""
    nice: int = Field(default=10, ge=0, le=19)
    """How much the process lowers its own CPU priority at start: sealing may lag under load
    (a seal is late, never wrong) while scheduling keeps the CPU; 0 leaves it as started."""
    poll_timeout_s: float = Field(default=1.0, gt=0, le=60)
