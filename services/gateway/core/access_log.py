"""The access log: one record per HTTP request and per WebSocket connection (principal, source
address, operation, outcome, refusals included), kept on ``access.<domain>`` in ``JY_ACCESS`` and
read back by admins. Writes and reads only that stream."""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime

import nats.errors
from nats.js import api
from pydantic import AwareDatetime, BaseModel, ConfigDict

from events.bus import Bus
from schemas.subjects import ACCESS_PREFIX, ACCESS_STREAM, access_subject

log = logging.getLogger(__name__)

MAX_READ = 500


class AccessRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    at: AwareDatetime
    domain: str | None
    user_id: str | None
    access_key: str | None
    role: str | None
    source: str
    operation: str
    """``POST /graphql createSession,sessions``, ``login``, ``ws /graphql sessionStatus``..."""
    outcome: str
    """``ok``, ``denied: <why>``, ``rejected: <code>``, ``unauthenticated: <code>``..."""


class AccessLog:
    def __init__(self, bus: Bus) -> None:
        self._bus = bus

    async def record(self, record: AccessRecord) -> None:
        """Store a record. A request is never failed because its record could not be stored
        (the stream being down must not take the API down with it); that is logged loudly."""
        try:
            await self._bus.js.publish(
                access_subject(record.domain),
                record.model_dump_json().encode(),
                stream=ACCESS_STREAM,
                timeout=2.0,  # a stalled NATS must not hold the answer up
            )
        except Exception as exc:
            log.error("could not store an access record (%r): %s", exc, record)

    async def read(
        self, *, domain: str | None, after_seq: int = 0, since: datetime | None = None,
        first: int = 100,
    ) -> list[tuple[int, AccessRecord]]:  # fmt: skip
        """Records in stream order after ``after_seq`` (or from ``since``), of one domain
        (``None``: every domain, superadmins only)."""
        first = max(1, min(first, MAX_READ))
        subject = access_subject(domain) if domain is not None else f"{ACCESS_PREFIX}.>"
        config = api.ConsumerConfig(
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=30.0,
        )
        if after_seq:
            config.deliver_policy = api.DeliverPolicy.BY_START_SEQUENCE
            config.opt_start_seq = after_seq + 1
        elif since is not None:
            config.deliver_policy = api.DeliverPolicy.BY_START_TIME
            config.opt_start_time = since.astimezone(UTC)
        else:
            config.deliver_policy = api.DeliverPolicy.ALL
        sub = await self._bus.js.pull_subscribe(subject, stream=ACCESS_STREAM, config=config)
        found: list[tuple[int, AccessRecord]] = []
        try:
            while len(found) < first:
                try:
                    msgs = await sub.fetch(first - len(found), timeout=0.5)
                except (TimeoutError, nats.errors.TimeoutError):
                    break
                for msg in msgs:
                    with contextlib.suppress(ValueError):
                        record = AccessRecord.model_validate_json(msg.data)
                        found.append((msg.metadata.sequence.stream, record))
                if not msgs:
                    break
        finally:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
        return found


def now() -> datetime:
    return datetime.now(UTC)
