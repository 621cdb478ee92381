"""Keeping a long-lived service's heap out of the cyclic garbage collector's way.

A service holds its state for hours: the scheduler a fold of every session, node and quota,
the gateway its views' caches. CPython's oldest-generation collection walks every tracked
object, and it runs whenever a quarter more objects have reached that generation since the
last one, which steady churn (a session ends, another is placed) keeps bringing about. At
1,000 nodes and 10,000 sessions one such walk of the scheduler's heap was measured at
200-360 ms: a decision pass, and the events it stamped, waited that long.

``gc.freeze()`` moves every object alive at that moment to a permanent generation the
collector no longer walks. Reference counting still frees them the moment they are dropped;
only a reference cycle among frozen objects, dropped later, is never collected. So the heap is
collected once (the startup's garbage goes) and frozen when the service is ready, and then
frozen again every ``FREEZE_EVERY_S``: a walk then covers only what was made since. What may
leak is the cycles that became garbage within one period and lived long enough to be frozen:
the young generations collect most cycles within milliseconds of their making.

Freezing alone left one walk too many: after a freeze the oldest generation is nearly empty,
so the quarter rule no longer holds a full collection back, and one ran every 10 x 10 x 700
allocations, walking all that was made since the last freeze (at 500 sessions a second the
scheduler's fold grows fast). And with the default 700-object youngest generation, the
objects of work in flight (a fetched batch, the events of a pass, futures awaiting acks)
outlive two young collections and are promoted to the oldest, where only a full walk frees
their cycles. ``tune_collector`` makes the youngest generation 20,000 objects, so that work in
flight dies young: at 1,000 nodes and 20,000 sessions (``bench.sched_scale``) the scheduler ran
37 full collections (8 s of CPU) and 1 after; 1,000 simulated agents in one process, 25
(12 s) and 1. A cycle that dies young goes at the next young collection, as before; the
memory it may hold meanwhile is that of 20,000 x 10 objects at most."""

from __future__ import annotations

import asyncio
import gc

FREEZE_EVERY_S = 60.0
YOUNGEST_GENERATION = 20_000
"""Allocations (net) between collections of the youngest generation (CPython's default: 700)."""


def tune_collector() -> None:
    """Size the youngest generation for a service's work in flight (at a process's start)."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNGEST_GENERATION, middle, oldest)


def freeze_after_collecting() -> None:
    """Collect everything once, then freeze what is left (at a service's start)."""
    gc.collect()
    gc.freeze()


async def keep_frozen(every_s: float = FREEZE_EVERY_S) -> None:
    """Freeze what has been made since, every ``every_s``, until cancelled."""
    while True:
        await asyncio.sleep(every_s)
        gc.freeze()
