"""Every node's view, kept in the gateway: each ask reads only the nodes' change stamps (the
ledger's and the agent's ``last_seq``, no JSON) and then the whole rows of the nodes whose
stamps moved. The operators' picture asks for every node on each tick of a busy cluster;
a thousand rows with their device and image lists cost ~45 ms to read whole, the stamps a
few. Reads the nodes and agents views; writes nothing; no subjects."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from projections import queries
from projections.queries import NodeView

MANY_IDS = 500
"""Nodes beyond this many are read with every row rather than by id: a list of ids is one
query parameter each (PostgreSQL's driver takes at most 32,767)."""


class NodeViews:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._kept: dict[str, tuple[tuple[int, int], NodeView]] = {}
        self._lock = asyncio.Lock()

    async def all(self) -> list[NodeView]:
        """Every node, by resource group and host name, as ``queries.list_nodes`` answers."""
        async with self._lock:
            stamps = await queries.node_stamps(self._engine)
            moved = [i for i, stamp in stamps.items() if self._stamp(i) != stamp]
            if moved:
                # Many moved (the first ask, a restart's rebuild): every row, not an id list
                # of one query parameter each.
                ids = moved if len(moved) <= MANY_IDS else None
                for view in await queries.list_nodes(self._engine, node_ids=ids):
                    # A row that changed between the two reads is kept under the older stamp
                    # and read again next time: never a stale row under a newer stamp. One
                    # that came between them is taken next time, with its stamp.
                    if (stamp := stamps.get(view.id)) is not None:
                        self._kept[view.id] = (stamp, view)
            for gone in self._kept.keys() - stamps.keys():
                del self._kept[gone]
            views = [kept[1] for i in stamps if (kept := self._kept.get(i)) is not None]
        return sorted(views, key=lambda v: (v.resource_group, v.hostname))

    def _stamp(self, node_id: str) -> tuple[int, int] | None:
        kept = self._kept.get(node_id)
        return kept[0] if kept is not None else None
