"""A node while a pass consumes it, and what a session (or one kernel) needs of one node.
Pure; plain ints and ``__slots__`` because every decision touches these.

A ``Need`` is what must fit on ONE node: a single-node session's kernels summed (each kernel
still gets its own devices), or one kernel of a multi-node session. ``exact`` says the index's
filters (free whole devices, largest share room, cpu, memory) decide the fit on their own;
otherwise a trial allocation on the node decides (several kernels with shares, a share over
more than one device, the guard off).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from placement.devices import (
    FULL,
    Dev,
    Take,
    give_back,
    hold,
    pick_shares,
    pick_whole,
)
from placement.model import NodeOffer
from schemas.resources import ResourceSlots
from schemas.tenancy import DeviceFill


class Kind(IntEnum):
    """Which free measure orders the nodes for a need."""

    CPU = 0
    """No GPU: nodes with the fewest free GPUs first (their GPUs are not needed)."""
    WHOLE = 1
    """Free whole devices."""
    SHARES = 2
    """The largest share room on one device."""


class Need:
    __slots__ = (
        "cpu",
        "exact",
        "fallback",
        "fill",
        "gpus",
        "guard",
        "kind",
        "mem",
        "min_r",
        "whole",
    )

    def __init__(
        self, shape: Sequence[tuple[int, int, int]], *, guard: bool, fill: DeviceFill
    ) -> None:
        """``shape``: (cpu_milli, memory_bytes, gpu_hundredths) per kernel. ``guard``: the
        group's fragmentation guard. The need itself always lays shares over the fewest
        devices; with the guard off, a need with shares gets a ``fallback`` that may split
        them (tried only when no node takes the need itself)."""
        self.cpu = sum(k[0] for k in shape)
        self.mem = sum(k[1] for k in shape)
        self.gpus = tuple(k[2] for k in shape)
        self.fill = fill
        self.guard = True
        self.whole = sum(g // FULL for g in self.gpus if g % FULL == 0)
        shares = [g for g in self.gpus if g % FULL]
        self.kind = Kind.WHOLE if self.whole else Kind.SHARES if shares else Kind.CPU
        # A share h over the fewest devices (n = ceil(h/100)) has one with ceil(h/n) room.
        self.min_r = max((-(-h // -(-h // FULL)) for h in shares), default=0)
        self.exact = not shares or (len(self.gpus) == 1 and shares[0] <= FULL)
        self.fallback: Need | None = None
        if shares and not guard:
            split = self.fallback = Need(shape, guard=True, fill=fill)
            split.guard, split.min_r, split.exact = False, 1, False

    @property
    def slots(self) -> ResourceSlots:
        return ResourceSlots(
            cpu_milli=self.cpu, memory_bytes=self.mem, gpu_hundredths=sum(self.gpus)
        )


class NodeState:
    """Free cpu and memory, the devices, and the index keys: ``w`` free whole devices and
    ``r`` the largest room for shares on one device."""

    __slots__ = (
        "available",
        "cpu",
        "devs",
        "images",
        "mem",
        "name",
        "offer",
        "r",
        "rank",
        "volumes",
        "w",
    )

    def __init__(self, offer: NodeOffer, rank: int, *, idle: bool = False) -> None:
        self.offer = offer
        self.name = offer.name
        self.rank = rank
        self.available = offer.available
        # What it can run: its images, and keys for sessions with folders on volumes it has
        # (``pool.Pool.want`` adds them), so ``fits`` tests both with one lookup.
        self.images = offer.images
        self.volumes = offer.volumes
        free = offer.capacity if idle else offer.free
        self.cpu = free.cpu_milli
        self.mem = free.memory_bytes
        self.devs = [Dev(d) for d in sorted(offer.devices, key=lambda d: d.index)]
        if idle:
            for d in self.devs:
                d.whole, d.used = False, 0
        self.w = self.r = 0
        self.refresh()

    def refresh(self) -> None:
        w = r = 0
        for d in self.devs:
            if not d.whole:
                if d.used == 0:
                    w += 1
                if not d.mig and FULL - d.used > r:
                    r = FULL - d.used
        self.w, self.r = w, r

    def fits(self, need: Need, image: str) -> bool:
        """``image`` "": any node (the image can be pulled: ``pool.ANY_IMAGE``)."""
        if self.cpu < need.cpu or self.mem < need.mem or (image and image not in self.images):
            return False
        if self.w < need.whole or self.r < need.min_r:
            return False
        if need.exact:
            return True
        takes = self.hold(need)
        if takes is None:
            return False
        self.give_back(need, takes)
        return True

    def hold(self, need: Need) -> list[Take] | None:
        """Take every kernel's devices and the cpu and memory, or nothing."""
        takes: list[Take] = []
        for g in need.gpus:
            whole = g % FULL == 0
            if g == 0:
                take: Take | None = []
            elif whole:
                take = pick_whole(self.devs, g // FULL)
            else:
                take = pick_shares(self.devs, g, need.guard, need.fill)
            if take is None:
                _undo(need.gpus[: len(takes)], takes)
                return None
            hold(take, whole)
            takes.append(take)
        self.cpu -= need.cpu
        self.mem -= need.mem
        self.refresh()
        return takes

    def give_back(self, need: Need, takes: list[Take]) -> None:
        _undo(need.gpus, takes)
        self.cpu += need.cpu
        self.mem += need.mem
        self.refresh()

    def share_room(self) -> int:
        """All the room for shares, over every device."""
        return sum(d.room for d in self.devs)

    def best_room(self, n: int) -> int:
        """The most a share can get laid over ``n`` devices."""
        return sum(sorted((d.room for d in self.devs), reverse=True)[:n])


def _undo(gpus: Sequence[int], takes: list[Take]) -> None:
    for g, take in zip(reversed(gpus), reversed(takes), strict=True):
        give_back(take, g % FULL == 0)
