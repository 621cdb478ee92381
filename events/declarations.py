"""What every stream and bucket is declared with: the one place that owns their settings
(``JY_EVENTS``, ``JY_COMMANDS``, ``JY_OUTCOMES``, ``JY_PARKED``, ``JY_ACCESS``, ``JY_OUTPUT``,
``JY_SEALS``,
``jy-heartbeats``, ``jy-leases``, ``jy-snapshots``, ``jy-queues``, ``jy-secrets``,
``jy-people``, ``jy-credentials``, ``jy-nonces``, ``jy-logins``, ``jy-app-grants``). Pure:
configurations from the settings; ``events.bus.ensure_streams`` applies them."""

from __future__ import annotations

from nats.js import api

from schemas.app_tokens import GRANTS_TTL_S
from schemas.settings import NatsSettings
from schemas.subjects import (
    ACCESS_PREFIX,
    ACCESS_STREAM,
    COMMANDS_PREFIX,
    COMMANDS_STREAM,
    CREDENTIALS_BUCKET,
    EVENTS_PREFIX,
    EVENTS_STREAM,
    GRANTS_BUCKET,
    HEARTBEATS_BUCKET,
    LEASES_BUCKET,
    LOGINS_BUCKET,
    NONCES_BUCKET,
    OUTCOMES_PREFIX,
    OUTCOMES_STREAM,
    OUTPUT_PREFIX,
    OUTPUT_STREAM,
    PARKED_PREFIX,
    PARKED_STREAM,
    PEOPLE_BUCKET,
    QUARANTINE_BUCKET,
    QUEUES_BUCKET,
    RATELIMITS_BUCKET,
    REGISTRY_SECRETS_BUCKET,
    SEALS_STREAM,
    SEALS_SUBJECT,
    SECRETS_BUCKET,
    SNAPSHOTS_BUCKET,
)

PARKED_MAX_AGE_S = 30 * 86_400.0
MAX_EVENT_CONSUMERS = 100_000
QUEUE_VALUE_MAX_BYTES = 768 * 1024
OUTPUT_BATCH_BYTES = 64 * 1024
"""Lines per ``JY_OUTPUT`` message, at most (``services.node.output`` batches up to it)."""
OUTPUT_LINE_BYTES = 16 * 1024
"""A longer line is cut (Docker splits its log lines at 16 KiB too)."""
"""A queue value holds up to 10,000 session ids (``events.queues``): 670,000 bytes at most."""


def events_stream_config(settings: NatsSettings) -> api.StreamConfig:
    # Audit is forever: no age or count limits, no deletes or purges. Message TTLs, rollups,
    # schedules and counters are one-way doors that would let a publisher erase history, so
    # they are never switched on for this stream.
    return api.StreamConfig(
        name=EVENTS_STREAM,
        description="Jetyard event log: every state change, forever",
        subjects=[f"{EVENTS_PREFIX}.>"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        max_age=0,
        max_msgs=-1,
        max_bytes=-1,
        max_msgs_per_subject=-1,
        max_msg_size=settings.max_event_bytes,
        discard=api.DiscardPolicy.NEW,
        num_replicas=settings.replicas,
        duplicate_window=settings.duplicate_window_s,
        deny_delete=True,
        deny_purge=True,
        # Every agent, scheduler replica, projection and live feed reads through its own
        # consumer. nats-server 2.15 caps a stream at 1,000 consumers unless it names its own
        # limit (and reads 0 or -1 as "the default"), which stops a cluster near 1,000 nodes.
        max_consumers=MAX_EVENT_CONSUMERS,
        allow_direct=True,
        allow_atomic=True,
        allow_rollup_hdrs=False,
        allow_msg_ttl=False,
    )


def seals_stream_config(settings: NatsSettings) -> api.StreamConfig:
    # Kept like the log it seals: forever, never edited. One subject, one writer at a time
    # (the sealer guards each seal on the subject's last sequence).
    return api.StreamConfig(
        name=SEALS_STREAM,
        description="Jetyard seals: a signed hash chain over every event of JY_EVENTS",
        subjects=[SEALS_SUBJECT],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        max_age=0,
        max_msgs=-1,
        max_bytes=-1,
        max_msg_size=settings.max_event_bytes,
        discard=api.DiscardPolicy.NEW,
        num_replicas=settings.replicas,
        duplicate_window=settings.duplicate_window_s,
        deny_delete=True,
        deny_purge=True,
        allow_direct=True,
        allow_rollup_hdrs=False,
        allow_msg_ttl=False,
    )


def commands_stream_config(settings: NatsSettings) -> api.StreamConfig:
    return api.StreamConfig(
        name=COMMANDS_STREAM,
        description="Jetyard commands: work queue, one consumer per owning service",
        subjects=[f"{COMMANDS_PREFIX}.>"],
        retention=api.RetentionPolicy.WORK_QUEUE,
        storage=api.StorageType.FILE,
        max_age=settings.commands_max_age_s,
        num_replicas=settings.replicas,
        duplicate_window=min(settings.duplicate_window_s, settings.commands_max_age_s),
        max_msg_size=settings.max_event_bytes,
        allow_direct=True,
    )


def outcomes_stream_config(settings: NatsSettings) -> api.StreamConfig:
    return api.StreamConfig(
        name=OUTCOMES_STREAM,
        description="Jetyard command outcomes: exactly one per command id",
        subjects=[f"{OUTCOMES_PREFIX}.>"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        max_age=settings.outcomes_max_age_s,
        max_msgs_per_subject=1,
        num_replicas=settings.replicas,
        duplicate_window=min(settings.duplicate_window_s, settings.outcomes_max_age_s),
        allow_direct=True,
    )


def parked_stream_config(settings: NatsSettings) -> api.StreamConfig:
    return api.StreamConfig(
        name=PARKED_STREAM,
        description="Jetyard poison commands, parked with the reason they could not be handled",
        subjects=[f"{PARKED_PREFIX}.>"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        max_age=PARKED_MAX_AGE_S,
        num_replicas=settings.replicas,
        duplicate_window=min(settings.duplicate_window_s, PARKED_MAX_AGE_S),
        allow_direct=True,
    )


def access_stream_config(settings: NatsSettings) -> api.StreamConfig:
    # Kept for a bounded time (unlike the event log): it grows with every request.
    return api.StreamConfig(
        name=ACCESS_STREAM,
        description="Jetyard access log: every request and command, by domain",
        subjects=[f"{ACCESS_PREFIX}.>"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        max_age=settings.access_log_max_age_s,
        num_replicas=settings.replicas,
        deny_delete=True,
        deny_purge=True,
        allow_direct=True,
    )


def output_stream_config(settings: NatsSettings) -> api.StreamConfig:
    # Not history: a kernel's output is kept whole in ``jy-logs`` once it ends. Here only the
    # last messages of each kernel (its subject) stay, so a chatty kernel costs a bounded
    # amount and readers see the tail; they notice the dropped head from the line numbers.
    return api.StreamConfig(
        name=OUTPUT_STREAM,
        description="Jetyard live kernel output: the last messages of each kernel",
        subjects=[f"{OUTPUT_PREFIX}.>"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        max_age=settings.output_max_age_s,
        max_bytes=settings.output_max_bytes,
        max_msgs_per_subject=settings.output_messages_per_kernel,
        max_msg_size=OUTPUT_BATCH_BYTES + OUTPUT_LINE_BYTES + 1024,
        discard=api.DiscardPolicy.OLD,
        num_replicas=settings.replicas,
        duplicate_window=min(settings.duplicate_window_s, settings.output_max_age_s),
        allow_direct=True,  # an agent resumes from its kernel's last message
    )


def stream_configs(settings: NatsSettings) -> tuple[api.StreamConfig, ...]:
    """Every stream, in the order they are declared."""
    return (
        events_stream_config(settings),
        commands_stream_config(settings),
        outcomes_stream_config(settings),
        parked_stream_config(settings),
        access_stream_config(settings),
        output_stream_config(settings),
        seals_stream_config(settings),
    )


def bucket_configs(settings: NatsSettings) -> tuple[api.KeyValueConfig, ...]:
    """Every key-value bucket, in the order they are declared."""
    ttl = 3 * settings.heartbeat_interval_s
    heartbeats = api.KeyValueConfig(
        bucket=HEARTBEATS_BUCKET,
        history=1,
        ttl=ttl,
        limit_marker_ttl=ttl,
        replicas=settings.replicas,
        storage=api.StorageType.FILE,
    )
    kept = tuple(
        api.KeyValueConfig(bucket=bucket, history=1, replicas=settings.replicas)
        for bucket in (
            LEASES_BUCKET,
            SNAPSHOTS_BUCKET,
            SECRETS_BUCKET,
            REGISTRY_SECRETS_BUCKET,
            PEOPLE_BUCKET,
            CREDENTIALS_BUCKET,
            QUARANTINE_BUCKET,
        )
    )
    # Derived state, replaced whole by the scheduler; no TTL: an idle group's empty queue stays.
    queues = api.KeyValueConfig(
        bucket=QUEUES_BUCKET,
        history=1,
        max_value_size=QUEUE_VALUE_MAX_BYTES,
        storage=api.StorageType.FILE,
        replicas=settings.replicas,
    )
    # A nonce must outlive the window on both sides of the server's clock.
    expiring = tuple(
        api.KeyValueConfig(bucket=bucket, history=1, ttl=ttl, replicas=settings.replicas)
        for bucket, ttl in (
            (NONCES_BUCKET, 2 * settings.signature_window_s + 60),
            (GRANTS_BUCKET, GRANTS_TTL_S),  # outlives every cookie a revocation must void
            (LOGINS_BUCKET, settings.login_ttl_s),
            (RATELIMITS_BUCKET, 120.0),  # a bucket untouched for a minute is full again
        )
    )
    return (heartbeats, *kept, queues, *expiring)
