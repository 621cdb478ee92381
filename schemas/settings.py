"""Settings from ``JETYARD_*`` environment variables, built once at start-up and passed down."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.bounds import InputLimits

MIN_SERVER_VERSION = (2, 12, 3)


class MetricsListener(BaseModel):
    """The ``/metrics`` listener of a service without an HTTP listener of its own (mixed into
    its settings, so ``JETYARD_<SERVICE>_METRICS_HOST``/``_PORT``)."""

    metrics_host: str = Field(default="127.0.0.1", description="where /metrics listens")
    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="the port of /metrics for Prometheus (docs/metrics.md); unset: not served",
    )


class NatsSettings(BaseSettings):
    """How to reach NATS and how the streams are laid out.

    Production mode refuses a server that does not fsync every write (``sync_interval: always``)
    and asks for three replicas; development mode (the default) runs one replica.
    """

    model_config = SettingsConfigDict(env_prefix="JETYARD_NATS_", extra="forbid")

    url: str = "nats://127.0.0.1:4222"
    token: str | None = None
    production: bool = False
    replicas: int = Field(default=1, ge=1, le=5)
    duplicate_window_s: float = Field(default=60.0, gt=0)
    max_event_bytes: int = Field(default=256 * 1024, gt=0)
    commands_max_age_s: float = Field(default=86_400.0, gt=0)
    outcomes_max_age_s: float = Field(default=86_400.0, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    request_timeout_s: float = Field(default=5.0, gt=0)
    heartbeat_interval_s: float = Field(default=5.0, gt=0)
    monitor_url: str | None = None
    access_log_max_age_s: float = Field(default=90 * 86_400.0, gt=0)
    signature_window_s: float = Field(
        default=300.0, gt=0, le=1800, description="how far a signed request's date may be off"
    )
    login_ttl_s: float = Field(default=12 * 3600.0, gt=0, description="how long a login lasts")
    output_messages_per_kernel: int = Field(
        default=512,
        ge=2,
        description="messages of live output kept per kernel in JY_OUTPUT (each at most 64 KiB "
        "of lines): the oldest go first, so the tail is kept",
    )
    output_max_age_s: float = Field(
        default=7 * 86_400.0, gt=0, description="how long live output stays in JY_OUTPUT"
    )
    output_max_bytes: int = Field(
        default=8 << 30, gt=0, description="all kernels' live output together (oldest go first)"
    )


def input_limits(environ: Mapping[str, str] | None = None) -> InputLimits:
    """The configured input maximums: ``JETYARD_LIMIT_<FIELD>``, e.g.
    ``JETYARD_LIMIT_MAX_CPU_MILLI=8192000``. The gateway, the scheduler and the tenancy service
    read the same variables, so the domain refuses exactly what the edge refuses."""
    env = os.environ if environ is None else environ
    values = {
        name: env[f"JETYARD_LIMIT_{name.upper()}"]
        for name in InputLimits.model_fields
        if f"JETYARD_LIMIT_{name.upper()}" in env
    }
    return InputLimits.model_validate(values)
