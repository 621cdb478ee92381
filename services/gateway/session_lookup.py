"""How a session resolver finds a session: the owner its view row names, and the session only
if the caller may read it (another tenant's looks like none). Reads the sessions view."""

from __future__ import annotations

from typing import Any

from strawberry.types import Info

from commands.authorisation import can_read_session
from projections.queries import SessionView
from projections.session_tables import SessionRecord
from schemas.tenancy import SessionOwner
from services.gateway.context import Context, ctx_of, who


def owner_of(record: SessionRecord) -> SessionOwner | None:
    if record.access_key is None or record.user_id is None or record.domain is None:
        return None
    return SessionOwner(
        access_key=record.access_key,
        user_id=record.user_id,
        project_id=record.project_id or "",
        domain=record.domain,
    )


async def visible_session(info: Info[Context, Any], session_id: str) -> SessionView | None:
    """The session if the caller may read it; another tenant's looks like no session."""
    principal = who(info)
    view = await ctx_of(info).views.session(session_id)
    if view is None or not can_read_session(principal, owner_of(view.record)):
        return None
    return view
