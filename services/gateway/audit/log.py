"""``auditLog``: the log as auditors read it — every aggregate type, filtered by aggregate,
event name, actor, domain, stored time and position, a page at a time, each event with its
actor, tenant, cause and correlation. Superadmins and superauditors read every event (or one
domain's), domain admins and auditors only their domain's: events that name it (its own
creation, a project or user made in it, even by a superadmin), else whose tenant is it; an
event of another domain is never shown, not even counted. Environment values are hidden
(``redact``).

Reads ``JY_EVENTS`` with batched direct gets (``next_by_subj`` on the narrowest subject the
filters allow) from the position after ``after`` (or the first stored at ``since``), looking
at no more than ``MAX_SCAN`` events per answer: a page may come back short with ``hasMore``,
and ``nextAfter`` goes on from where it stopped. Writes nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from commands.authorisation import can_read_log
from commands.directory import Directory
from commands.tenancy import Keypair, User
from events.direct import DirectReader, RawMessage
from events.envelope import Envelope
from events.store import EventStore, decode
from schemas.ids import check_token
from schemas.principal import ActorKind
from schemas.subjects import (
    EVENT_NAME_HEADER,
    EVENTS_STREAM,
    AggregateType,
    event_subject,
    events_of,
)
from services.gateway.audit.queries import BATCH, MAX_NAMES, MAX_PAGE, MAX_SCAN, redact
from services.gateway.context import Context, ctx_of, forbidden, invalid, who

STORED_AT = "Nats-Time-Stamp"


@strawberry.type(description="One event of the log, as stored, with who caused it and why.")
class AuditEvent:
    seq: int = strawberry.field(description="its position in the log")
    name: str
    aggregate_type: str
    aggregate_id: str
    version: int = strawberry.field(description="the aggregate's version after it")
    at: datetime = strawberry.field(description="when its writer decided it")
    actor: str = strawberry.field(description="who caused it: kind:id")
    domain: str = strawberry.field(
        description="the domain it concerns: the one it names (a domain, a project or user made "
        "in it), else its tenant's"
    )
    project: str | None
    event_id: str
    causation_id: str = strawberry.field(description="the command or event that caused it")
    correlation_id: str
    payload: JSON = strawberry.field(description="its fields; env values are hidden")


@strawberry.type
class AuditLogConnection:
    events: list[AuditEvent] = strawberry.field(description="oldest first")
    next_after: int = strawberry.field(description="pass as `after` for the next page")
    has_more: bool = strawberry.field(description="the log goes on past `nextAfter`")
    scanned: int = strawberry.field(description="events looked at for this page")


@strawberry.input(description="What to keep; every field given must match.")
class AuditFilter:
    aggregate_type: str | None = None
    aggregate_id: str | None = strawberry.field(default=None, description="needs aggregateType")
    names: list[str] | None = strawberry.field(default=None, description="event names")
    actor: str | None = strawberry.field(
        default=None, description="kind:id (user:…, keypair:…, service:…) or a bare id"
    )
    domain: str | None = strawberry.field(
        default=None, description="one domain's events (superadmins, superauditors)"
    )
    since: datetime | None = strawberry.field(
        default=None, description="stored at or after (when `after` is 0)"
    )
    until: datetime | None = strawberry.field(default=None, description="stored at or before")
    until_seq: int | None = strawberry.field(default=None, description="at or before")


class _Wanted:
    """The filters, checked and ready to match."""

    def __init__(self, f: AuditFilter, domain: str | None, directory: Directory) -> None:
        self.directory = directory
        self.kind = _kind(f.aggregate_type)
        self.ident = None if f.aggregate_id is None else check_token(f.aggregate_id, "id")
        if self.ident is not None and self.kind is None:
            raise invalid("aggregateId needs aggregateType")
        if f.names is not None and len(f.names) > MAX_NAMES:
            raise invalid(f"at most {MAX_NAMES} names")
        self.names = None if f.names is None else {check_token(n, "event name") for n in f.names}
        self.actor = _actor(f.actor)
        self.domain = domain
        self.until = f.until
        self.until_seq = f.until_seq

    @property
    def subject(self) -> str:
        if self.kind is not None and self.ident is not None:
            return event_subject(self.kind, self.ident)
        return events_of(self.kind)

    def beyond(self, message: RawMessage) -> bool:
        if self.until_seq is not None and message.seq > self.until_seq:
            return True
        stored = message.headers.get(STORED_AT)
        if self.until is not None and stored:
            return datetime.fromisoformat(stored.replace("Z", "+00:00")) > self.until
        return False

    def keep(self, message: RawMessage) -> AuditEvent | None:
        if self.names is not None and message.headers.get(EVENT_NAME_HEADER) not in self.names:
            return None
        try:
            envelope = decode(message).envelope
        except ValueError:
            return None  # unreadable: quarantined by its consumers, shown by `jetyard log`
        domain = _concerned(envelope, self.directory)
        if self.domain is not None and domain != self.domain:
            return None
        actor = f"{envelope.actor.kind.value}:{envelope.actor.id}"
        if self.actor is not None and self.actor not in (actor, envelope.actor.id):
            return None
        return AuditEvent(
            seq=message.seq, name=envelope.name, aggregate_type=envelope.aggregate_type.value,
            aggregate_id=envelope.aggregate_id, version=envelope.aggregate_version,
            at=envelope.occurred_at, actor=actor, domain=domain,
            project=envelope.tenant.project, event_id=envelope.event_id,
            causation_id=envelope.causation_id, correlation_id=envelope.correlation_id,
            payload=redact(envelope.payload),
        )  # fmt: skip


def _concerned(envelope: Envelope, directory: Directory) -> str:
    """The domain an event concerns: the one it names — a domain, or a project, user or
    keypair made in it (a superadmin's command carries the superadmin's own tenant) — else,
    for a user's or keypair's later events, which name no domain, the domain the directory
    holds it in; else its tenant's."""
    kind, ident = envelope.aggregate_type, envelope.aggregate_id
    if kind is AggregateType.DOMAIN:
        return ident
    named = envelope.payload.get("domain")
    if isinstance(named, str):
        return named
    found: User | Keypair | None = None
    if kind is AggregateType.USER:
        found = directory.users.get(ident)
    elif kind is AggregateType.KEYPAIR:
        found = directory.keypairs.get(ident)
    return found.domain if found is not None else envelope.tenant.domain


def _kind(text: str | None) -> AggregateType | None:
    if text is None:
        return None
    try:
        return AggregateType(text)
    except ValueError:
        kinds = ", ".join(k.value for k in AggregateType)
        raise invalid(f"aggregateType must be one of {kinds}, got {text[:40]!r}") from None


def _actor(text: str | None) -> str | None:
    if text is None:
        return None
    kind, colon, ident = text.partition(":")
    if not colon:
        return check_token(kind, "actor")
    if kind not in {k.value for k in ActorKind}:
        raise invalid(f"an actor is user:, keypair: or service: and an id, got {text[:40]!r}")
    return f"{kind}:{check_token(ident, 'actor id')}"


def _scope(info: Info[Context, Any], asked: str | None) -> str | None:
    """The one domain the caller reads (None: every domain)."""
    me = who(info)
    if me.reads_every_domain:
        return None if asked is None else check_token(asked, "domain")
    if asked not in (None, me.domain) or not can_read_log(me, me.domain):
        raise forbidden(info, "only auditors and administrators read the log, of their domain")
    return me.domain


@strawberry.type
class AuditLogQuery:
    @strawberry.field(
        description="The log's events after position `after` (or from `filter.since`), oldest "
        "first, `first` of them that match `filter`. Superadmins and superauditors read every "
        "domain's; domain admins and auditors their domain's."
    )
    async def audit_log(
        self,
        info: Info[Context, Any],
        after: int = 0,
        first: int = 100,
        filter: AuditFilter | None = None,
    ) -> AuditLogConnection:
        given = filter or AuditFilter()
        if not 1 <= first <= MAX_PAGE:
            raise invalid(f"first must be 1 to {MAX_PAGE}, got {first}")
        if after < 0:
            raise invalid(f"after must not be negative, got {after}")
        wanted = _Wanted(given, _scope(info, given.domain), ctx_of(info).directory)
        ctx = ctx_of(info)
        reader = DirectReader(
            ctx.bus.replies, EVENTS_STREAM, timeout=ctx.bus.settings.request_timeout_s
        )
        cursor = after
        if after == 0 and given.since is not None:
            found = await reader.seq_before(given.since, wanted.subject)
            cursor = found if found is not None else await EventStore(ctx.bus).stream_last_seq()
        events: list[AuditEvent] = []
        scanned, more = 0, True
        while more and len(events) < first and scanned < MAX_SCAN:
            batch = await reader.read_subject(wanted.subject, from_seq=cursor + 1, limit=BATCH)
            more = len(batch) == BATCH
            for message in batch:
                if wanted.beyond(message):
                    more = False
                    break
                if len(events) == first:
                    more = True
                    break
                scanned += 1
                cursor = message.seq
                kept = wanted.keep(message)
                if kept is not None:
                    events.append(kept)
        return AuditLogConnection(events=events, next_after=cursor, has_more=more, scanned=scanned)
