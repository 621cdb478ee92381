# mypy: disable-error-code="untyped-decorator"
# (strawberry's decorators with arguments are untyped in its stubs; the resolvers are typed)
"""The ``clusterChanges`` subscription: a tick each time the cluster changed, once the views
hold the change, so an operator's page asks ``cluster`` again instead of polling. Reads
``ev.node.*``, ``ev.agent.*`` and ``ev.session.*`` through an ordered JetStream consumer from
the log's end (never a core subscription), and watches the queue board (``jy-queues``); writes
nothing. A tick names the nodes that changed, not sessions: a domain's admin may not know
another domain's session ids; it carries those nodes' rows, GPUs and holds as the subscriber
may see them (``cluster_queries``' picture at the tick's position, worked out only when
selected), so a page redraws them without asking again."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from events.bus import Bus
from events.direct import RawMessage
from events.queues import QueueBoard
from schemas.subjects import AggregateType, events_of, parse_event_subject
from schemas.tenancy import Role
from services.gateway.cluster_queries import pictures
from services.gateway.cluster_types import ClusterParts
from services.gateway.context import Context, ctx_of, forbidden, invalid, who
from services.gateway.live import check_still_valid, tail_from_end
from services.gateway.types import Node
from services.gateway.views import Views

WATCHED = (AggregateType.NODE, AggregateType.AGENT, AggregateType.SESSION)
EVERY_MS = 500
"""By default at most two ticks a second: a busy log is folded into fewer, larger ticks."""
EVERY_MS_RANGE = (50, 60_000)
"""What a subscriber may ask instead: a page that redraws only the nodes a tick names can
follow at twenty a second."""
SETTLE_S = 5.0
"""How long a tick waits for the views to hold what it reports (then it goes anyway)."""


@strawberry.type(description="The cluster changed: ask `cluster` again.")
class ClusterChange:
    seq: int = strawberry.field(description="the log position the views have reached")
    node_ids: list[str] = strawberry.field(description="nodes whose ledger or agent changed")
    sessions: int = strawberry.field(description="how many session events came")
    queues: bool = strawberry.field(description="a resource group's queue moved")
    parts: strawberry.Private[ClusterParts | None] = None

    def _parts(self) -> ClusterParts:
        if self.parts is None:
            raise RuntimeError("a tick is sent with the subscriber's picture")
        return self.parts

    @strawberry.field(
        description="the nodes named, as the views hold them at `seq` (a node that left is "
        "missing): `cluster { nodes(nodeIds: nodeIds) }` without asking again"
    )
    async def nodes(self) -> list[Node]:
        return await self._parts().nodes(self.node_ids)

    @strawberry.field(description="the named nodes' GPUs and holds, as `cluster { gpuMap }`")
    async def gpu_map(self) -> JSON:
        return cast(JSON, await self._parts().gpu_map(self.node_ids))

    @strawberry.field(description="as `cluster { sessionsOnNodes }` at `seq`")
    async def sessions_on_nodes(self) -> int:
        return await self._parts().sessions_on_nodes()


def summarise(messages: list[RawMessage]) -> tuple[list[str], int]:
    """(the node ids named, how many session events) of a batch."""
    nodes: dict[str, None] = {}
    sessions = 0
    for message in messages:
        kind, aggregate_id = parse_event_subject(message.subject)
        if kind is AggregateType.SESSION:
            sessions += 1
        else:
            nodes[aggregate_id] = None
    return list(nodes), sessions


async def cluster_changes(
    bus: Bus, board: QueueBoard, views: Views, *, every_s: float = EVERY_MS / 1000,
    poll_s: float = 1.0,
) -> AsyncGenerator[ClusterChange, None]:  # fmt: skip
    """Ticks from now on: the nodes and agents named and the session events counted in each
    batch the log gave, or a queue that moved; each once the views hold it."""
    tail = await tail_from_end(bus, [events_of(k) for k in WATCHED])
    # A fetch is never cancelled mid-way (the tail would see a gap and reopen its consumer);
    # a wait on the board is cheap to cancel.
    fetching = asyncio.create_task(tail.fetch_raw(timeout=poll_s))
    moved = asyncio.create_task(board.changed(board.generation))
    last_tick = 0.0
    try:
        while True:
            await asyncio.wait({fetching, moved}, return_when=asyncio.FIRST_COMPLETED)
            nodes: list[str] = []
            sessions, queues, seq = 0, False, 0
            if fetching.done():
                messages = fetching.result()
                nodes, sessions = summarise(messages)
                seq = messages[-1].seq if messages else 0
                fetching = asyncio.create_task(tail.fetch_raw(timeout=poll_s))
            if moved.done():
                queues = True
                moved = asyncio.create_task(board.changed(moved.result()))
            if not (nodes or sessions or queues):
                continue
            pause = last_tick + every_s - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            if seq:
                await views.wait_for(seq, SETTLE_S)
            last_tick = time.monotonic()
            yield ClusterChange(
                seq=max(seq, await views.position()), node_ids=nodes, sessions=sessions,
                queues=queues,
            )  # fmt: skip
    finally:
        for task in (fetching, moved):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await tail.close()


@strawberry.type
class ClusterSubscription:
    @strawberry.subscription(
        description="A tick each time a node, an agent, a session or a queue changed, once "
        "the views hold it (changes that come closer together than `everyMs` are folded "
        "into one tick), with the rows of the nodes it names; ask `cluster` again for the "
        "rest. For administrators and monitors."
    )
    async def cluster_changes(
        self,
        info: Info[Context, Any],
        every_ms: Annotated[
            int,
            strawberry.argument(
                description=f"at most one tick this often, {EVERY_MS_RANGE[0]} to "
                f"{EVERY_MS_RANGE[1]} ms"
            ),
        ] = EVERY_MS,
    ) -> AsyncGenerator[ClusterChange, None]:
        me = who(info)
        if me.role is Role.USER:
            raise forbidden(info, "only administrators and monitors follow the cluster")
        low, high = EVERY_MS_RANGE
        if not low <= every_ms <= high:
            raise invalid(f"everyMs must be between {low} and {high}, got {every_ms}")
        ctx = ctx_of(info)
        kept = pictures(ctx.views)
        async for change in cluster_changes(
            ctx.bus, ctx.services.queues, ctx.views, every_s=every_ms / 1000
        ):
            check_still_valid(ctx)
            change.parts = kept.of(change.seq, ctx, me)
            yield change
