"""A simulated image pull, for the simulated backend and the puller's unit tests: one layer of
``total_bytes`` that grows evenly over ``seconds``, then a made-up digest (the sha256 of the
reference, so the same image always has the same digest). No subjects, no network.

A reference in ``fail`` fails with that cause: "authentication", "not-found" and "unreachable"
at once (a registry refuses before any byte comes), the others ("disk-full", "timeout",
"other") half-way, after some progress, as a full disk or a dropped connection would.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping

from schemas.images import PullCause
from services.node.pulls import (
    LayerProgress,
    ProgressCallback,
    PullFailedError,
    PullProgress,
    RegistryAuth,
)

TICKS = 10
AT_ONCE: frozenset[PullCause] = frozenset({"authentication", "not-found", "unreachable"})


def simulated_digest(ref: str) -> str:
    return "sha256:" + hashlib.sha256(ref.encode()).hexdigest()


async def simulated_pull(
    ref: str,
    auth: RegistryAuth | None,
    progress: ProgressCallback,
    *,
    total_bytes: int,
    seconds: float,
    fail: Mapping[str, PullCause] | None = None,
) -> str:
    cause = (fail or {}).get(ref)
    if cause in AT_ONCE:
        raise PullFailedError(cause, f"simulated: pulling {ref} failed ({cause})")
    layer = simulated_digest(ref)[7:19]
    for tick in range(1, TICKS + 1):
        await asyncio.sleep(seconds / TICKS)
        done = total_bytes * tick // TICKS
        progress(PullProgress(done, total_bytes, (LayerProgress(layer, done, total_bytes),)))
        if cause is not None and tick == TICKS // 2:
            raise PullFailedError(cause, f"simulated: pulling {ref} failed half-way ({cause})")
    return simulated_digest(ref)
