"""One caller's rows of each node for the ``cluster`` answer, kept across pictures while the
node stays as it was (``RowCache``), and the compact form of a node's GPUs that ``gpuMap``
sends. Reads nothing; no subjects."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from projections.queries import NodeView
from services.gateway.cluster.fragmentation import Room
from services.gateway.cluster.types import DeviceHold, GpuDevice, NodeKernel


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
