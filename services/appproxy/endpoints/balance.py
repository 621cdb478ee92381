"""Which replica takes a request, and the counts that decide it (and that the load reports
carry): per endpoint and per replica, requests since this proxy started and requests in
flight now. Pure (``now`` is passed in); no subjects.

The choice is least outstanding requests, as this proxy counts them: among the serving
replicas, one with the fewest requests in flight; ties go round-robin (a turn per endpoint), so
requests one after another spread evenly and a slow replica, holding its requests longer, gets
fewer. A replica that could not be connected to is passed over for ``AVOID_S`` while another
serves (the controller's probes take it out of the rotation for good, if it stays so).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from schemas.serving_load import LATENCY_BOUNDS_MS, latency_bucket

AVOID_S = 2.0


@dataclass(slots=True)
class Count:
    requests: int = 0
    """Since the proxy started."""
    inflight: int = 0


@dataclass(slots=True)
class EndpointLoad:
    total: Count = field(default_factory=Count)
    """Requests let in (token checked), held ones included, whichever replica took them."""
    replicas: dict[int, Count] = field(default_factory=dict)
    latency: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS_MS) + 1))
    """Requests answered, per bucket of ``schemas.serving_load.LATENCY_BOUNDS_MS``, since the
    proxy started (arrival to the answer's last byte, time held included)."""
    turn: int = 0
    avoid_until: dict[int, float] = field(default_factory=dict)


class Balancer:
    def __init__(self) -> None:
        self.endpoints: dict[str, EndpointLoad] = {}

    def _load(self, endpoint_id: str) -> EndpointLoad:
        load = self.endpoints.get(endpoint_id)
        if load is None:
            load = self.endpoints[endpoint_id] = EndpointLoad()
        return load

    @contextlib.contextmanager
    def arrived(self, endpoint_id: str) -> Iterator[None]:
        """One request to the endpoint, for the time of the block (held, then answered)."""
        total = self._load(endpoint_id).total
        total.requests += 1
        total.inflight += 1
        try:
            yield
        finally:
            total.inflight -= 1

    def answered(self, endpoint_id: str, ms: float) -> None:
        """A request let in was answered after ``ms`` milliseconds."""
        self._load(endpoint_id).latency[latency_bucket(ms)] += 1

    @contextlib.contextmanager
    def sent(self, endpoint_id: str, replica: int) -> Iterator[None]:
        """One request at a replica, for the time of the block (until its answer is passed on)."""
        counts = self._load(endpoint_id).replicas
        count = counts.get(replica)
        if count is None:
            count = counts[replica] = Count()
        count.requests += 1
        count.inflight += 1
        try:
            yield
        finally:
            count.inflight -= 1

    def choose(
        self, endpoint_id: str, serving: Sequence[int], *, now: float, tried: frozenset[int]
    ) -> int | None:
        """The replica (of ``serving``, by number, not in ``tried``) with the fewest requests
        in flight, ties in turn; None when none is left."""
        load = self._load(endpoint_id)
        left = [n for n in serving if n not in tried]
        usable = [n for n in left if load.avoid_until.get(n, 0.0) <= now] or left
        if not usable:
            return None
        counts = load.replicas
        least = min(counts[n].inflight if n in counts else 0 for n in usable)
        ties = [n for n in usable if (counts[n].inflight if n in counts else 0) == least]
        load.turn += 1
        return ties[load.turn % len(ties)]

    def unreachable(self, endpoint_id: str, replica: int, *, now: float) -> None:
        """A connection to the replica could not be opened: pass it over for a while."""
        self._load(endpoint_id).avoid_until[replica] = now + AVOID_S

    def prune(self, endpoint_id: str, live: frozenset[int] | None) -> None:
        """Forget the counts of replicas not in ``live`` (None: the endpoint is gone) that
        have nothing in flight."""
        load = self.endpoints.get(endpoint_id)
        if load is None:
            return
        for number in [n for n, c in load.replicas.items() if c.inflight == 0]:
            if live is None or number not in live:
                del load.replicas[number]
                load.avoid_until.pop(number, None)
        if live is None and load.total.inflight == 0 and not load.replicas:
            del self.endpoints[endpoint_id]
