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
ask again.

An answer builds only what its query selects (``Snapshot``: each part on first need), and
two asks by one caller at one log position and queue board share the parts already built
(``Pictures``: a few, for a few seconds)."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar, cast

import strawberry
from strawberry.types import Info

from commands.authorisation import Principal
from projections.queries import NodeView, SessionView
from schemas.tenancy import Role
from services.gateway.cluster_fragmentation import FULL, Ask, Room, explain
from services.gateway.cluster_holding import Holding, NodeKernels, OpenKernels
from services.gateway.cluster_picture import People, Picture, resources
from services.gateway.cluster_types import (
    ClusterNow,
    DeviceHold,
    FragmentationNote,
    GpuDevice,
    GroupQueue,
    NodeKernel,
    WaitingSession,
)
from services.gateway.context import Context, ctx_of, forbidden, who
from services.gateway.node_views import MANY_IDS
from services.gateway.types import Node
from services.gateway.usage_views import UsageViews
from services.gateway.views import Views

PAGE = 500
MAX_WAITING = 2000
"""Waiting sessions read per answer (four pages of the sessions view)."""
MAX_NOTES = 200
"""Waiting sessions explained per answer, head of each queue first."""
KEPT = 8
"""Pictures kept (two tabs, the cluster and queue pages of a few operators)."""
KEPT_S = 3.0
"""How long one is reused: the views' position keys it, the directory's names do not."""

T = TypeVar("T")


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


async def _pending(ctx: Context, me: Principal) -> list[SessionView]:
    domain = None if me.is_superadmin else me.domain
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


@dataclass(slots=True)
class NodeRows:
    """What one caller was shown of one node, kept while the node stays as it was: its
    view (the ledger row and what its agent reported) and its kernels' version."""

    view: NodeView
    version: int
    gpus: tuple[list[GpuDevice], list[DeviceHold]] | None = None
    compact: list[dict[str, Any]] | None = None
    kernels: list[NodeKernel] | None = None
    room: Room | None = None


class RowCache:
    """One caller's rows of each node across pictures: a new picture rebuilds only the nodes
    whose view or kernels changed since. Owners' names are read when a row is built, so the
    cache holds for one state of the directory (``directory``: its log position)."""

    def __init__(self, directory: int) -> None:
        self.directory = directory
        self._rows: dict[str, NodeRows] = {}
        self.building = asyncio.Lock()
        """Held while rows are looked at and built: the resolvers of one answer (and two
        answers of one caller) run at once, and a row is built once, not by each."""

    def of(self, view: NodeView, version: int) -> NodeRows:
        rows = self._rows.get(view.id)
        if rows is None or rows.version != version or rows.view != view:
            rows = self._rows[view.id] = NodeRows(view, version)
        return rows

    def keep_only(self, node_ids: set[str]) -> None:
        for gone in self._rows.keys() - node_ids:
            del self._rows[gone]


def compact(devices: list[GpuDevice], holds: list[DeviceHold]) -> list[dict[str, Any]]:
    """A node's GPUs with their holds, as ``gpuMap`` sends them (the typed lists' fields)."""
    held: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for h in holds:
        held[h.index].append(
            {
                "sessionId": h.session_id,
                "sessionName": h.session_name,
                "kernelId": h.kernel_id,
                "user": h.user,
                "hundredths": h.hundredths,
                "whole": h.whole,
            }
        )
    return [
        {
            "index": d.index,
            "uuid": d.uuid,
            "name": d.name,
            "memoryBytes": d.memory_bytes,
            "numaNode": d.numa_node,
            "mig": d.mig,
            "usedHundredths": d.used_hundredths,
            "holds": held.get(d.index, []),
        }
        for d in devices
    ]


class Snapshot:
    """One caller's picture of the cluster at one log position (``ClusterParts``): each part
    worked out on first need and kept, so the fields of one answer (and of the next asks at
    the same position) share it. Nodes need no kernel, the GPU map no queue; the notes need
    the nodes' room and the queue. A node's rows come from the caller's ``RowCache`` while
    the node has not changed."""

    def __init__(
        self, ctx: Context, me: Principal, rows: RowCache, open_kernels: OpenKernels
    ) -> None:
        self._ctx, self._me = ctx, me
        self._people = People(ctx, me)
        self._picture = Picture(me, self._people)
        self._rows, self._open = rows, open_kernels
        self._parts: dict[Hashable, asyncio.Future[Any]] = {}
        self.made: list[str] = []
        """The parts worked out, in order (each once): what an answer cost."""
        self.built = 0
        """Node rows built (not found in the row cache)."""

    def _failed(self, key: Hashable) -> bool:
        part = self._parts[key]
        return part.done() and (part.cancelled() or part.exception() is not None)

    def _has(self, key: Hashable) -> bool:
        """The part is worked out (not only under way)."""
        return key in self._parts and self._parts[key].done() and not self._failed(key)

    async def _once(
        self, name: str, make: Callable[[], Awaitable[T]], *, key: Hashable = None
    ) -> T:
        """The part ``name`` (under ``key``, when a name has several), worked out once."""
        key = name if key is None else key
        if key not in self._parts or self._failed(key):
            self.made.append(name)
            self._parts[key] = asyncio.ensure_future(make())
        # Shielded: one caller that goes away does not cancel the part the others wait for.
        return cast(T, await asyncio.shield(self._parts[key]))

    async def _views(self) -> list[NodeView]:
        async def views() -> list[NodeView]:
            found = await self._ctx.views.nodes()
            self._rows.keep_only({v.id for v in found})
            return found

        return await self._once("node views", views)

    async def _holding(self) -> Holding:
        return await self._once("holding", self._open.now)

    async def _chosen(self, node_ids: list[str] | None) -> list[NodeView]:
        """Every node's view, read once per picture; or only those named, read alone (a
        tick's few nodes: not a thousand rows to keep three), unless every node's were
        read already or they are many (picked from every node's views, which the gateway
        keeps: ``node_views``)."""
        if node_ids is None:
            return await self._views()
        wanted = set(node_ids)
        if self._has("node views") or len(wanted) > MANY_IDS:
            return [v for v in await self._views() if v.id in wanted]
        if not wanted:
            return []
        # Read once per picture for these ids: a tick's `nodes` and `gpuMap` ask the same.
        ids = sorted(wanted)
        return await self._once(
            "named node views", lambda: self._ctx.views.nodes(ids), key=("named", *ids)
        )

    async def nodes(self, node_ids: list[str] | None = None) -> list[Node]:
        async def nodes() -> list[Node]:
            return [Node.of(view) for view in await self._views()]

        if node_ids is not None:
            return [Node.of(view) for view in await self._chosen(node_ids)]
        return await self._once("nodes", nodes)

    async def _node_rows(self, node_ids: list[str] | None) -> list[tuple[NodeRows, NodeKernels]]:
        holding = await self._holding()
        return [
            (self._rows.of(view, holding.version(view.id)), holding.on(view.id))
            for view in await self._chosen(node_ids)
        ]

    async def _each(
        self, node_ids: list[str] | None, part: Callable[[NodeRows, NodeKernels], Awaitable[T]]
    ) -> list[T]:
        """``part`` of each chosen node's rows, under the caller's build lock: the resolvers
        of one answer (and two answers of one caller) run at once, a row is built once."""
        chosen = await self._node_rows(node_ids)
        async with self._rows.building:
            return [await part(rows, kernels) for rows, kernels in chosen]

    async def _gpus_of(
        self, rows: NodeRows, kernels: NodeKernels
    ) -> tuple[list[GpuDevice], list[DeviceHold]]:
        if rows.gpus is None:
            self.built += 1
            rows.gpus = await self._picture.gpus(rows.view, kernels)
        return rows.gpus

    async def _compact_of(self, rows: NodeRows, kernels: NodeKernels) -> list[dict[str, Any]]:
        if rows.compact is None:
            rows.compact = compact(*await self._gpus_of(rows, kernels))
        return rows.compact

    async def _kernels_of(self, rows: NodeRows, kernels: NodeKernels) -> list[NodeKernel]:
        if rows.kernels is None:
            self.built += 1
            rows.kernels = await self._picture.kernels(rows.view, kernels)
        return rows.kernels

    async def _room_of(self, rows: NodeRows, kernels: NodeKernels) -> Room:
        if rows.room is None:
            self.built += 1
            rows.room = await self._picture.room(rows.view, kernels)
        return rows.room

    async def devices(self, node_ids: list[str] | None) -> list[GpuDevice]:
        return [d for devices, _ in await self._each(node_ids, self._gpus_of) for d in devices]

    async def holds(self, node_ids: list[str] | None) -> list[DeviceHold]:
        return [h for _, holds in await self._each(node_ids, self._gpus_of) for h in holds]

    async def gpu_map(self, node_ids: list[str] | None) -> dict[str, list[dict[str, Any]]]:
        async def entry(rows: NodeRows, kernels: NodeKernels) -> tuple[str, list[dict[str, Any]]]:
            return rows.view.id, await self._compact_of(rows, kernels)

        return dict(await self._each(node_ids, entry))

    async def kernels(self, node_ids: list[str] | None) -> list[NodeKernel]:
        return [k for kernels in await self._each(node_ids, self._kernels_of) for k in kernels]

    async def sessions_on_nodes(self) -> int:
        return (await self._holding()).sessions()

    async def _rooms(self) -> list[Room]:
        async def rooms() -> list[Room]:
            return await self._each(None, self._room_of)

        return await self._once("rooms", rooms)

    async def _queued(self) -> tuple[list[GroupQueue], list[WaitingSession], Order]:
        async def queued() -> tuple[list[GroupQueue], list[WaitingSession], Order]:
            pending = await _pending(self._ctx, self._me)
            return await _queues(self._ctx, pending, self._people)

        return await self._once("queues", queued)

    async def queues(self) -> list[GroupQueue]:
        return (await self._queued())[0]

    async def waiting(self) -> list[WaitingSession]:
        return (await self._queued())[1]

    async def notes(self) -> list[FragmentationNote]:
        async def notes() -> list[FragmentationNote]:
            order = (await self._queued())[2]
            groups = {view.record.resource_group for view, _, _ in order}
            directory = self._ctx.directory
            guards = {g: directory.group_scheduling(g).fragmentation_guard for g in groups}
            said = explain(await self._rooms(), await _asks(order, self._people), guards)
            return [
                FragmentationNote(
                    session_id=strawberry.ID(n.session_id),
                    resource_group=n.group,
                    kind=n.kind.value,
                    text=n.text,
                    situation=n.situation,
                    free_gpu=str(Decimal(n.free_gpu_hundredths) / FULL),
                    need_gpu=str(Decimal(n.need_gpu_hundredths) / FULL),
                )
                for n in said
            ]

        return await self._once("notes", notes)


Caller = tuple[str, str, str]
"""(user id, role, domain): what decides which rows one may see."""
Key = tuple[int, int, Caller]
"""(log position, queue board generation, caller)."""


class Pictures:
    """The pictures of one gateway. The last few callers' pictures are reused for ``KEPT_S``:
    two asks at one log position and one queue board by the same person (two tabs; the
    cluster and the queue pages) share one. Each caller's node rows outlive the pictures
    (``RowCache``, while the directory stays as it was), and the open kernels are one copy for all
    (``OpenKernels``): a picture at a new position rebuilds only the nodes that changed.
    Everything is keyed by the caller, so no one gets rows drawn for someone who sees more."""

    def __init__(self, usage: UsageViews, kept: int = KEPT, kept_s: float = KEPT_S) -> None:
        self._kept, self._kept_s = kept, kept_s
        self.open_kernels = OpenKernels(usage)
        self.entries: OrderedDict[Key, tuple[float, Snapshot]] = OrderedDict()
        self.rows: OrderedDict[Caller, RowCache] = OrderedDict()

    def _rows_of(self, caller: Caller, directory: int) -> RowCache:
        rows = self.rows.get(caller)
        if rows is None or rows.directory != directory:
            rows = self.rows[caller] = RowCache(directory)
        self.rows.move_to_end(caller)
        while len(self.rows) > self._kept:
            self.rows.popitem(last=False)
        return rows

    def of(self, seq: int, ctx: Context, me: Principal) -> Snapshot:
        caller = (me.user_id, me.role.value, me.domain)
        key = (seq, ctx.services.queues.generation, caller)
        now = time.monotonic()
        found = self.entries.get(key)
        if found is not None and now - found[0] < self._kept_s:
            self.entries.move_to_end(key)
            return found[1]
        rows = self._rows_of(caller, ctx.directory.position)
        snapshot = Snapshot(ctx, me, rows, self.open_kernels)
        self.entries[key] = (now, snapshot)
        self.entries.move_to_end(key)
        while len(self.entries) > self._kept:
            self.entries.popitem(last=False)
        return snapshot


_PICTURES: weakref.WeakKeyDictionary[Views, Pictures] = weakref.WeakKeyDictionary()


def pictures(views: Views) -> Pictures:
    """The pictures of one gateway (its views): never one gateway's for another's."""
    if views not in _PICTURES:
        _PICTURES[views] = Pictures(views.usage)
    return _PICTURES[views]


@strawberry.type
class ClusterQuery:
    @strawberry.field(
        description="The cluster now: nodes with their GPUs and who holds them, each resource "
        "group's queue, and why waiting sessions do not fit. For administrators and monitors "
        "(their domain's sessions by name; superadmins: all). Only the lists asked are "
        "worked out."
    )
    async def cluster(self, info: Info[Context, Any]) -> ClusterNow:
        me = who(info)
        if me.role is Role.USER:
            raise forbidden(info, "only administrators and monitors see the cluster")
        ctx = ctx_of(info)
        seq = await ctx.views.position()
        return ClusterNow(seq=seq, parts=pictures(ctx.views).of(seq, ctx, me))
