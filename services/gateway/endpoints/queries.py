"""The GraphQL endpoint queries: endpoints a page at a time and one endpoint (by id or name).
The caller's role narrows what is read (``lookup.scope_of``): a user's page holds their own
endpoints, an admin's or a monitor's their domain's, a superadmin's all. Reads the endpoints
view; writes nothing."""

from __future__ import annotations

from typing import Annotated, Any

import strawberry
from strawberry.types import Info

from projections.endpoints.queries import MAX_PAGE
from services.gateway.context import Context, ctx_of, invalid, who
from services.gateway.core.types import PageInfo
from services.gateway.endpoints.lookup import resolve, scope_of
from services.gateway.endpoints.types import Endpoint, EndpointConnection, EndpointEdge


@strawberry.type
class EndpointQuery:
    @strawberry.field(description="Model-serving endpoints the caller may see (Relay).")
    async def endpoints(
        self,
        info: Info[Context, Any],
        first: int = 50,
        after: str | None = None,
        destroyed: Annotated[bool, strawberry.argument(description="destroyed ones too")] = False,
    ) -> EndpointConnection:
        me = who(info)
        if not 1 <= first <= MAX_PAGE:
            raise invalid(f"first must be between 1 and {MAX_PAGE}, got {first}")
        # A cursor it did not hand out is invalid input (the error mapping, errors.py).
        page = await ctx_of(info).views.endpoints.page(
            scope=scope_of(me), first=first, after=after, destroyed=destroyed
        )
        return EndpointConnection(
            edges=[EndpointEdge.of(record) for record in page.rows],
            page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor),
            total_count=page.total,
        )

    @strawberry.field(description="One endpoint, by id or name; null if you cannot see it.")
    async def endpoint(self, info: Info[Context, Any], id: str) -> Endpoint | None:
        found = await resolve(info, id)
        return None if found is None else Endpoint.of(found)
