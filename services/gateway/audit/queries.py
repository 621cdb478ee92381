"""The audit queries: who did what. ``eventLog``: the events of one session, node or agent as
the log holds them, a page at a time, optionally only some event names; superadmins and
superauditors read any, a domain's administrators and auditors their domain's sessions;
environment values (``env``) are shown by name only: they may hold secrets. ``accessLog``: the
requests and WebSocket connections the gateway recorded (``core.access_log``); superadmins and
superauditors read every domain's, a domain's administrators, monitors and auditors theirs
(``refusedOnly``: the refusals alone). Reads ``ev.<aggregate>.<id>`` with batched direct gets,
and ``JY_ACCESS``; writes nothing. The whole log, filtered: ``log.py`` (``auditLog``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.scalars import JSON
from strawberry.types import Info

from commands.authorisation import LOG_READERS, Principal, can_read_domain, can_read_log
from events.direct import DirectReader, RawMessage
from events.store import decode
from schemas.ids import check_token
from schemas.subjects import EVENT_NAME_HEADER, EVENTS_STREAM, AggregateType, event_subject
from services.gateway.context import Context, ctx_of, forbidden, who
from services.gateway.core.session_owners import owner_on_log

READABLE = {k.value: k for k in (AggregateType.SESSION, AggregateType.NODE, AggregateType.AGENT)}
MAX_PAGE = 500
MAX_NAMES = 32
BATCH = 256
MAX_SCAN = 5000
"""Events looked at per answer when filtering by name; then it answers what it found, and
``nextAfter`` goes on from there."""
HIDDEN = "(hidden)"


@strawberry.type(description="One event of an aggregate, as stored.")
class LoggedEvent:
    seq: int = strawberry.field(description="its position in the log (JY_EVENTS)")
    name: str
    version: int = strawberry.field(description="the aggregate's version after it")
    schema_version: int
    at: datetime
    actor: str = strawberry.field(description="who caused it: kind:id")
    event_id: str
    causation_id: str
    correlation_id: str
    payload: JSON = strawberry.field(description="its fields; env values are hidden")


@strawberry.type
class EventLogConnection:
    aggregate: str
    id: str
    events: list[LoggedEvent] = strawberry.field(description="oldest first")
    next_after: int = strawberry.field(description="pass as `after` for the next page")
    has_more: bool
    last_seq: int = strawberry.field(description="the aggregate's newest event (0: none)")


def redact(value: Any) -> Any:
    """The payload with every ``env`` mapping's values hidden (names kept)."""
    if isinstance(value, dict):
        return {
            k: dict.fromkeys(v, HIDDEN) if k == "env" and isinstance(v, dict) else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def logged(message: RawMessage) -> LoggedEvent:
    env = decode(message).envelope
    return LoggedEvent(
        seq=message.seq, name=env.name, version=env.aggregate_version,
        schema_version=env.schema_version, at=env.occurred_at,
        actor=f"{env.actor.kind.value}:{env.actor.id}", event_id=env.event_id,
        causation_id=env.causation_id, correlation_id=env.correlation_id,
        payload=redact(env.payload),
    )  # fmt: skip


def _invalid(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "invalid"})


async def _authorise(
    info: Info[Context, Any], me: Principal, kind: AggregateType, ident: str
) -> None:
    if me.reads_every_domain:
        return
    if kind is not AggregateType.SESSION or me.role not in LOG_READERS:
        raise forbidden(
            info,
            "only superadmins and superauditors read nodes' and agents' events; domain admins "
            "and auditors, sessions'",
        )
    owner = await owner_on_log(ctx_of(info), ident)
    if owner is None or not can_read_log(me, owner.domain):
        raise GraphQLError(f"there is no session {ident}", extensions={"code": "not-found"})


@strawberry.type
class AccessEntry:
    seq: int
    at: datetime
    domain: str | None
    user_id: str | None
    access_key: str | None
    role: str | None
    source: str
    operation: str
    outcome: str


@strawberry.type
class AccessLogQuery:
    @strawberry.field(
        description="Requests and WebSocket connections, oldest first from `since` or after "
        "`after` (a seq). Superadmins and superauditors see every domain (or one), domain "
        "admins, monitors and auditors theirs. `refusedOnly`: only what was refused."
    )
    async def access_log(
        self,
        info: Info[Context, Any],
        first: int = 100,
        after: int | None = None,
        since: datetime | None = None,
        domain: str | None = None,
        refused_only: bool = False,
    ) -> list[AccessEntry]:
        principal = who(info)
        if principal.reads_every_domain:
            scope = domain
        elif can_read_domain(principal, principal.domain) and domain in (None, principal.domain):
            scope = principal.domain
        else:
            raise forbidden(info, "only administrators may read the access log")
        records = await ctx_of(info).services.access.read(
            domain=scope, after_seq=after or 0, since=since, first=first
        )
        return [
            AccessEntry(seq=seq, **record.model_dump())
            for seq, record in records
            if not refused_only or record.outcome != "ok"
        ]


@strawberry.type
class EventLogQuery:
    @strawberry.field(
        description="The events of one session, node or agent (aggregate: session | node | "
        "agent), oldest first, `first` of them after the log position `after`; `names` keeps "
        "only those event names. Superadmins; a domain's admins for its sessions."
    )
    async def event_log(
        self,
        info: Info[Context, Any],
        aggregate: str,
        id: strawberry.ID,
        after: int = 0,
        first: int = 50,
        names: list[str] | None = None,
    ) -> EventLogConnection:
        me = who(info)
        kind = READABLE.get(aggregate)
        if kind is None:
            raise _invalid(f"aggregate must be one of {', '.join(READABLE)}, got {aggregate!r}")
        if not 1 <= first <= MAX_PAGE:
            raise _invalid(f"first must be 1 to {MAX_PAGE}, got {first}")
        if after < 0:
            raise _invalid(f"after must not be negative, got {after}")
        if names is not None and len(names) > MAX_NAMES:
            raise _invalid(f"at most {MAX_NAMES} names")
        # A bad id or name is ``invalid`` (errors.ErrorCodes answers check_token's error so).
        ident = check_token(str(id), f"{aggregate} id")
        wanted = None if names is None else {check_token(n, "event name") for n in names}
        await _authorise(info, me, kind, ident)
        ctx = ctx_of(info)
        timeout = ctx.bus.settings.request_timeout_s
        reader = DirectReader(ctx.bus.replies, EVENTS_STREAM, timeout=timeout)
        subject = event_subject(kind, ident)
        events: list[LoggedEvent] = []
        cursor, scanned, more = after, 0, False
        while not more:
            batch = await reader.read_subject(subject, from_seq=cursor + 1, limit=BATCH)
            for message in batch:
                if wanted is not None and message.headers.get(EVENT_NAME_HEADER) not in wanted:
                    cursor = message.seq
                    continue
                if len(events) == first:
                    more = True
                    break
                events.append(logged(message))
                cursor = message.seq
            scanned += len(batch)
            if len(batch) < BATCH:
                break
            more = more or scanned >= MAX_SCAN
        last = await reader.last_of([subject])
        return EventLogConnection(
            aggregate=kind.value, id=ident, events=events, next_after=cursor, has_more=more,
            last_seq=last[subject].seq if subject in last else 0,
        )  # fmt: skip
