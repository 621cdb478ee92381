"""The gateway's ``Views`` over the projections' SQL tables (SQLite or PostgreSQL): the
projections' queries on the gateway's engine, answers passed on as they come."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from projections import queries
from projections.db import create_engine
from projections.queries import NodeView, SessionPage, SessionView
from projections.runner import create_tables
from projections.settings import ProjectionSettings
from services.gateway.node_views import NodeViews
from services.gateway.usage_views import SqlUsageViews, UsageViews
from services.gateway.vfolder_views import FolderViews, SqlFolderViews


class SqlViews:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self.folders: FolderViews = SqlFolderViews(engine)
        self.usage: UsageViews = SqlUsageViews(engine)
        self._nodes = NodeViews(engine)

    @classmethod
    async def open(cls, settings: ProjectionSettings, bus: Bus) -> SqlViews:
        engine = create_engine(settings.database_url)
        # The projector may not have run yet: empty tables answer "nothing yet" instead of
        # failing, and /healthz says "not caught up" until it has.
        await create_tables(engine)
        return cls(engine)

    async def sessions(
        self,
        *,
        first: int,
        after: str | None,
        status: str | None,
        domain: str | None = None,
        user_id: str | None = None,
        newest_first: bool = False,
        with_history: bool = True,
    ) -> SessionPage:
        return await queries.list_sessions(
            self._engine,
            first=first,
            after=after,
            status=status,
            domain=domain,
            user_id=user_id,
            with_history=with_history,
            newest_first=newest_first,
        )

    async def count_sessions(
        self, *, status: str | None, domain: str | None = None, user_id: str | None = None
    ) -> int:
        return await queries.count_sessions(
            self._engine, status=status, domain=domain, user_id=user_id
        )

    async def sessions_by_id(self, session_ids: list[str]) -> list[SessionView]:
        return await queries.get_sessions(self._engine, session_ids)

    async def session(self, session_id: str) -> SessionView | None:
        return await queries.get_session(self._engine, session_id)

    async def nodes(self, node_ids: Sequence[str] | None = None) -> list[NodeView]:
        if node_ids is None:
            return await self._nodes.all()
        return await queries.list_nodes(self._engine, node_ids=node_ids)

    async def position(self) -> int:
        return await queries.position(self._engine)

    async def wait_for(self, seq: int, timeout: float) -> bool:
        return await queries.wait_for_position(self._engine, seq, timeout)

    async def close(self) -> None:
        await self._engine.dispose()
