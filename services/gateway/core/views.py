"""What the gateway reads from the projections (SQL views): one small protocol (``Views``) whose
answers are the projections' own query types (``projections.queries``), one read shape per
view, and its implementation over the projections' SQL tables (``SqlViews``, SQLite or
PostgreSQL: the projections' queries on the gateway's engine, answers passed on as they come).
Reads the views; no subjects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from projections import queries
from projections.db import create_engine
from projections.queries import NodeView, SessionPage, SessionView
from projections.runner import create_tables
from projections.settings import ProjectionSettings
from services.gateway.core.endpoint_views import EndpointViews, SqlEndpointViews
from services.gateway.core.folder_views import FolderViews, SqlFolderViews
from services.gateway.core.node_views import NodeViews
from services.gateway.core.usage_views import SqlUsageViews, UsageViews


class Views(Protocol):
    folders: FolderViews
    """The vfolders view (``services.gateway.core.folder_views``)."""
    usage: UsageViews
    """The usage view (``services.gateway.core.usage_views``)."""
    endpoints: EndpointViews
    """The endpoints view (``services.gateway.core.endpoint_views``)."""

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
        """A page in request order, each session with its history (``with_history``: else
        none read); ``domain`` and ``user_id`` narrow it to the owner's (the resolvers pass
        them by the caller's role); ``newest_first`` reverses the order. Cursors stay valid
        under any filter."""
        ...

    async def count_sessions(
        self, *, status: str | None, domain: str | None = None, user_id: str | None = None
    ) -> int:
        """How many sessions ``sessions`` with the same filters pages through."""
        ...

    async def sessions_by_id(self, session_ids: list[str]) -> list[SessionView]:
        """Those of ``session_ids`` that exist, with their history, in the order asked."""
        ...

    async def session(self, session_id: str) -> SessionView | None: ...

    async def nodes(self, node_ids: Sequence[str] | None = None) -> list[NodeView]:
        """Every node, or only those ids (an id of no node is left out)."""
        ...

    async def position(self) -> int: ...

    async def wait_for(self, seq: int, timeout: float) -> bool: ...


class SqlViews:
    """``Views`` over the projections' SQL tables."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self.folders: FolderViews = SqlFolderViews(engine)
        self.usage: UsageViews = SqlUsageViews(engine)
        self.endpoints: EndpointViews = SqlEndpointViews(engine)
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
