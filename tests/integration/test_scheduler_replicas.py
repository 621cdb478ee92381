"""Two scheduler replicas on one log never double-allocate: simulated node agents, a burst of
sessions from a few keypairs, both replicas taking commands from one durable consumer and
deciding passes over the same nodes, with admission leases on and with both forced active. The
log's invariant check (``events.audit.invariants``) then folds the whole log on its own: no
violation, and every session scheduled exactly once.

Each run has a nats-server of its own, so "the whole log" is this run's log and nothing else.
The agents are real ``NodeAgent``s with the simulated backend, in this process (200 of them
start in about 2 s): they start and end kernels, so room is given back while sessions still
wait and both replicas race for it (placement is concentrated: both pick the same nodes first).
"""

from __future__ import annotations

import pytest

from events.bus import Bus
from events.store import EventStore
from events.writes import AggregateRef, ConcurrencyConflict, Write
from schemas.ids import new_id
from schemas.settings import NatsSettings
from schemas.subjects import AggregateType
from tests.integration.replica_burst import SHORT, burst, workload
from tests.support import envelope, ref


@pytest.mark.parametrize("leases", [True, False], ids=["leases", "both-active"])
async def test_two_replicas_on_one_log_never_double_allocate(
    own_server: NatsSettings, leases: bool
) -> None:
    # The short form; the full one (200 agents, 2,000 sessions) is ``python -m bench.replicas``.
    size = SHORT
    progress, report, writes = await burst(own_server, size, leases)
    assert report.violations == []
    assert progress.done, f"after {size.timeout_s}s: {progress}"
    kernels = sum(len(workload(i)[0]) for i in range(size.sessions))
    ended = sum(len(workload(i)[0]) for i in range(size.sessions) if workload(i)[1] is not None)
    # Every session scheduled exactly once (a second SessionScheduled is a violation), every
    # kernel allocated once, every job's kernels given back, nothing else on the log.
    assert (report.sessions, report.scheduled) == (size.sessions, size.sessions)
    assert report.nodes == size.agents
    assert (report.allocations, report.releases, report.held) == (kernels, ended, kernels - ended)
    if not leases:
        assert all(writes), f"a replica forced active wrote nothing: {writes}"


async def test_a_rival_batch_that_begins_like_ours_is_a_conflict_not_our_write(bus: Bus) -> None:
    """The race above, in miniature. Replicas derive event ids from what caused a decision,
    so two replicas placing the same session write the same first event (the session's) but
    may allocate on different nodes. The second commit must be refused as a conflict: taken
    for its own earlier write, its replica would fold an allocation that is not on the log."""
    store = EventStore(bus)
    session, one_node, other_node = (
        ref(AggregateType.SESSION), ref(AggregateType.NODE), ref(AggregateType.NODE),
    )  # fmt: skip
    cause = new_id()
    # Placeholder events (the store does not read payloads) that no fold on the shared
    # server takes for a real session or ledger.
    scheduled = envelope(session, 1, cause=cause)

    def placement(node: AggregateRef) -> list[Write]:
        return [
            Write.create(session, scheduled),
            Write.create(node, envelope(node, 1, cause=cause)),
        ]

    await store.commit(placement(one_node))
    with pytest.raises(ConcurrencyConflict):
        await store.commit(placement(other_node))
    assert (await store.read(other_node)).events == []
