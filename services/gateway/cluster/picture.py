"""The nodes' part of the ``cluster`` answer, built row by row, one node and one part at a
time: each GPU an agent reported, who holds it whole or in part, the kernels holding slots,
and each node's free room for the fragmentation notes (``notes``); owners in words
(``owners``: an email where the caller may see it). Another domain's sessions stay unnamed
for a domain's operators. Reads the directory and the people vault; no subjects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import strawberry

from commands.authorisation import Principal
from projections.queries import NodeView
from projections.usage.tables import KernelInterval
from services.gateway.cluster.fragmentation import Room
from services.gateway.cluster.gpus import held_on, reported, use
from services.gateway.cluster.notes import room_of
from services.gateway.cluster.owners import People, sees
from services.gateway.cluster.types import DeviceHold, GpuDevice, NodeKernel
from services.gateway.core.types import resources


class Picture:
    """One caller's rows, a node at a time: its GPUs and who holds them, its kernels, and the
    room it has free for the fragmentation notes. Each is asked apart, so an answer builds
    only the rows its query selects."""

    def __init__(self, me: Principal, people: People) -> None:
        self.me, self.people = me, people

    async def label(self, kernel: KernelInterval) -> str:
        if not sees(self.me, kernel.domain):
            return "a session of another domain"
        user = await self.people.name(kernel.user_id)
        name = kernel.session_name or kernel.session_id[:8]
        return f"session {name} of {user}" if user else f"session {name}"

    async def _whose(self, k: KernelInterval) -> dict[str, Any]:
        """The fields that name a kernel's session, empty for another domain's."""
        seen = sees(self.me, k.domain)
        return {
            "session_id": strawberry.ID(k.session_id) if seen else None,
            "session_name": k.session_name if seen else None,
            "kernel_id": k.kernel_id if seen else None,
            "user": await self.people.name(k.user_id) if seen else None,
        }

    async def kernels(self, view: NodeView, kernels: Sequence[KernelInterval]) -> list[NodeKernel]:
        rows = []
        for k in kernels:
            s = k.slots
            rows.append(
                NodeKernel(
                    node_id=view.id,
                    **await self._whose(k),
                    resources=resources(s.cpu_milli, s.memory_bytes, s.gpu_hundredths),
                    started=k.started_at is not None,
                    since=k.allocated_at,
                )
            )
        return rows

    async def gpus(
        self, view: NodeView, kernels: Sequence[KernelInterval]
    ) -> tuple[list[GpuDevice], list[DeviceHold]]:
        """The node's GPUs and their holds."""
        on = held_on(kernels)
        devices, holds = [], []
        for device in reported(view):
            held = on.get(device.index, [])
            whole, used = use(held)
            devices.append(
                GpuDevice(
                    node_id=view.id,
                    index=device.index,
                    uuid=device.uuid,
                    name=device.name,
                    memory_bytes=str(device.memory_bytes),
                    numa_node=device.numa_node,
                    mig=device.mig_enabled,
                    used_hundredths=used,
                )
            )
            for k, hundredths in held:
                holds.append(
                    DeviceHold(
                        node_id=view.id,
                        index=device.index,
                        **await self._whose(k),
                        hundredths=hundredths,
                        whole=whole,
                    )
                )
        return devices, holds

    async def room(self, view: NodeView, kernels: Sequence[KernelInterval]) -> Room:
        """What is free on the node, its holders in words (``notes.room_of``)."""
        return await room_of(view, kernels, self.label)
