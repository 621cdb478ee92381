"""Serving controller settings (``JETYARD_SERVING_*``), built once at start-up and passed down.
The probe interval, warm-up, replacement time and scaling cooldowns are each endpoint's own
(``schemas.serving``); these are the controller's."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.settings import MetricsListener


class ServingSettings(BaseSettings, MetricsListener):
    model_config = SettingsConfigDict(env_prefix="JETYARD_SERVING_", extra="forbid")

    durable: str = Field(default="serving", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The durable consumer of ``cmd.endpoint.*`` (shared by the controller's replicas)."""
    poll_timeout_s: float = Field(default=1.0, gt=0, le=60)
    command_fetch_timeout_s: float = Field(default=1.0, gt=0, le=60)
    attempts: int = Field(default=5, ge=1, le=100)
    """Decisions per command or reconcile step before a conflict-ridden one is tried later."""
    tick_s: float = Field(default=0.5, gt=0, le=60)
    """The reconcile pass runs at least this often (probes fall due by time), and at once
    when the log changes something it watches."""
    lease_key: str = Field(default="serving", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """The ``jy-leases`` key whose holder alone reconciles (probes, scales, rolls)."""
    lease_ttl_s: float = Field(default=10.0, gt=0, le=600)
    """How long a dead controller's lease blocks the others."""
    resend_after_s: float = Field(default=5.0, gt=0, le=600)
    """A replica's create (or its session's terminate) the log shows no effect of is checked
    and sent again after this long."""
    drain_timeout_s: float = Field(default=30.0, ge=0, le=3600)
    """A retired replica that served is ended once the app proxies report none of its
    requests in flight, or after this long whatever they report."""
