"""A synthetic event log for ``bench.audit``: real session envelopes written to ``JY_EVENTS``
fast, as the event store stores them (body = the envelope's JSON, headers ``Jy-Event`` and
``Jy-Event-Id``), but without the store's per-aggregate guard, so a million go in in seconds.

Each session is a ``SessionRequested`` (owner none: admitted without a quota check) followed by
its ``SessionCancelled``, so the log is valid for the invariant check (legal transitions,
versions 1 and 2, one decision per cause, nothing left reserved). The envelopes are serialised
once with placeholder ids and the ids substituted per session (the placeholders have the ids'
length); ``check_template`` shows the result is byte for byte what pydantic writes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime

from nats.js.api import PubAck

from events.bus import Bus
from events.domain.session import SessionCancelled, SessionRequested
from events.envelope import Envelope
from schemas.ids import event_id_for, kernel_id_for, new_id, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import EVENT_ID_HEADER, EVENT_NAME_HEADER, AggregateType, event_subject

SESSION = AggregateType.SESSION
SPEC = SessionSpec(
    image="jetyard-busybox:latest",
    kernels=(KernelSpec(resources=ResourceSlots(cpu_milli=1000, memory_bytes=1 << 30)),),
)
AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
ACTOR = Actor.service("bench")
# Placeholders of a uuid's length, each unique in the serialised envelope.
EVENT_PH, SESSION_PH, CAUSE_PH, KERNEL_PH = (
    f"{n:08d}-0000-4000-8000-000000000000" for n in (1, 2, 3, 4)
)
WINDOW = 2000
"""Publishes awaiting their ack (under nats-py's own stall limit of 4,000)."""


def envelope(
    event: SessionRequested | SessionCancelled, session: str, version: int, cause: str
) -> Envelope:
    return Envelope(
        event_id=event_id_for(cause, SESSION.value, session, version),
        name=event.event_name, schema_version=event.schema_version,
        aggregate_type=SESSION, aggregate_id=session, aggregate_version=version,
        occurred_at=AT, causation_id=cause, correlation_id=cause, actor=ACTOR,
        tenant=SYSTEM_TENANT, payload=event.model_dump(mode="json"),
    )  # fmt: skip


def requested(kernel: str) -> SessionRequested:
    return SessionRequested(spec=SPEC, kernel_ids=(kernel,))


CANCELLED = SessionCancelled(reason="cancelled by the bench")


def _template(event: SessionRequested | SessionCancelled, version: int) -> bytes:
    return envelope(event, SESSION_PH, version, CAUSE_PH).model_dump_json().encode()


def _fill(template: bytes, event_id: str, session: str, cause: str, kernel: str = "") -> bytes:
    out = template.replace(EVENT_PH.encode(), event_id.encode(), 1)
    out = out.replace(SESSION_PH.encode(), session.encode(), 1)
    out = out.replace(CAUSE_PH.encode(), cause.encode(), 2)
    return out.replace(KERNEL_PH.encode(), kernel.encode(), 1) if kernel else out


class Templates:
    """The two envelopes serialised once, with placeholders."""

    def __init__(self) -> None:
        placeholder = envelope(requested(KERNEL_PH), SESSION_PH, 1, CAUSE_PH)
        self.requested = (
            placeholder.model_dump_json()
            .encode()
            .replace(placeholder.event_id.encode(), EVENT_PH.encode(), 1)
        )
        cancelled = envelope(CANCELLED, SESSION_PH, 2, CAUSE_PH)
        self.cancelled = (
            cancelled.model_dump_json()
            .encode()
            .replace(cancelled.event_id.encode(), EVENT_PH.encode(), 1)
        )

    def session(self, create: str, cancel: str) -> list[tuple[str, bytes, dict[str, str]]]:
        """One session's two messages: subject, body, headers."""
        sid = session_id_for(create)
        first, second = (
            event_id_for(create, SESSION.value, sid, 1),
            event_id_for(cancel, SESSION.value, sid, 2),
        )
        subject = event_subject(SESSION, sid)
        return [
            (
                subject,
                _fill(self.requested, first, sid, create, kernel_id_for(sid, 0)),
                {EVENT_NAME_HEADER: "SessionRequested", EVENT_ID_HEADER: first},
            ),
            (
                subject,
                _fill(self.cancelled, second, sid, cancel),
                {EVENT_NAME_HEADER: "SessionCancelled", EVENT_ID_HEADER: second},
            ),
        ]


def check_template(templates: Templates) -> None:
    """The substituted bytes are exactly what pydantic writes for the same envelopes."""
    create, cancel = new_id(), new_id()
    sid = session_id_for(create)
    real = [
        envelope(requested(kernel_id_for(sid, 0)), sid, 1, create),
        envelope(CANCELLED, sid, 2, cancel),
    ]
    made = templates.session(create, cancel)
    for env, (subject, data, headers) in zip(real, made, strict=True):
        assert data == env.model_dump_json().encode(), "the envelope template drifted"
        assert subject == env.subject and headers[EVENT_ID_HEADER] == env.event_id


def messages(count: int) -> Iterator[tuple[str, bytes, dict[str, str]]]:
    """``count`` messages (a whole number of sessions, the last one possibly half)."""
    templates = Templates()
    check_template(templates)
    made = 0
    while made < count:
        for message in templates.session(new_id(), new_id()):
            if made < count:
                yield message
                made += 1


async def write_log(bus: Bus, count: int) -> int:
    """Publish ``count`` messages with at most ``WINDOW`` unacknowledged; the last position."""
    waiting: deque[asyncio.Future[PubAck]] = deque()
    last = 0
    for subject, data, headers in messages(count):
        if len(waiting) >= WINDOW:
            last = max(last, (await waiting.popleft()).seq)
        waiting.append(await bus.js.publish_async(subject, data, headers=headers))
    for ack in await asyncio.gather(*waiting):
        last = max(last, ack.seq)
    return last
