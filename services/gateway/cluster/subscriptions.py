"""The ``clusterChanges`` subscription: a tick each time the cluster changed, once the views
hold the change, so an operator's page asks ``cluster`` again instead of polling. Reads
``ev.node.*``, ``ev.agent.*`` and ``ev.session.*`` through an ordered JetStream consumer from
the log's end (never a core subscription), and watches the queue board (``jy-queues``); writes
nothing. A tick names the nodes that changed, not sessions: a domain's admin may not know
another domain's session ids; it carries those nodes' rows, GPUs and holds as the subscriber
may see them (``snapshot``'s picture at the tick's position, worked out only when
selected), so a page redraws them without asking again."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from events.bus import Bus
from events.direct import RawMessage
from events.queues import QueueBoard
from schemas.subjects import AggregateType, events_of, parse_event_subject
from schemas.tenancy import Role
from services.gateway.cluster.snapshot import pictures
from services.gateway.cluster.types import ClusterParts, Node
from services.gateway.context import Context, ctx_of, forbidden, invalid, who
from services.gateway.core.live import check_still_valid, tail_from_end
from services.gateway.core.views import Views

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


@dataclass
class Gathered:
    """What came since the last tick: the node ids named (in order), how many session events,
    whether a queue moved, and the log position of the last message."""

    nodes: dict[str, None] = field(default_factory=dict)
    sessions: int = 0
    queues: bool = False
    seq: int = 0

    def add(self, messages: list[RawMessage]) -> None:
        for message in messages:
            kind, aggregate_id = parse_event_subject(message.subject)
            if kind is AggregateType.SESSION:
                self.sessions += 1
            else:
                self.nodes[aggregate_id] = None
        if messages:
            self.seq = messages[-1].seq

    def __bool__(self) -> bool:
        return bool(self.nodes or self.sessions or self.queues)


async def cluster_changes(
    bus: Bus, board: QueueBoard, views: Views, *, every_s: float = EVERY_MS / 1000,
    poll_s: float = 1.0,
) -> AsyncGenerator[ClusterChange, None]:  # fmt: skip
    """Ticks from now on: the nodes and agents named and the session events counted since
    the last tick, or a queue that moved; each once the views hold it. A change after a quiet
    spell ticks at once; one that comes sooner than ``every_s`` after the last tick waits for
    that, and what else comes meanwhile goes in the same tick."""
    tail = await tail_from_end(bus, [events_of(k) for k in WATCHED])
    # A fetch is never cancelled mid-way (the tail would see a gap and reopen its consumer);
    # a wait on the board is cheap to cancel.
    fetching = asyncio.create_task(tail.fetch_raw(timeout=poll_s))
    moved = asyncio.create_task(board.changed(board.generation))
    last_tick = -every_s
    came = Gathered()
    try:
        while True:
            due = last_tick + every_s - time.monotonic()
            await asyncio.wait(
                {fetching, moved},
                timeout=max(due, 0) if came else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if fetching.done():
                came.add(fetching.result())
                fetching = asyncio.create_task(tail.fetch_raw(timeout=poll_s))
            if moved.done():
                came.queues = True
                moved = asyncio.create_task(board.changed(moved.result()))
            if not came or time.monotonic() < last_tick + every_s:
                continue
            if came.seq:
                await views.wait_for(came.seq, SETTLE_S)  # it read the position already
            last_tick = time.monotonic()
            yield ClusterChange(
                seq=came.seq or await views.position(), node_ids=list(came.nodes),
                sessions=came.sessions, queues=came.queues,
            )  # fmt: skip
            came = Gathered()
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
