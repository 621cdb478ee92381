"""Why a session waits, in a sentence a researcher can act on; pure text, no subjects.

A reason names what is short and the best the group has now ("no node in group gpu-a has 4
free GPUs (most free: 2)"), and says when waiting cannot help because no node is that large
even when idle (``never``). Such a request is refused at creation, naming the largest node
(``refused``), unless its group waits for larger nodes; one that waits says what for
(``while_waiting``). The placement engine gathers the numbers; this module only words them
(``rules.admission`` borrows its amount formats).
"""

from __future__ import annotations

from decimal import Decimal

from schemas.fair_share import FairShareStanding
from schemas.resources import CPU_QUANTUM, GPU_QUANTUM, ResourceSlots

GIB = 1 << 30
MIB = 1 << 20


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


def describe(need: ResourceSlots) -> str:
    """E.g. "4 CPUs, 32 GiB of memory and 1 GPU"."""
    parts = [format_cpu(need.cpu_milli)] if need.cpu_milli else []
    parts += [f"{format_memory(need.memory_bytes)} of memory"] if need.memory_bytes else []
    parts += [format_gpu(need.gpu_hundredths)] if need.gpu_hundredths else []
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def short_id(session_id: str) -> str:
    return session_id[:8]


def where(group: str) -> str:
    return f"in group {group}" if group else "in this resource group"


# ---- the group cannot run it at all ------------------------------------------------------


def no_nodes(group: str) -> str:
    return f"no node is registered {where(group)}"


def all_unavailable(group: str) -> str:
    return f"every node {where(group)} is cordoned or lost"


def image_missing(image: str, group: str, volumes: frozenset[str] = frozenset()) -> str:
    """``volumes``: those of the session's folders; only the nodes with them all count."""
    if not volumes:
        return f"image {image} is on no available node {where(group)}"
    return (
        f"image {image} is on no available node {where(group)} "
        f"with volume{'s' if len(volumes) > 1 else ''} {_and(sorted(volumes))}"
    )


def volume_missing(volume: str, group: str) -> str:
    """A folder of the session lies on ``volume``, which no available node has mounted."""
    return (
        f"no available node {where(group)} has volume {volume} (the session mounts a folder on it)"
    )


def volumes_apart(volumes: list[str], group: str) -> str:
    return f"no available node {where(group)} has volumes {_and(volumes)} together"


def _and(names: list[str]) -> str:
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def no_device_list(group: str) -> str:
    return f"no node {where(group)} lists its GPU devices yet (GPU requests need them)"


NO_GPUS = "there are no GPUs"


def no_gpus(group: str, need: int) -> str:
    """No node of the group has any GPU (``need``: the hundredths asked for)."""
    return f"{NO_GPUS} {where(group)} (asked for {format_gpu(need)})"


def no_shareable_gpu(group: str) -> str:
    return f"no node {where(group)} has a GPU that takes shares (MIG devices take none)"


# ---- one dimension is short --------------------------------------------------------------

IDLE = "even when idle"


def cpu_short(group: str, need: int, best: int, host: str, *, idle: bool) -> str:
    """``idle``: even the largest node, idle, is too small (``best`` is then its capacity)."""
    if idle:
        return (
            f"no node {where(group)} has {format_cpu(need)} {IDLE} "
            f"(largest: {format_cpu(best)} on {host})"
        )
    return (
        f"no node {where(group)} has {format_cpu(need)} free "
        f"(largest free: {format_cpu(best)} on {host})"
    )


def memory_short(group: str, need: int, best: int, host: str, *, idle: bool) -> str:
    if idle:
        return (
            f"no node {where(group)} has {format_memory(need)} of memory {IDLE} "
            f"(largest: {format_memory(best)} on {host})"
        )
    return (
        f"no node {where(group)} has {format_memory(need)} of free memory "
        f"(largest free: {format_memory(best)} on {host})"
    )


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def whole_short(group: str, need: int, best: int, host: str, *, idle: bool) -> str:
    """Whole devices, counted (``need``, ``best`` in devices)."""
    if idle:
        return f"no node {where(group)} has {_gpus(need)} {IDLE} (largest: {_gpus(best)} on {host})"
    return (
        f"no node {where(group)} has {need} free GPU{'' if need == 1 else 's'} (most free: {best})"
    )


def shares_short(group: str, need: int, best: int, devices: int, *, idle: bool) -> str:
    """Shares in hundredths laid over ``devices`` devices (0: over any number of them)."""
    over = "" if devices == 0 else " on one device" if devices == 1 else f" on {devices} devices"
    if idle:
        return f"no node {where(group)} has {format_gpu(need)}{over} {IDLE}"
    return (
        f"no node {where(group)} has {format_gpu(need)} free{over} (most free: {format_gpu(best)})"
    )


def fragmented(need: int) -> str:
    return (
        f"fragmentation: {format_gpu(need)} is free only split across devices "
        "(fragmentation guard on)"
    )


def never_together(group: str, need: ResourceSlots) -> str:
    return f"no single node {where(group)} has {describe(need)} free at once"


# ---- the queue holds it back ---------------------------------------------------------------


def blocked_behind(head: str) -> str:
    return f"waiting behind session {short_id(head)} (head of the queue, blocking)"


def starving_behind(head: str) -> str:
    return (
        f"waiting behind session {short_id(head)} "
        "(head of the queue, starving: the group holds still for it)"
    )


def reserved_for(host: str, head: str) -> str:
    return f"node {host} is reserved for session {short_id(head)} (head of the queue, starving)"


def holds_reservation(reason: str, host: str) -> str:
    return f"{reason}; node {host} is reserved for it"


def with_fair_share(reason: str, standing: FairShareStanding) -> str:
    """A waiting session of a fair-share group: why it waits, and its owner's factors (the
    queue's order after priority: domain, then project, then user; higher first)."""
    return (
        f"{reason}; fair share: domain {standing.domain:.2f}, project {standing.project:.2f}, "
        f"user {standing.user:.2f}"
    )


def kernel_of(index: int, count: int, reason: str) -> str:
    """A multi-node session: which kernel found no node (with the earlier ones held)."""
    return f"kernel {index + 1} of {count}: {reason}"


def together(count: int, reason: str) -> str:
    """A single-node session of several kernels: the reason is about their sum."""
    return f"all {count} kernels on one node: {reason}"


# ---- never: no node of the group could hold it, even idle ---------------------------------


def never(reason: str) -> bool:
    """Whether a reason says no node of the group could hold the request even idle."""
    return IDLE in reason or NO_GPUS in reason


def while_waiting(reason: str) -> str:
    """What a waiting session is told: one that no node could hold even idle waits for a
    larger node to join (its group allows that, or it was asked for before any node of the
    group was registered)."""
    return f"{reason}; it waits for a larger node to join the group" if never(reason) else reason


def refused(reason: str, group: str) -> str:
    """Why a request is refused at creation: no node of ``group`` could ever hold it."""
    return (
        f"no node {where(group)} could ever hold this request: {reason}. Ask for less, or ask "
        f"an operator to let group {group} wait for larger nodes (waitForLargerNodes)"
    )
