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
the young generations collect most cycles within milliseconds of their making."""

from __future__ import annotations

import asyncio
import gc

FREEZE_EVERY_S = 60.0


def freeze_after_collecting() -> None:
    """Collect everything once, then freeze what is left (at a service's start)."""
    gc.collect()
    gc.freeze()


async def keep_frozen(every_s: float = FREEZE_EVERY_S) -> None:
    """Freeze what has been made since, every ``every_s``, until cancelled."""
    while True:
        await asyncio.sleep(every_s)
        gc.freeze()
