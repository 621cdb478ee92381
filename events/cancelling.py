"""Whether the running task has been asked to stop, for loops that must end when cancelled.

A cancellation can get lost on its way: nats-py turns one that arrives while it waits on a
closed connection into ``ConnectionClosedError`` (``Subscription.next_msg``), and a stalled
publish's into ``TooManyStalledMsgsError``; and Python 3.11's ``asyncio.wait_for`` (under every
nats-py read) returns the result instead when the awaited thing completes at the same moment
(fixed in 3.12). A loop that retries on errors, or simply reads again, would then never end (a
service's ``stop``, or the test loop's shutdown, waits for ever). The task still counts the
request (``Task.cancelling()``), so such a loop runs ``while not cancelling()`` and asks again
before it retries an error.
"""

from __future__ import annotations

import asyncio


def cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
