"""A node's GPUs as its agent reported them, and which kernels hold each and how much: what the
GPU rows of the ``cluster`` answer and the nodes' room for its notes are drawn from. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from projections.queries import NodeView
from projections.usage.tables import KernelInterval
from schemas.devices import DeviceInfo
from services.gateway.cluster.words import FULL

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
