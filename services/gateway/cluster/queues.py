"""Each resource group's queue for the ``cluster`` answer: the waiting sessions the caller may
see (their domain's; superadmins every domain's), in queue order with their positions from
the queue board. Reads the sessions view and the queue board (``jy-queues``); no subjects."""

from __future__ import annotations

from collections import defaultdict

import strawberry

from commands.authorisation import Principal
from projections.queries import SessionView
from services.gateway.cluster.owners import People
from services.gateway.cluster.types import GroupQueue, WaitingSession
from services.gateway.context import Context
from services.gateway.core.types import FairShareFactors, resources

PAGE = 500
MAX_WAITING = 2000
"""Waiting sessions read per answer (four pages of the sessions view)."""

Order = list[tuple[SessionView, int | None, int]]
"""The waiting sessions in queue order: (session, position, its group's length)."""


async def pending_sessions(ctx: Context, me: Principal) -> list[SessionView]:
    domain = None if me.reads_every_domain else me.domain
    found: list[SessionView] = []
    after: str | None = None
    while len(found) < MAX_WAITING:
        # A waiting session's reason is its row's; the status history is not read.
        page = await ctx.views.sessions(
            first=PAGE, after=after, status="PENDING", domain=domain, with_history=False
        )
        found.extend(page.rows)
        if not page.has_next:
            break
        after = page.end_cursor
    return found


async def queues_of(
    ctx: Context, pending: list[SessionView], people: People
) -> tuple[list[GroupQueue], list[WaitingSession], Order]:
    """Each group's length, its waiting sessions head first, and (session, position, length)
    in that order."""
    board = ctx.services.queues
    by_group: dict[str, list[tuple[SessionView, int | None]]] = defaultdict(list)
    for view in pending:
        place = board.position(view.record.id)
        by_group[view.record.resource_group].append((view, None if place is None else place[0]))
    queues, waiting, order = [], [], []
    for group in sorted(by_group):
        rows = sorted(
            by_group[group],
            key=lambda vp: (vp[1] is None, vp[1] or 0, vp[0].record.created_seq),
        )
        shown = board.queues.get(group)
        length = max(shown.total if shown is not None else 0, len(rows))
        queues.append(GroupQueue(resource_group=group, length=length))
        for view, position in rows:
            r = view.record
            count = max(r.kernel_count, 1)
            each = resources(
                r.cpu_milli // count, r.memory_bytes // count, r.gpu_hundredths // count
            )
            waiting.append(
                WaitingSession(
                    resource_group=group,
                    session_id=strawberry.ID(r.id),
                    name=r.name,
                    user=await people.name(r.user_id),
                    domain=r.domain,
                    position=position,
                    per_kernel=each,
                    cluster_size=count,
                    cluster_mode=r.cluster_mode,
                    priority=r.priority,
                    admitted=r.admitted,
                    reason=r.status_reason,
                    fair_share=FairShareFactors.of(r.fair_share),
                    created_at=r.created_at,
                )
            )
            order.append((view, position, length))
    return queues, waiting, order
