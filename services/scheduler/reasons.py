"""Why a session waits, in a sentence a researcher can act on. Pure; reads and writes nothing.

A reason names what is short and the best the cluster has now ("no node has 64 GiB of free
memory (largest free: 15.6 GiB on gpu-01)"), and says when waiting cannot help because no node
is that large even when idle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from schemas.resources import CPU_QUANTUM, GPU_QUANTUM, ResourceSlots

GIB = 1 << 30
MIB = 1 << 20
FRACTIONAL_GPUS = "fractional GPUs are not supported yet"


@dataclass(frozen=True, slots=True)
class NodeOffer:
    """One node as placement sees it: what it has, what is free now, what it can run."""

    node_id: str
    hostname: str
    capacity: ResourceSlots
    free: ResourceSlots
    images: frozenset[str]
    available: bool = True
    """False when cordoned or lost: it takes no new work."""

    @property
    def name(self) -> str:
        return self.hostname or self.node_id


def whole_gpus(slots: ResourceSlots) -> int:
    """GPU hundredths rounded down to whole devices (only whole GPUs are handed out yet)."""
    return slots.gpu_hundredths // GPU_QUANTUM * GPU_QUANTUM


def format_memory(n: int) -> str:
    if n >= GIB:
        return f"{_trim(n / GIB)} GiB"
    return f"{_trim(n / MIB)} MiB"


def format_cpu(milli: int) -> str:
    return _count(Decimal(milli) / CPU_QUANTUM, "CPU")


def format_gpu(hundredths: int) -> str:
    return _count(Decimal(hundredths) / GPU_QUANTUM, "GPU")


def _count(value: Decimal, unit: str) -> str:
    plural = "" if 0 < value <= 1 else "s"
    return f"{value.normalize():f} {unit}{plural}"


def _trim(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True, slots=True)
class _Dimension:
    of: Callable[[ResourceSlots], int]
    format: Callable[[int], str]
    free_phrase: str  # what is missing now, e.g. "{} of free memory"
    idle_phrase: str  # what no node has at all


DIMENSIONS = (
    _Dimension(lambda s: s.cpu_milli, format_cpu, "{} free", "{} even when idle"),
    _Dimension(
        lambda s: s.memory_bytes, format_memory, "{} of free memory", "{} of memory even when idle"
    ),
    _Dimension(whole_gpus, format_gpu, "{} free", "{} even when idle"),
)


def fractional(need: ResourceSlots) -> bool:
    return need.gpu_hundredths % GPU_QUANTUM != 0


def why_waiting(image: str, need: ResourceSlots, nodes: Sequence[NodeOffer]) -> str:
    """Why a kernel asking for ``need`` with ``image`` fits on none of ``nodes`` (the resource
    group's nodes, with what is free after the decisions already taken in this pass)."""
    if fractional(need):
        return f"{FRACTIONAL_GPUS} (asked for {format_gpu(need.gpu_hundredths)})"
    if not nodes:
        return "no node is registered in this resource group"
    offering = [n for n in nodes if image in n.images]
    if not offering:
        return f"no node offers image {image}"
    usable = [n for n in offering if n.available]
    if not usable:
        return f"every node offering image {image} is cordoned or lost"
    problems = [p for d in DIMENSIONS if (p := _shortage(d, d.of(need), usable))]
    if problems:
        return "; ".join(problems)
    return f"no single node has {describe(need)} free at once"


def describe(need: ResourceSlots) -> str:
    """E.g. "4 CPUs, 32 GiB of memory and 1 GPU"."""
    parts = [format_cpu(need.cpu_milli)] if need.cpu_milli else []
    parts += [f"{format_memory(need.memory_bytes)} of memory"] if need.memory_bytes else []
    parts += [format_gpu(need.gpu_hundredths)] if need.gpu_hundredths else []
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def _shortage(dimension: _Dimension, need: int, nodes: Sequence[NodeOffer]) -> str | None:
    if need == 0:
        return None
    # Ties go to the smallest node id, so the sentence does not flicker between equal nodes.
    roomiest = min(nodes, key=lambda n: (-dimension.of(n.free), n.node_id))
    if dimension.of(roomiest.free) >= need:
        return None
    wanted = dimension.format(need)
    largest = min(nodes, key=lambda n: (-dimension.of(n.capacity), n.node_id))
    if dimension.of(largest.capacity) < need:
        # Waiting cannot help: say so, with the biggest node there is.
        have = dimension.format(dimension.of(largest.capacity))
        missing = dimension.idle_phrase.format(wanted)
        return f"no node has {missing} (largest: {have} on {largest.name})"
    have = dimension.format(dimension.of(roomiest.free))
    missing = dimension.free_phrase.format(wanted)
    return f"no node has {missing} (largest free: {have} on {roomiest.name})"
