"""The nodes' part of the ``cluster`` answer, built row by row, one node and one part at a
time: each GPU an agent reported, who holds it whole or in part, the kernels holding slots,
and each node's free room for the fragmentation notes; owners in words (an email where the
caller may see it). Another domain's sessions stay unnamed for a domain's operators. Reads
the directory and the people vault; no subjects."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import strawberry

from commands.authorisation import Principal
from projections.queries import NodeView
from projections.usage_tables import KernelInterval
from schemas.devices import DeviceInfo
from services.gateway.admin_api.access import sees_email
from services.gateway.cluster_fragmentation import FULL, Device, Room
from services.gateway.cluster_types import DeviceHold, GpuDevice, NodeKernel
from services.gateway.context import Context
from services.gateway.types import Node, Resources


def resources(cpu_milli: int, memory_bytes: int, gpu_hundredths: int) -> Resources:
    return Resources(
        cpu=str(Decimal(cpu_milli) / 1000),
        memory_bytes=str(memory_bytes),
        gpu=str(Decimal(gpu_hundredths) / FULL),
    )


class People:
    """Owners in words for one answer: an email where the caller may see it, else the id."""

    def __init__(self, ctx: Context, me: Principal) -> None:
        self._ctx, self._me = ctx, me
        self._known: dict[str, str] = {}

    async def name(self, user_id: str | None) -> str | None:
        if not user_id:
            return None
        if user_id not in self._known:
            user = self._ctx.directory.users.get(user_id)
            email = None
            if user is not None and sees_email(self._me, user):
                email = await self._ctx.services.people.unseal(str(user.id), user.email_sealed)
            self._known[user_id] = email or user_id
        return self._known[user_id]


def sees(me: Principal, domain: str | None) -> bool:
    return me.is_superadmin or (domain is not None and domain == me.domain)


Held = dict[int, list[tuple[KernelInterval, int]]]
"""A node's GPUs by index: the kernels holding each and how many hundredths."""


def held_on(kernels: Sequence[KernelInterval]) -> Held:
    on: Held = defaultdict(list)
    for k in kernels:
        for d in k.devices:
            on[d.index].append((k, d.hundredths))
    return on


def reported(view: NodeView) -> list[DeviceInfo]:
    """The GPUs its agent reported, by index."""
    return sorted((DeviceInfo.model_validate(d) for d in view.devices), key=lambda d: d.index)


def use(held: list[tuple[KernelInterval, int]]) -> tuple[bool, int]:
    """(held whole, hundredths used) of one GPU."""
    whole = any(k.slots.gpu_hundredths % FULL == 0 for k, _ in held)
    return whole, FULL if whole else min(FULL, sum(h for _, h in held))


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
        """What is free on the node, its holders in words."""
        on = held_on(kernels)
        rooms = []
        for device in reported(view):
            held = on.get(device.index, [])
            whole, used = use(held)
            holders = tuple([(await self.label(k), h) for k, h in held])
            shared = 0 if whole else used
            rooms.append(Device(device.index, whole, shared, device.mig_enabled, holders))
        return Room(
            view.hostname,
            view.resource_group,
            Node.of(view).state == "schedulable",
            view.capacity.cpu_milli - view.used.cpu_milli,
            view.capacity.memory_bytes - view.used.memory_bytes,
            tuple(rooms),
        )
