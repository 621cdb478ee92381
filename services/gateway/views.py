"""What the gateway reads from the projections (SQL views), behind one small protocol whose
answers are the projections' own query types (``projections.queries``): one read shape per view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from projections.queries import NodeView, SessionPage, SessionView
from services.gateway.usage_views import UsageViews
from services.gateway.vfolder_views import FolderViews


class Views(Protocol):
    folders: FolderViews
    """The vfolders view (``services.gateway.vfolder_views``)."""
    usage: UsageViews
    """The usage view (``services.gateway.usage_views``)."""

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
