"""The usage view's query: the kernels' intervals that overlap a range, narrowed to a scope,
summed by ``projections.usage.accounting``. Reads the ``usage_kernels`` table; no subjects."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from projections.usage.accounting import Ledger, UsageGroup, UsageLine
from projections.usage.tables import KernelInterval, kernel_from_row, tables

FETCH = 1000
"""Intervals read at a time: a year of a large cluster is summed without holding it all."""


@dataclass(frozen=True, slots=True)
class UsageScope:
    """What a report covers: each field given narrows it (None: any)."""

    domain: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    resource_group: str | None = None


async def usage(
    engine: AsyncEngine,
    *,
    group_by: UsageGroup,
    start: datetime,
    end: datetime,
    now: datetime,
    scope: UsageScope = UsageScope(),
) -> list[UsageLine]:
    """Each group's use in ``[start, end)``: intervals that started before ``end`` and had not
    ended by ``start``, clipped to the range (open ones up to ``min(end, now)``)."""
    k = tables().kernels
    query = select(k).where(
        k.c.started_at.is_not(None),
        k.c.started_at < end,
        or_(k.c.ended_at.is_(None), k.c.ended_at > start),
    )
    for column, value in (
        (k.c.domain, scope.domain),
        (k.c.project_id, scope.project_id),
        (k.c.user_id, scope.user_id),
        (k.c.resource_group, scope.resource_group),
    ):
        if value is not None:
            query = query.where(column == value)
    ledger = Ledger(group_by, start, end, now)
    async with engine.connect() as conn:
        result = await conn.stream(query.execution_options(yield_per=FETCH))
        async for rows in result.partitions():  # a batch per await, not a row per await
            for row in rows:
                ledger.add(kernel_from_row(row))
    return ledger.lines()


async def changed_kernels(engine: AsyncEngine, since: int) -> list[KernelInterval]:
    """Every interval allocated, started or ended by an event after log position ``since``,
    oldest change first. A batch of the view is committed whole and every change stamps its
    row with its event's position, so a reader that remembers the highest ``last_seq`` it saw
    misses no change by asking for what came after it."""
    k = tables().kernels
    query = select(k).where(k.c.last_seq > since).order_by(k.c.last_seq)
    async with engine.connect() as conn:
        return [kernel_from_row(row) for row in await conn.execute(query)]


async def held_since(
    engine: AsyncEngine, resource_group: str, since: datetime
) -> list[KernelInterval]:
    """Every interval of ``resource_group`` still held at ``since`` or allocated after it
    (fair share decays what ended earlier to nothing worth reading)."""
    k = tables().kernels
    query = select(k).where(
        k.c.resource_group == resource_group, or_(k.c.ended_at.is_(None), k.c.ended_at > since)
    )
    async with engine.connect() as conn:
        result = await conn.stream(query.execution_options(yield_per=FETCH))
        return [kernel_from_row(row) async for row in result]


async def holding(engine: AsyncEngine) -> list[KernelInterval]:
    """Every kernel holding its slots now (its interval not ended), by node and kernel id."""
    k = tables().kernels
    query = select(k).where(k.c.ended_at.is_(None)).order_by(k.c.node_id, k.c.kernel_id)
    async with engine.connect() as conn:
        return [kernel_from_row(row) for row in await conn.execute(query)]
