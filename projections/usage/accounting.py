"""Usage accounting, pure: kernels' intervals clipped to a range and summed per session, user,
project, domain or resource group. Reads and writes nothing.

A kernel accrues its slots for the part of its interval inside ``[start, end)``; an interval
still open (the kernel holds its slots now) counts up to ``min(end, now)``. Sums are kept in
integer quanta x microseconds (milli-CPU, bytes, hundredths of a GPU), so the order intervals
come in changes nothing, and turned into floats once, at the end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from projections.usage.tables import KernelInterval
from schemas.resources import CPU_QUANTUM, GPU_QUANTUM

MICROS = 1_000_000
GIB = 1 << 30
_MICROSECOND = timedelta(microseconds=1)


class UsageGroup(StrEnum):
    SESSION = "session"
    USER = "user"
    PROJECT = "project"
    DOMAIN = "domain"
    RESOURCE_GROUP = "resource_group"


@dataclass(frozen=True, slots=True)
class DeviceUsage:
    """One GPU's use by a group: ``seconds`` it was held (whole or a share, summed over the
    kernels holding it) and ``share_seconds``, each kernel's share times its seconds."""

    node_id: str
    device: str
    """The device's uuid."""
    seconds: float
    share_seconds: float


@dataclass(frozen=True, slots=True)
class UsageLine:
    """One group's use over a range. ``name`` is the session's name when grouped by session
    (None for the others: the gateway names users, projects and domains)."""

    key: str
    name: str | None
    cpu_core_seconds: float
    memory_gib_seconds: float
    gpu_seconds: float
    """GPU-equivalents x seconds: a 0.5 share for 100 s is 50."""
    devices: tuple[DeviceUsage, ...]
    sessions: int
    """Sessions with a kernel that accrued something in the range."""


def key_of(interval: KernelInterval, group_by: UsageGroup) -> str:
    match group_by:
        case UsageGroup.SESSION:
            return interval.session_id
        case UsageGroup.USER:
            return interval.user_id
        case UsageGroup.PROJECT:
            return interval.project_id
        case UsageGroup.DOMAIN:
            return interval.domain
        case UsageGroup.RESOURCE_GROUP:
            return interval.resource_group


def held_micros(interval: KernelInterval, start: datetime, end: datetime, now: datetime) -> int:
    """Microseconds of ``interval`` inside ``[start, end)``, an open one up to ``min(end, now)``."""
    if interval.started_at is None:
        return 0  # allocated, never ran
    stop = interval.ended_at if interval.ended_at is not None else min(end, now)
    held = min(stop, end) - max(interval.started_at, start)
    return max(0, held // _MICROSECOND)


@dataclass(slots=True)
class _Sums:
    name: str | None = None
    cpu: int = 0  # milli-CPU x µs
    memory: int = 0  # bytes x µs
    gpu: int = 0  # hundredths x µs
    devices: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """(node, uuid) -> [µs held, hundredths x µs]"""
    sessions: set[str] = field(default_factory=set)

    def line(self, key: str) -> UsageLine:
        devices = tuple(
            DeviceUsage(node, uuid, held / MICROS, shares / (GPU_QUANTUM * MICROS))
            for (node, uuid), (held, shares) in sorted(self.devices.items())
        )
        return UsageLine(
            key=key,
            name=self.name,
            cpu_core_seconds=self.cpu / (CPU_QUANTUM * MICROS),
            memory_gib_seconds=self.memory / (GIB * MICROS),
            gpu_seconds=self.gpu / (GPU_QUANTUM * MICROS),
            devices=devices,
            sessions=len(self.sessions),
        )


class Ledger:
    """Sums intervals one at a time (a report streams them from the view)."""

    def __init__(self, group_by: UsageGroup, start: datetime, end: datetime, now: datetime) -> None:
        self.group_by, self.start, self.end, self.now = group_by, start, end, now
        self._sums: dict[str, _Sums] = {}

    def add(self, interval: KernelInterval) -> None:
        micros = held_micros(interval, self.start, self.end, self.now)
        if micros <= 0:
            return
        key = key_of(interval, self.group_by)
        sums = self._sums.setdefault(key, _Sums())
        if self.group_by is UsageGroup.SESSION:
            sums.name = interval.session_name
        slots = interval.slots
        sums.cpu += slots.cpu_milli * micros
        sums.memory += slots.memory_bytes * micros
        sums.gpu += slots.gpu_hundredths * micros
        for device in interval.devices:
            held = sums.devices.setdefault((interval.node_id, device.uuid), [0, 0])
            held[0] += micros
            held[1] += device.hundredths * micros
        sums.sessions.add(interval.session_id)

    def lines(self) -> list[UsageLine]:
        """One line per group that accrued anything, by key."""
        return [self._sums[key].line(key) for key in sorted(self._sums)]


def account(
    intervals: Iterable[KernelInterval],
    group_by: UsageGroup,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[UsageLine]:
    ledger = Ledger(group_by, start, end, now)
    for interval in intervals:
        ledger.add(interval)
    return ledger.lines()
