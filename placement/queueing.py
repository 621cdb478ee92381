"""The order a group's waiting sessions are decided in: priority first (higher first), then
the group's policy. Pure.

- FIFO: oldest first; LIFO: newest first (ties: session id).
- DRF (dominant resource fairness): the owner whose dominant share — the largest, over cpu,
  memory and GPU, of what it holds in the group over the group's capacity — is smallest goes
  next (ties: the owner whose next session is oldest). Each placement grows its owner's share,
  so owners alternate as in the DRF paper; an owner whose session waits keeps its share.
- FAIR_SHARE: the owner whose domain, then project, then user has the highest fair-share
  factor (``fairshare``: usage decayed, over shares) goes first; ties: oldest first. Usage
  moves only with time, so the order holds for the whole pass.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from itertools import groupby

from placement.fairshare import FairShareInput, Standing, standings
from placement.model import SessionRequest
from schemas.resources import ResourceSlots
from schemas.tenancy import QueuePolicy


class Queue:
    """Iterate for the queue order; call ``placed`` for each session placed before asking
    for the next one (DRF's shares follow placements)."""

    def __init__(
        self,
        requests: Sequence[SessionRequest],
        policy: QueuePolicy,
        usage: Mapping[str, ResourceSlots] | None,
        capacity: ResourceSlots,
        fair: FairShareInput | None = None,
    ) -> None:
        self._policy = policy
        self.standings: dict[str, Standing] = {}
        """Session id -> its owner's fair-share standing (fair-share groups only)."""
        self._capacity = (capacity.cpu_milli, capacity.memory_bytes, capacity.gpu_hundredths)
        self._held: dict[str, list[int]] = {
            owner: [s.cpu_milli, s.memory_bytes, s.gpu_hundredths]
            for owner, s in (usage or {}).items()
        }
        if policy is QueuePolicy.LIFO:
            self._requests = sorted(requests, key=lambda r: (-r.priority, -r.order, r.session_id))
        elif policy is QueuePolicy.FAIR_SHARE and fair is not None:
            self._requests = self._by_fair_share(requests, fair, capacity)
        else:
            self._requests = sorted(requests, key=lambda r: (-r.priority, r.order, r.session_id))

    def _by_fair_share(
        self, requests: Sequence[SessionRequest], fair: FairShareInput, capacity: ResourceSlots
    ) -> list[SessionRequest]:
        tree = standings(fair, {r.account for r in requests}, capacity)
        self.standings = {r.session_id: tree.standing(r.account) for r in requests}
        keys = {sid: standing.key() for sid, standing in self.standings.items()}
        return sorted(
            requests, key=lambda r: (-r.priority, keys[r.session_id], r.order, r.session_id)
        )

    def __iter__(self) -> Iterator[SessionRequest]:
        if self._policy is not QueuePolicy.DRF:
            yield from self._requests
            return
        for _, band in groupby(self._requests, key=lambda r: r.priority):
            yield from self._fair(band)

    def _fair(self, band: Iterator[SessionRequest]) -> Iterator[SessionRequest]:
        queues: dict[str, deque[SessionRequest]] = {}
        for request in band:  # oldest first within each owner
            queues.setdefault(request.owner, deque()).append(request)
        heap = [
            (self.share(owner), q[0].order, q[0].session_id, owner) for owner, q in queues.items()
        ]
        heapq.heapify(heap)
        while heap:
            owner = heapq.heappop(heap)[3]
            waiting = queues[owner]
            yield waiting.popleft()
            if waiting:  # the share now includes what was just placed, if it was
                nxt = waiting[0]
                heapq.heappush(heap, (self.share(owner), nxt.order, nxt.session_id, owner))

    def placed(self, request: SessionRequest) -> None:
        if self._policy is not QueuePolicy.DRF:
            return
        held = self._held.setdefault(request.owner, [0, 0, 0])
        for kernel in request.kernels:
            held[0] += kernel.slots.cpu_milli
            held[1] += kernel.slots.memory_bytes
            held[2] += kernel.slots.gpu_hundredths

    def share(self, owner: str) -> float:
        """The owner's dominant share of the group."""
        held = self._held.get(owner)
        if held is None:
            return 0.0
        return max((h / c for h, c in zip(held, self._capacity, strict=True) if c > 0), default=0.0)
