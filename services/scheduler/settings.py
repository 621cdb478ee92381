"""Scheduler settings (``JETYARD_SCHEDULER_*``), built once at start-up and passed down."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from events.writes import MAX_BATCH_MESSAGES
from schemas.settings import MetricsListener


class SchedulerSettings(BaseSettings, MetricsListener):
    model_config = SettingsConfigDict(env_prefix="JETYARD_SCHEDULER_", extra="forbid")

    durable: str = Field(
        default="scheduler",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the durable consumer of cmd.session.* (kept across restarts)",
    )
    default_resource_group: str = Field(
        default="default",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the resource group of a node whose agent names none",
    )
    pass_linger_s: float = Field(
        default=0.01,
        ge=0,
        description="while busy (a pass ended under 100 ms ago), how long a pass waits after "
        "its first trigger, so that sessions arriving together are decided and stored in one "
        "group commit (a batch costs ~4 ms whatever its size); after a quiet spell a trigger "
        "is decided at once",
    )
    max_batch_events: int = Field(default=MAX_BATCH_MESSAGES, ge=2, le=MAX_BATCH_MESSAGES)
    pass_attempts: int = Field(
        default=5, ge=1, description="conflicts in a row before a pass gives up for a while"
    )
    retry_after_s: float = Field(
        default=1.0, gt=0, description="pause before a failed pass is tried again"
    )
    poll_timeout_s: float = Field(
        default=1.0, gt=0, description="longest wait of one read of the log's tail"
    )
    command_fetch_timeout_s: float = Field(default=1.0, gt=0)
    leases: bool = Field(
        default=True,
        description="admit a domain's sessions only while holding its lease in jy-leases, so "
        "one replica admits each domain (False: every replica admits everything, and the "
        "quota aggregates' optimistic concurrency is the only fence)",
    )
    lease_ttl_s: float = Field(
        default=10.0, gt=0, description="how long an admission lease lasts unless renewed"
    )
    watch_heartbeats: bool = Field(
        default=True,
        description="declare a node lost when its agent's heartbeat key expires (False only "
        "for tests whose agents are simulated by hand and never beat)",
    )
    sweep_after_s: float | None = Field(
        default=None,
        gt=0,
        description="how long after start a registered node with no heartbeat key is declared "
        "lost (None: the heartbeat bucket's TTL, 3x JETYARD_NATS_HEARTBEAT_INTERVAL_S)",
    )
