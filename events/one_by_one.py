"""A store that writes one aggregate's several events one message at a time, never as an atomic
batch: for events that each stand alone (an agent's facts: this kernel started, that one
ended), where a failure part-way may leave the first of them stored.

Why: on a file stream of one replica nats-server stages every atomic batch in a file store of
its own, made (with a synced write) and removed again per batch, in the one goroutine that
stores everything published to the stream. With 1,000 agents each reporting the kernels it
started as one batch, that was a fifth of the server's CPU and held up every other writer of
the log meanwhile (``bench.sched_scale``, docs/benchmarks.md). One event per message, each
guarded by the sequence the one before it was stored at, is as safe against other writers
(a guard that does not hold stores nothing of what follows) and costs the server a plain
store and an acknowledgement per event.

A ``ConcurrencyConflict`` or ``OutcomeUnknownError`` part-way means the events before it may
be stored: the unit of work reads the aggregate back and decides again, and deciding a fact
that is on the log already changes nothing. Writes of several aggregates go to the wrapped
store's group commit as they are (all or none)."""

from __future__ import annotations

from events.writes import Committed, StoreAround, Write


class OneByOne(StoreAround):
    """``Store``: the wrapped store, with one aggregate's events written one message at a
    time."""

    async def commit(self, writes: list[Write]) -> Committed:
        if len(writes) != 1 or len(writes[0].events) == 1:
            return await self.store.commit(writes)
        (write,) = writes
        seqs: list[int] = []
        expected, recovered = write.expected_seq, False
        for envelope in write.events:
            stored = await self.store.commit([Write(write.aggregate, expected, (envelope,))])
            (expected,) = stored.seqs
            seqs.append(expected)
            recovered = recovered or stored.recovered
        last = {write.aggregate: expected}
        return Committed(seqs=tuple(seqs), last_seqs=last, recovered=recovered)
