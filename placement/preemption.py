"""Preemption, pure: which running sessions of lower priority to stop so that a waiting one
fits. Reads and writes no subject; the scheduler's steps act on the choice.

The rules (docs/scheduling.md, "Preemption"):

- only inside one resource group, and only where the group allows it (off by default);
- only sessions of strictly lower priority, and of the same domain unless the group allows
  crossing domains;
- only for a session that runs on one node (a multi-node session waits as before), and only
  on a node that has its image and the volumes of its folders;
- the fewest victims first, then the youngest (those that have run the shortest), all on one
  node;
- only when stopping them is enough: their cpu, memory and devices are freed on a copy of the
  node and the same fit placement uses decides (devices included, fragmentation guard too);
- never when what sessions already terminating hold (``releasing``) is enough by itself: that
  room is on its way back, and stopping more would be waste.

Stopping the victims frees nothing by itself: their slots stay allocated until their kernels
have exited, so the waiting session is placed by an ordinary pass afterwards and nothing is
ever over-allocated while victims stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from placement.model import NodeOffer, SessionRequest
from placement.nodes import Need, NodeState
from placement.pool import multi_node
from schemas.devices import DeviceShare
from schemas.resources import ResourceSlots
from schemas.tenancy import DeviceFill

SEARCH_BUDGET = 2_000
"""Victim sets tried per node for the fewest-victims search before falling back to taking the
youngest one after another (a node rarely runs enough small sessions to reach it)."""


@dataclass(frozen=True, slots=True)
class Holding:
    """What one kernel of a running session holds on one node: what stopping it frees."""

    node_id: str
    slots: ResourceSlots
    devices: tuple[DeviceShare, ...] = ()


@dataclass(frozen=True, slots=True)
class Running:
    """A running session that might be stopped."""

    session_id: str
    priority: int
    domain: str
    started: float
    """When it started running (epoch seconds): larger is younger."""
    holdings: tuple[Holding, ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    """Stop ``victims`` (youngest first) so that ``session_id`` fits on ``node_id``."""

    session_id: str
    node_id: str
    victims: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Policy:
    guard: bool = True
    fill: DeviceFill = DeviceFill.FILL
    across_domains: bool = False


def choose_victims(
    request: SessionRequest,
    domain: str,
    offers: Sequence[NodeOffer],
    running: Sequence[Running],
    policy: Policy,
    *,
    releasing: Sequence[Running] = (),
) -> Preemption | None:
    """The victims that make room for ``request``, or None: it fits already somewhere (or
    will once ``releasing``, sessions already terminating, have stopped), it spans nodes, or
    no set of lower-priority sessions on one node would make it fit."""
    if multi_node(request):
        return None
    shape = [
        (k.slots.cpu_milli, k.slots.memory_bytes, k.slots.gpu_hundredths) for k in request.kernels
    ]
    need = Need(shape, guard=policy.guard, fill=policy.fill)
    eligible = [
        r
        for r in running
        if r.priority < request.priority
        and (policy.across_domains or r.domain == domain)
        and r.session_id != request.session_id
    ]
    best: tuple[tuple[int, float], Preemption] | None = None
    for offer in offers:
        image = "" if request.pullable else request.image  # "": any node may pull it
        if not offer.available or (image and image not in offer.images):
            continue
        if not request.volumes <= offer.volumes:
            continue  # its folders cannot be mounted there, whoever stops
        leaving = [r for r in releasing if _on(r, offer)]
        if _fits(offer, leaving, need, image):
            return None  # room without stopping anyone: placement's business, not ours
        here = sorted(
            (r for r in eligible if _on(r, offer)),
            key=lambda r: (-r.started, r.session_id),
        )
        victims = _fewest(offer, leaving, here, need, image)
        if victims is None:
            continue
        # Fewest first; among as few, the youngest: the least run time thrown away.
        score = (len(victims), -sum(v.started for v in victims))
        if best is None or score < best[0]:
            chosen = tuple(v.session_id for v in victims)
            best = (score, Preemption(request.session_id, offer.node_id, chosen))
    return None if best is None else best[1]


def _on(running: Running, offer: NodeOffer) -> bool:
    return any(h.node_id == offer.node_id for h in running.holdings)


def _fewest(
    offer: NodeOffer, leaving: list[Running], candidates: list[Running], need: Need, image: str
) -> tuple[Running, ...] | None:
    """The smallest set (youngest first among sets as small) whose stop, with what
    ``leaving`` gives back, makes ``need`` fit."""
    if not candidates or not _fits(offer, [*leaving, *candidates], need, image):
        return None
    tried = 0
    for size in range(1, len(candidates) + 1):
        for chosen in combinations(candidates, size):
            tried += 1
            if _fits(offer, [*leaving, *chosen], need, image):
                return chosen
            if tried >= SEARCH_BUDGET:
                return _youngest_until_fit(offer, leaving, candidates, need, image)
    return None  # unreachable: all candidates together fit


def _youngest_until_fit(
    offer: NodeOffer, leaving: list[Running], candidates: list[Running], need: Need, image: str
) -> tuple[Running, ...] | None:
    for end in range(1, len(candidates) + 1):
        if _fits(offer, [*leaving, *candidates[:end]], need, image):
            return tuple(candidates[:end])
    return None


def _fits(offer: NodeOffer, victims: Sequence[Running], need: Need, image: str) -> bool:
    """Would ``need`` fit on ``offer`` once ``victims`` have given back what they hold there?"""
    node = NodeState(offer, 0)
    by_index = {d.index: d for d in node.devs}
    for victim in victims:
        for holding in victim.holdings:
            if holding.node_id != offer.node_id:
                continue
            node.cpu += holding.slots.cpu_milli
            node.mem += holding.slots.memory_bytes
            for share in holding.devices:
                dev = by_index.get(share.index)
                if dev is None:
                    continue
                if share.whole:
                    dev.whole, dev.used = False, 0
                else:
                    dev.used = max(dev.used - share.hundredths, 0)
    node.refresh()
    if node.fits(need, image):
        return True
    fallback = need.fallback
    return fallback is not None and node.fits(fallback, image)
