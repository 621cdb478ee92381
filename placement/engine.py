"""The placement of one resource group's queue in one pass: which node (and devices) takes
each waiting session, or why it waits. Pure: a snapshot in, decisions out; it reads and
writes no subject.

- Sessions are decided in queue order (``queueing``); each sees what earlier decisions of
  the same pass took. All kernels of a session are placed or none.
- Single-node sessions put every kernel on one node; multi-node sessions place each kernel on
  its own (kernels may share a node).
- Head of line: with BLOCK, the first session that fits nowhere (but would fit an idle node:
  one that can never fit would block the group forever) stops placement behind it. With
  BACKFILL, sessions behind it go where they fit; once that head has waited
  ``starvation_after_s``, it reserves the node closest to fitting it for the rest of the
  pass, and in later passes the same node while it is still the head (so the node drains
  until it fits). A starving multi-node head blocks the group instead.
- What lasts across passes (the round-robin cursor, the reservation) lives in ``Placer``,
  one per group; what one pass works on lives in ``pool.Pool``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placement import reasons
from placement.fairshare import FairShareInput
from placement.model import Decision, NodeOffer, Placed, SessionRequest, Waiting
from placement.pool import Pool, multi_node
from placement.queueing import Queue
from schemas.resources import ResourceSlots
from schemas.tenancy import GroupScheduling, HeadOfLine


class Placer:
    """Keeps what lasts across passes for ONE resource group: the round-robin cursor, the
    starving head's reservation, and the pool of nodes (renewed where they changed)."""

    __slots__ = ("_cursor", "_pool", "_reservation")

    def __init__(self) -> None:
        self._cursor: str | None = None
        self._reservation: tuple[str, str] | None = None  # (session id, node id)
        self._pool: Pool | None = None
        """The last pass's pool, renewed for the next (``Pool.renew``): a pass over a
        thousand nodes makes anew only those that changed."""

    def place(
        self,
        requests: Sequence[SessionRequest],
        nodes: Sequence[NodeOffer],
        policy: GroupScheduling,
        *,
        group: str,
        usage: Mapping[str, ResourceSlots] | None = None,
        now: float = 0.0,
        fair: FairShareInput | None = None,
    ) -> list[Decision]:
        """A decision per request, in queue order. ``usage``: what each owner already holds
        in the group (DRF); ``now``: seconds, on the clock of ``waiting_since``; ``fair``:
        each owner's decayed usage (fair share), evaluated at ``now``."""
        run = self._pool
        if run is None or not run.renew(nodes, policy, group, self._cursor):
            run = self._pool = Pool(nodes, policy, group, self._cursor)
        queue = Queue(requests, policy.queue_policy, usage, run.capacity(), fair)
        outcomes: list[Placed | tuple[str, str]] = []
        blocked = ""
        head_found = False
        reservation: tuple[str, str] | None = None
        for request in queue:
            if blocked:
                outcomes.append((request.session_id, blocked))
                continue
            result = run.decide(request)
            if isinstance(result, Placed):
                queue.placed(request)
                outcomes.append(result)
                continue
            reason = result
            if not head_found and run.fits_idle(request):
                head_found = True
                if policy.head_of_line is HeadOfLine.BLOCK:
                    blocked = reasons.blocked_behind(request.session_id)
                elif now - request.waiting_since >= policy.starvation_after_s:
                    if multi_node(request):
                        blocked = reasons.starving_behind(request.session_id)
                    else:
                        held = run.reserve(request, self._reservation)
                        reservation = (request.session_id, held.offer.node_id)
                        reason = reasons.holds_reservation(reason, held.name)
            outcomes.append((request.session_id, reason))
        self._reservation = reservation
        self._cursor = run.cursor_id()
        decisions: list[Decision] = []
        position = 0  # counts only the sessions left waiting
        for outcome in outcomes:
            if isinstance(outcome, Placed):
                decisions.append(outcome)
            else:
                position += 1
                standing = queue.standings.get(outcome[0])
                decisions.append(Waiting(outcome[0], outcome[1], position, standing))
        return decisions
