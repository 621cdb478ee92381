"""The operators' picture of the cluster now, behind the ``cluster`` query (``queries``) and the
``clusterChanges`` ticks (``subscriptions``): every node with its state, its GPUs and who holds
each whole or in part, the kernels on it (``picture``); each resource group's queue with
positions and reasons (``queues``); and, for each waiting session, why it does not fit in
words (``notes``). Superadmins see every domain; the others their domain's sessions by name,
the rest as "another domain's".

Reads the nodes and sessions views, the usage view's open kernel intervals (the one view that
says who holds which GPU, ``holding``), the queue board (``jy-queues``) and the directory
(emails through the people vault); writes nothing.

An answer builds only what its query selects (``Snapshot``: each part on first need), and
two asks by one caller at one log position and queue board share the parts already built
(``Pictures``: a few, for a few seconds); each caller's node rows outlive them (``rows``)."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar, cast

from commands.authorisation import Principal
from projections.queries import NodeView
from services.gateway.cluster.fragmentation import Room
from services.gateway.cluster.holding import Holding, NodeKernels, OpenKernels
from services.gateway.cluster.notes import notes_of
from services.gateway.cluster.owners import People
from services.gateway.cluster.picture import Picture
from services.gateway.cluster.queues import Order, pending_sessions, queues_of
from services.gateway.cluster.rows import NodeRows, RowCache, compact
from services.gateway.cluster.types import (
    DeviceHold,
    FragmentationNote,
    GpuDevice,
    GroupQueue,
    Node,
    NodeKernel,
    WaitingSession,
)
from services.gateway.context import Context
from services.gateway.core.node_views import MANY_IDS
from services.gateway.core.usage_views import UsageViews
from services.gateway.core.views import Views

KEPT = 8
"""Pictures kept (two tabs, the cluster and queue pages of a few operators)."""
KEPT_S = 3.0
"""How long one is reused: the views' position keys it, the directory's names do not."""

T = TypeVar("T")


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
            pending = await pending_sessions(self._ctx, self._me)
            return await queues_of(self._ctx, pending, self._people)

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
            policies = {g: directory.group_scheduling(g) for g in groups}
            return await notes_of(await self._rooms(), order, self._people, policies)

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
