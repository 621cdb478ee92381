"""Whether the running task is being cancelled, for loops that retry on errors.

nats-py turns a cancellation that arrives while it waits on a closed connection into
``ConnectionClosedError`` (``Subscription.next_msg``), and a stalled publish's into
``TooManyStalledMsgsError``. A loop that catches errors and tries again would swallow the
cancellation and never end (a service's ``stop``, or the test loop's shutdown, waits for ever):
such a loop asks ``cancelling()`` before it retries.
"""

from __future__ import annotations

import asyncio


def cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
