"""How an endpoint resolver finds an endpoint and what the caller may do with it. An
endpoint's replicas are sessions of its owner, so the session rules of
``commands/authorisation.py`` decide: its owner and the administrators of its domain act on it,
a monitor of its domain reads it, a superadmin does everything. Another user's endpoint answers
exactly like one that does not exist. Reads the endpoints view; writes nothing."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import DOMAIN_READERS, Principal, can_act_on_session, can_read_session
from projections.endpoints.queries import Scope
from projections.endpoints.tables import EndpointRecord
from schemas.ids import TOKEN_PATTERN
from schemas.serving import EndpointStatus, endpoint_id_for, endpoint_name_problem
from services.gateway.context import Context, ctx_of, forbidden, who


def scope_of(me: Principal) -> Scope:
    """The endpoints a caller's listing may hold (the filter is the authorisation)."""
    if me.reads_every_domain:
        return Scope()
    if me.role in DOMAIN_READERS:
        return Scope(domain=me.domain)
    return Scope(user_id=me.user_id)


def not_found(ref: str) -> GraphQLError:
    return GraphQLError(f"there is no endpoint {ref[:80]!r}", extensions={"code": "not-found"})


async def resolve(info: Info[Context, Any], ref: str) -> EndpointRecord | None:
    """The endpoint ``ref`` names (its id, else its name) if the caller may read it."""
    me = who(info)
    views = ctx_of(info).views.endpoints
    candidates = [ref] if TOKEN_PATTERN.match(ref) else []
    if endpoint_name_problem(ref) is None:
        candidates.append(endpoint_id_for(ref))
    for endpoint_id in candidates:
        found = await views.get(endpoint_id)
        if found is not None and can_read_session(me, found.owner):
            return found
    return None


async def acting_on(info: Info[Context, Any], ref: str) -> EndpointRecord:
    """The endpoint the caller changes: one they may act on and that is not destroyed, else
    "not found" (another user learns nothing), or "forbidden" for a monitor who reads it."""
    found = await resolve(info, ref)
    if found is None or found.status is EndpointStatus.DESTROYED:
        raise not_found(ref)
    if not can_act_on_session(who(info), found.owner):
        raise forbidden(info, "monitors read endpoints; they do not change them")
    return found
