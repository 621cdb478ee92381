"""Why a need fits on no node of the group now: gathers the numbers over the group's nodes and
words them with ``reasons`` (this package). Pure. Runs only when a decision fails (once
per request shape and pass: the engine keeps the answer), so it may scan the group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from placement import reasons
from placement.devices import FULL
from placement.nodes import Need, NodeState


def why(
    nodes: Sequence[NodeState],
    need: Need,
    image: str,
    group: str,
    *,
    volumes: frozenset[str] = frozenset(),
    guard: bool,
    held: NodeState | None = None,
    head: str = "",
) -> str:
    """``nodes``: the group's nodes (all of them, by rank) as this pass has left them;
    ``volumes``: those the session's folders lie on (only nodes with them all count);
    ``held``: a node reserved for the starving session ``head``."""
    if not nodes:
        return reasons.no_nodes(group)
    available = [n for n in nodes if n.available]
    if not available:
        return reasons.all_unavailable(group)
    if volumes:
        missing = _volumes(available, volumes, group)
        if missing:
            return missing
        available = [n for n in available if volumes <= n.volumes]
    usable = [n for n in available if not image or image in n.images]
    if not usable:
        return reasons.image_missing(image, group, volumes)
    if held is not None and volumes <= held.volumes and _fits(held, need, image):
        return reasons.reserved_for(held.name, head)
    problems = [
        problem for problem in (_cpu(usable, need, group), _memory(usable, need, group)) if problem
    ]
    gpu = _gpu(usable, need, group, guard)
    if gpu:
        problems.append(gpu)
    if problems:
        return "; ".join(problems)
    return reasons.never_together(group, need.slots)


def _fits(node: NodeState, need: Need, image: str) -> bool:
    return node.fits(need, image) or (need.fallback is not None and node.fits(need.fallback, image))


def _volumes(nodes: Sequence[NodeState], volumes: frozenset[str], group: str) -> str | None:
    """Why no available node has every volume the session's folders lie on, or None."""
    for volume in sorted(volumes):
        if not any(volume in n.volumes for n in nodes):
            return reasons.volume_missing(volume, group)
    if not any(volumes <= n.volumes for n in nodes):
        return reasons.volumes_apart(sorted(volumes), group)
    return None


def _largest(nodes: Sequence[NodeState], of: Callable[[NodeState], int]) -> NodeState:
    # Ties go to the smallest node id (nodes are by rank), so the sentence does not flicker.
    best = nodes[0]
    for node in nodes:
        if of(node) > of(best):
            best = node
    return best


def _cpu(nodes: Sequence[NodeState], need: Need, group: str) -> str | None:
    return _short(
        nodes, need.cpu, group, lambda n: n.cpu, lambda n: n.offer.capacity.cpu_milli,
        reasons.cpu_short,
    )  # fmt: skip


def _memory(nodes: Sequence[NodeState], need: Need, group: str) -> str | None:
    return _short(
        nodes, need.mem, group, lambda n: n.mem, lambda n: n.offer.capacity.memory_bytes,
        reasons.memory_short,
    )  # fmt: skip


def _short(
    nodes: Sequence[NodeState],
    need: int,
    group: str,
    free: Callable[[NodeState], int],
    capacity: Callable[[NodeState], int],
    say: Callable[..., str],
) -> str | None:
    """Why ``need`` of one slot fits nowhere: even the largest node idle is too small, or no
    node has that much free now."""
    roomiest = _largest(nodes, free)
    if need <= free(roomiest):
        return None
    largest = _largest(nodes, capacity)
    if capacity(largest) < need:
        return say(group, need, capacity(largest), largest.name, idle=True)
    return say(group, need, free(roomiest), roomiest.name, idle=False)


def _gpu(nodes: Sequence[NodeState], need: Need, group: str, guard: bool) -> str | None:
    if not any(need.gpus):
        return None
    listed = [n for n in nodes if n.devs]
    if not listed:
        if any(n.offer.capacity.gpu_hundredths for n in nodes):
            return reasons.no_device_list(group)
        # Not "no node has 1 GPU" for a request of 0.5: the group has none at all.
        return reasons.no_gpus(group, sum(need.gpus))
    if need.whole:
        most = _largest(listed, lambda n: n.w)
        if most.w < need.whole:
            largest = _largest(listed, lambda n: len(n.devs))
            if len(largest.devs) < need.whole:
                return reasons.whole_short(
                    group, need.whole, len(largest.devs), largest.name, idle=True
                )
            return reasons.whole_short(group, need.whole, most.w, most.name, idle=False)
    shares = [g for g in need.gpus if g % FULL]
    return _shares(listed, max(shares), group, guard) if shares else None


def _shares(nodes: Sequence[NodeState], h: int, group: str, guard: bool) -> str | None:
    shareable = [n for n in nodes if any(not d.mig for d in n.devs)]
    if not shareable:
        return reasons.no_shareable_gpu(group)
    n = -(-h // FULL)
    spread = max(sum(1 for d in node.devs if not d.mig) for node in shareable)
    if not guard:
        best = max(node.share_room() for node in shareable)
        if best >= h:
            return None
        return reasons.shares_short(group, h, best, 0, idle=spread * FULL < h)
    best = max(node.best_room(n) for node in shareable)
    if best >= h:
        return None
    if spread < n:
        return reasons.shares_short(group, h, best, n, idle=True)
    if any(node.share_room() >= h for node in shareable):
        return reasons.fragmented(h)
    return reasons.shares_short(group, h, best, n, idle=False)
