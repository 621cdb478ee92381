"""How a session resolver finds a session: the owner its view row names, and the session only
if the caller may read it (another tenant's looks like none); for subscriptions, the owner the
session's first event names. Reads the sessions view and the session's events."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError
from pydantic import ValidationError
from strawberry.types import Info

from commands.authorisation import can_read_session
from events.envelope import StoredEvent
from events.store import EventStore, decode
from projections.queries import SessionView
from projections.sessions.tables import SessionRecord
from schemas.subjects import AggregateType, event_subject
from schemas.tenancy import SessionOwner
from services.gateway.context import Context, ctx_of, who
from services.gateway.core.views import Views


def owner_of(record: SessionRecord) -> SessionOwner | None:
    if record.access_key is None or record.user_id is None or record.domain is None:
        return None
    return SessionOwner(
        access_key=record.access_key,
        user_id=record.user_id,
        project_id=record.project_id or "",
        domain=record.domain,
    )


async def visible_session(
    info: Info[Context, Any], session_id: str, views: Views | None = None
) -> SessionView | None:
    """The session if the caller may read it; another tenant's looks like no session.
    ``views``: those to read (the live ones unless given, e.g. the past's)."""
    principal = who(info)
    view = await (views or ctx_of(info).views).session(session_id)
    if view is None or not can_read_session(principal, owner_of(view.record)):
        return None
    return view


def owner_named(requested: StoredEvent) -> SessionOwner | None:
    """The owner a session's first event (``SessionRequested``) names; None from before
    tenancy (or when it names none that can be read)."""
    owner = requested.envelope.payload.get("owner")
    try:
        return None if owner is None else SessionOwner.model_validate(owner)
    except ValidationError:  # a malformed first event: readable by superadmins only
        return None


async def owner_on_log(ctx: Context, session_id: str) -> SessionOwner | None:
    """The owner a session's first event names (subscriptions read the log, not the view,
    which may lag); raises "no session" if there is no first event."""
    subject = event_subject(AggregateType.SESSION, session_id)
    first = await EventStore(ctx.bus).reader.read_subject(subject, limit=1)
    if not first:
        raise GraphQLError(f"there is no session {session_id}", extensions={"code": "not-found"})
    return owner_named(decode(first[0]))
