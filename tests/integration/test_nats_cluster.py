"""The log on a three-node NATS JetStream cluster (issue 27, first step): the streams at R3,
and the loss of the ``JY_EVENTS`` leader under a stream of writes. Every write that was
acknowledged survives, exactly once; writes go on after the election on the surviving two;
the killed member catches up when it comes back."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats.errors
import nats.js.errors

from events.bus import connect, ensure_streams
from events.store import EventStore
from events.writes import ConcurrencyConflict, OutcomeUnknownError, UnavailableError, Write
from schemas.subjects import EVENTS_STREAM
from tests.nats_cluster_support import nats_cluster
from tests.support import envelope, ref

WRITES = 300
KILL_AT = 100


async def test_acknowledged_writes_survive_the_loss_of_the_log_leader(tmp_path: Path) -> None:
    with nats_cluster(tmp_path) as cluster:
        await cluster.ready()
        bus = await connect(cluster.settings(), name="cluster-test")
        try:
            await ensure_streams(bus)
            info = await bus.js.stream_info(EVENTS_STREAM)
            assert info.config.num_replicas == 3
            store = EventStore(bus)
            leader = await cluster.leader_of(EVENTS_STREAM)
            written, retried = [], 0
            killed_at = resumed_at = 0.0
            for i in range(WRITES):
                if i == KILL_AT:
                    cluster.kill(leader)
                    killed_at = time.monotonic()
                aggregate = ref()
                write = Write.create(aggregate, envelope(aggregate, 1, payload={"i": i}))
                while True:
                    try:
                        await store.append(write)
                    except ConcurrencyConflict:
                        pass  # an earlier try was stored after all: the guard says so
                    except (OutcomeUnknownError, UnavailableError, nats.errors.Error,
                            nats.js.errors.Error, TimeoutError):  # fmt: skip
                        retried += 1  # no leader yet, or the answer was lost: the same write
                        await asyncio.sleep(0.2)
                        continue
                    written.append(aggregate)
                    if i >= KILL_AT and not resumed_at:
                        resumed_at = time.monotonic()
                    break
            new_leader = await cluster.leader_of(EVENTS_STREAM)
            assert new_leader != leader
            cluster.restart(leader)
            for aggregate in written:
                history = await store.read(aggregate)
                assert len(history.events) == 1, aggregate  # survived, exactly once
            print(
                f"leader {leader} killed; {new_leader} leads; the next write was accepted "
                f"{resumed_at - killed_at:.2f}s later ({retried} tries refused meanwhile)"
            )
            assert resumed_at - killed_at < 30
        finally:
            await bus.close()
