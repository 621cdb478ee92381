"""Would one waiting request fit its group now, later, or never: the scheduler's own rules
asked about one request at a time, for the views that explain a decision (the gateway's
Cluster and Queue pages). Pure; reads and writes no subject.

Nothing here re-states a rule. A request is tried exactly as a pass tries it
(``pool.Pool.decide``: the index, the device picks, the fragmentation guard and its
fallback, the volumes), and "never" is the pass's own head-of-line test (``Pool.fits_idle``:
would it fit an available node with nothing on it). The reason is the sentence the scheduler
writes when the request is first in its queue (``explain.why``). A view may add its own words
around them (who holds what), never another opinion on the fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from placement.model import NodeOffer, Placed, SessionRequest
from placement.pool import Pool, multi_node, shape_of
from schemas.tenancy import GroupScheduling


class Verdict(Enum):
    FITS = "fits"
    """A pass would place it now, were it first in line."""
    WAITS = "waits"
    """Not now; it would fit an available node of the group with nothing on it."""
    NEVER = "never"
    """Not even on an idle available node: waiting alone cannot help."""


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    reason: str = ""
    """The scheduler's sentence for a request that does not fit now (empty when it fits)."""
    nodes: tuple[str, ...] = ()
    """Where it would go now (node names, each once, in kernel order), when it fits."""


class Judge:
    """One group's nodes as they are now, asked about many requests. Each request is judged
    alone against the same room: a fit found is not kept (the working pool is set aside and
    made again when next needed), and the pool's own caches answer repeated shapes."""

    __slots__ = ("_group", "_known", "_offers", "_policy", "_pool")

    def __init__(
        self, offers: Sequence[NodeOffer], policy: GroupScheduling, *, group: str = ""
    ) -> None:
        self._offers = tuple(offers)
        self._policy = policy
        self._group = group
        self._pool: Pool | None = None
        self._known: dict[tuple[object, ...], Judgement] = {}

    def judge(self, request: SessionRequest) -> Judgement:
        # Each request is judged alone against the same room, so requests of one shape get one
        # answer: a page of many waiting sessions makes a pool again only per fitting shape.
        key = (
            request.image, request.pullable, request.volumes, multi_node(request),
            shape_of(request),
        )  # fmt: skip
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = self._judge(request)
        return known

    def _judge(self, request: SessionRequest) -> Judgement:
        pool = self._pool
        if pool is None:
            pool = self._pool = Pool(self._offers, self._policy, self._group, None)
        result = pool.decide(request)
        if isinstance(result, Placed):
            self._pool = None  # it took room from the pool: the next request starts afresh
            names = {node.offer.node_id: node.name for node in pool.nodes}
            placed = (names[kernel.node_id] for kernel in result.kernels.values())
            return Judgement(Verdict.FITS, nodes=tuple(dict.fromkeys(placed)))
        verdict = Verdict.WAITS if pool.fits_idle(request) else Verdict.NEVER
        return Judgement(verdict, result)


def judge(
    request: SessionRequest,
    offers: Sequence[NodeOffer],
    policy: GroupScheduling | None = None,
    *,
    group: str = "",
) -> Judgement:
    """One request against one group's nodes."""
    return Judge(offers, policy or GroupScheduling(), group=group).judge(request)
