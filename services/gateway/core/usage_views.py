"""What the gateway reads of the usage view (SQL), behind one small protocol whose answers are
the projection's own lines (``projections.usage.accounting.UsageLine``). Reads the
``usage_kernels`` table; no subjects. Its open intervals are also the one record of who holds
which GPU now (the nodes view keeps a kernel's slots, not its devices): ``holding``."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from projections import queries
from projections.usage import queries as usage_queries
from projections.usage.accounting import UsageGroup, UsageLine
from projections.usage.queries import UsageScope
from projections.usage.tables import KernelInterval


class UsageViews(Protocol):
    async def usage(
        self,
        *,
        group_by: UsageGroup,
        start: datetime,
        end: datetime,
        now: datetime,
        scope: UsageScope,
    ) -> list[UsageLine]: ...

    async def holding(self) -> list[KernelInterval]:
        """Every kernel holding its slots now (with the GPUs it holds), by node and kernel."""
        ...

    async def changed(self, since: int) -> list[KernelInterval]:
        """Every interval changed after log position ``since``, oldest change first."""
        ...

    async def held_since(self, resource_group: str, since: datetime) -> list[KernelInterval]:
        """Every interval of the group still held at ``since`` or allocated after it."""
        ...

    async def waiting_owners(self, resource_group: str) -> set[tuple[str, str, str]]:
        """(domain, project id, user id) of the owners with a session waiting in the group
        (from the sessions view)."""
        ...


class SqlUsageViews:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def usage(
        self,
        *,
        group_by: UsageGroup,
        start: datetime,
        end: datetime,
        now: datetime,
        scope: UsageScope,
    ) -> list[UsageLine]:
        return await usage_queries.usage(
            self._engine, group_by=group_by, start=start, end=end, now=now, scope=scope
        )

    async def holding(self) -> list[KernelInterval]:
        return await usage_queries.holding(self._engine)

    async def changed(self, since: int) -> list[KernelInterval]:
        return await usage_queries.changed_kernels(self._engine, since)

    async def held_since(self, resource_group: str, since: datetime) -> list[KernelInterval]:
        return await usage_queries.held_since(self._engine, resource_group, since)

    async def waiting_owners(self, resource_group: str) -> set[tuple[str, str, str]]:
        return await queries.waiting_owners(self._engine, resource_group)
