# mypy: disable-error-code="untyped-decorator"
# (strawberry's decorators with arguments are untyped in its stubs; the resolvers are typed)
"""The ``cluster`` query: the operators' picture of the cluster now. Every node with its state,
its GPUs and who holds each whole or in part, the kernels on it; each resource group's queue
with positions and reasons; and, for each waiting session, why it does not fit in words
(``cluster_fragmentation``). For administrators and monitors (superadmins: every domain; the
others see their domain's sessions by name, the rest as "another domain's").

Reads the nodes and sessions views, the usage view's open kernel intervals (the one view that
says who holds which GPU), the queue board (``jy-queues``) and the directory (emails through
the people vault); writes nothing. ``clusterChanges`` (``cluster_subscription``) says when to
ask again."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

import strawberry
from strawberry.types import Info

from commands.authorisation import Principal
from projections.queries import SessionView
from projections.usage_tables import KernelInterval
from schemas.tenancy import Role
from services.gateway.cluster_fragmentation import FULL, Ask, explain
from services.gateway.cluster_picture import People, Picture, resources
from services.gateway.cluster_types import (
    ClusterNow,
    FragmentationNote,
    GroupQueue,
    WaitingSession,
)
from services.gateway.context import Context, ctx_of, forbidden, who

PAGE = 500
MAX_WAITING = 2000
"""Waiting sessions read per answer (four pages of the sessions view)."""
MAX_NOTES = 200
"""Waiting sessions explained per answer, head of each queue first."""


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


async def _pending(ctx: Context, me: Principal) -> list[SessionView]:
    domain = None if me.is_superadmin else me.domain
    found: list[SessionView] = []
    after: str | None = None
    while len(found) < MAX_WAITING:
        page = await ctx.views.sessions(first=PAGE, after=after, status="PENDING", domain=domain)
        found.extend(page.rows)
        if not page.has_next:
            break
        after = page.end_cursor
    return found


Order = list[tuple[SessionView, int | None, int]]


async def _queues(
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
                    created_at=r.created_at,
                )
            )
            order.append((view, position, length))
    return queues, waiting, order


async def _asks(order: Order, people: People) -> list[Ask]:
    asks = []
    # Every group's head first, then every group's second…: a long queue in one group does
    # not leave another group's head unexplained.
    by_place = sorted(order, key=lambda entry: entry[1] or len(order) + 1)
    for view, position, length in by_place[:MAX_NOTES]:
        r = view.record
        count = max(r.kernel_count, 1)
        user = await people.name(r.user_id)
        label = f"session {r.name or r.id[:8]}" + (f" of {user}" if user else "")
        asks.append(
            Ask(
                r.id,
                label,
                r.resource_group,
                r.cpu_milli // count,
                r.memory_bytes // count,
                r.gpu_hundredths // count,
                kernels=count,
                single_node=r.cluster_mode != "multi-node",
                place=f"{ordinal(position)} of {length} waiting" if position else "",
            )
        )
    return asks


@strawberry.type
class ClusterQuery:
    @strawberry.field(
        description="The cluster now: nodes with their GPUs and who holds them, each resource "
        "group's queue, and why waiting sessions do not fit. For administrators and monitors "
        "(their domain's sessions by name; superadmins: all)."
    )
    async def cluster(self, info: Info[Context, Any]) -> ClusterNow:
        me = who(info)
        if me.role is Role.USER:
            raise forbidden(info, "only administrators and monitors see the cluster")
        ctx = ctx_of(info)
        seq = await ctx.views.position()
        people = People(ctx, me)
        picture = Picture(me, people)
        by_node: dict[str, list[KernelInterval]] = defaultdict(list)
        for kernel in await ctx.views.usage.holding():
            by_node[kernel.node_id].append(kernel)
        nodes = [await picture.add(view, by_node[view.id]) for view in await ctx.views.nodes()]
        queues, waiting, order = await _queues(ctx, await _pending(ctx, me), people)
        groups = {view.record.resource_group for view, _, _ in order}
        guards = {g: ctx.directory.group_scheduling(g).fragmentation_guard for g in groups}
        notes = explain(picture.rooms, await _asks(order, people), guards)
        return ClusterNow(
            seq=seq,
            nodes=nodes,
            devices=picture.devices,
            holds=picture.holds,
            kernels=picture.kernels,
            queues=queues,
            waiting=waiting,
            notes=[
                FragmentationNote(
                    session_id=strawberry.ID(n.session_id),
                    resource_group=n.group,
                    kind=n.kind.value,
                    text=n.text,
                    free_gpu=str(Decimal(n.free_gpu_hundredths) / FULL),
                    need_gpu=str(Decimal(n.need_gpu_hundredths) / FULL),
                )
                for n in notes
            ],
        )
