"""What the gateway reads of the endpoints view (SQL), behind one small protocol whose answers
are the projection's own read shapes (``projections.endpoints.tables``). Reads the
``endpoints``, ``endpoint_revisions``, ``endpoint_replicas``, ``endpoint_tokens`` and
``endpoint_scalings`` tables; no subjects."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from projections.endpoints import queries as endpoint_queries
from projections.endpoints.queries import EndpointPage, Scope
from projections.endpoints.tables import (
    EndpointRecord,
    ReplicaRecord,
    RevisionRecord,
    ScalingRecord,
    TokenRecord,
)


class EndpointViews(Protocol):
    async def page(
        self, *, scope: Scope, first: int, after: str | None, destroyed: bool = False
    ) -> EndpointPage: ...

    async def get(self, endpoint_id: str) -> EndpointRecord | None: ...

    async def revisions(self, endpoint_id: str) -> list[RevisionRecord]: ...

    async def replicas(self, endpoint_id: str, *, ended: int = 0) -> list[ReplicaRecord]: ...

    async def tokens(self, endpoint_id: str) -> list[TokenRecord]: ...

    async def scalings(self, endpoint_id: str, *, last: int) -> list[ScalingRecord]: ...


class SqlEndpointViews:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def page(
        self, *, scope: Scope, first: int, after: str | None, destroyed: bool = False
    ) -> EndpointPage:
        return await endpoint_queries.list_endpoints(
            self._engine, scope=scope, first=first, after=after, destroyed=destroyed
        )

    async def get(self, endpoint_id: str) -> EndpointRecord | None:
        return await endpoint_queries.get_endpoint(self._engine, endpoint_id)

    async def revisions(self, endpoint_id: str) -> list[RevisionRecord]:
        return await endpoint_queries.revisions(self._engine, endpoint_id)

    async def replicas(self, endpoint_id: str, *, ended: int = 0) -> list[ReplicaRecord]:
        return await endpoint_queries.replicas(self._engine, endpoint_id, ended=ended)

    async def tokens(self, endpoint_id: str) -> list[TokenRecord]:
        return await endpoint_queries.tokens(self._engine, endpoint_id)

    async def scalings(self, endpoint_id: str, *, last: int) -> list[ScalingRecord]:
        return await endpoint_queries.scalings(self._engine, endpoint_id, last=last)
