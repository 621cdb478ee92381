"""Who holds slots on each node now, kept current in the gateway: the usage view's open kernel
intervals, read whole once and then only the rows changed since (``UsageViews.changed``: each
change stamps its row with its event's log position). The operators' picture of the cluster
(``snapshot``) reads it on every ask; a cluster of ten thousand kernels then costs one
read of what moved, not ten thousand rows. Each node carries a version that moves when its
kernels change, so a picture rebuilds only the nodes that did.

A whole read again every ``REREAD_S``, in the background (the asks meanwhile answered from
the copy), puts right what a delta cannot see: a view rebuilt by changed code under the same
positions. Reads the usage view; writes nothing; no subjects."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from projections.usage.tables import KernelInterval
from services.gateway.core.usage_views import UsageViews

REREAD_S = 600.0

NodeKernels = tuple[KernelInterval, ...]


@dataclass(frozen=True)
class Holding:
    """The open intervals at one read: each node's kernels (by kernel id) and its version."""

    by_node: Mapping[str, NodeKernels]
    versions: Mapping[str, int]
    """A node's version moves whenever its kernels change (0: none seen yet)."""

    def on(self, node_id: str) -> NodeKernels:
        return self.by_node.get(node_id, ())

    def version(self, node_id: str) -> int:
        return self.versions.get(node_id, 0)

    def kernels(self) -> Iterator[KernelInterval]:
        """Every open interval, node by node."""
        return (k for kernels in self.by_node.values() for k in kernels)

    def sessions(self) -> int:
        """How many sessions hold slots anywhere (counted once per ``Holding``)."""
        return self._sessions

    @cached_property
    def _sessions(self) -> int:
        return len({k.session_id for k in self.kernels()})


_EMPTY = Holding(MappingProxyType({}), MappingProxyType({}))


class OpenKernels:
    """The gateway's copy of the open intervals (one per views): ``now()`` brings it up to the
    view and answers an immutable ``Holding``, which callers may keep."""

    def __init__(self, usage: UsageViews, *, reread_s: float = REREAD_S) -> None:
        self._usage, self._reread_s = usage, reread_s
        self._on: dict[str, dict[str, KernelInterval]] = {}  # node -> kernel id -> interval
        self._through = -1  # the highest last_seq read; -1: never read
        self._read_at = 0.0
        self._counter = itertools.count(1)
        self._held = _EMPTY
        self._lock = asyncio.Lock()
        self._rereading: asyncio.Task[None] | None = None

    async def now(self) -> Holding:
        async with self._lock:  # one read at a time; those waiting get its answer
            if self._through < 0:
                self._take_whole(await self._usage.holding())
            else:
                if time.monotonic() - self._read_at > self._reread_s and self._rereading is None:
                    self._rereading = asyncio.create_task(self._reread())
                await self._read_changes()
            return self._held

    async def _reread(self) -> None:
        try:
            found = await self._usage.holding()
            async with self._lock:
                self._take_whole(found)
                await self._read_changes()  # what changed while it was read
        finally:
            self._rereading = None

    def _take_whole(self, found: list[KernelInterval]) -> None:
        read_at = time.monotonic()
        on: dict[str, dict[str, KernelInterval]] = {}
        for kernel in found:
            on.setdefault(kernel.node_id, {})[kernel.kernel_id] = kernel
        # The changes read next are those after the newest open row: an ended row newer than
        # it is read once more then, and changes nothing.
        self._through = max((k.last_seq for k in found), default=0)
        self._read_at = read_at
        changed = {n for n in on.keys() | self._on.keys() if on.get(n) != self._on.get(n)}
        self._on = on
        self._publish(changed)

    async def _read_changes(self) -> None:
        rows = await self._usage.changed(self._through)
        for row in rows:
            kernels = self._on.setdefault(row.node_id, {})
            if row.ended_at is None:
                kernels[row.kernel_id] = row
            else:
                kernels.pop(row.kernel_id, None)
            self._through = max(self._through, row.last_seq)
        self._publish({row.node_id for row in rows})

    def _publish(self, changed: set[str]) -> None:
        """A new ``Holding``: fresh tuples and versions for the nodes that changed, the other
        nodes' kept as they were."""
        if not changed and self._held is not _EMPTY:
            return
        by_node, versions = dict(self._held.by_node), dict(self._held.versions)
        for node in changed:
            versions[node] = next(self._counter)
            kernels = self._on.get(node)
            if kernels:
                by_node[node] = tuple(sorted(kernels.values(), key=lambda k: k.kernel_id))
            else:
                by_node.pop(node, None)
                self._on.pop(node, None)
        self._held = Holding(MappingProxyType(by_node), MappingProxyType(versions))
