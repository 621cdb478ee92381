"""Probing replicas: ``GET http://<inference address><health.path>`` with the health check's
timeout, every ``interval_s`` per replica. What a probe answered is kept in memory (the log
holds only the health changes it leads to, with the answer as their reason)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus

import httpx

from schemas.serving import HealthCheck
from services.serving.rules.health import Probe

BODY_SHOWN = 160
"""Characters of a failing answer's body kept in its reason (a model server's own words)."""

Key = tuple[str, int]
"""(endpoint id, replica number)."""


def _phrase(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _connect_failure(exc: BaseException) -> str:
    """The operating system's words for a failed connect (``connection refused``, ``no route
    to host``), found under the client library's own exception."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            return os.strerror(seen.errno).lower()
        for inner in getattr(seen, "exceptions", ()):  # an ExceptionGroup of attempts
            if isinstance(inner, OSError) and inner.errno is not None:
                return os.strerror(inner.errno).lower()
        seen = seen.__cause__ or seen.__context__
    return str(exc) or "connection failed"


async def probe_once(client: httpx.AsyncClient, address: str, check: HealthCheck) -> Probe:
    """One probe: passed or not, and its answer in words."""
    what = f"GET {check.path}"
    try:
        answer = await client.get(f"http://{address}{check.path}", timeout=check.timeout_s)
    except httpx.TimeoutException:
        return Probe(False, f"{what}: no answer within {check.timeout_s:g}s")
    except httpx.ConnectError as exc:
        return Probe(False, f"{what}: {_connect_failure(exc)} ({address})")
    except httpx.HTTPError as exc:
        return Probe(False, f"{what}: {type(exc).__name__}: {exc}")
    if answer.status_code == check.expected_status:
        return Probe(True, f"{what}: {answer.status_code}")
    body = " ".join(answer.text.split())[:BODY_SHOWN]
    return Probe(False, f"{what}: {_phrase(answer.status_code)}" + (f": {body}" if body else ""))


class Prober:
    """Each replica's probe record, and the probes due now."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # A connection per probe: a kept one to a server that restarted would fail a probe
        # the server itself would pass, and a dead one must show at once.
        self._client = httpx.AsyncClient(
            follow_redirects=False, trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )  # fmt: skip
        self.results: dict[Key, Probe] = {}
        self._last: dict[Key, float] = {}

    def due(self, key: Key, check: HealthCheck) -> bool:
        last = self._last.get(key)
        return last is None or self._clock() - last >= check.interval_s

    async def probe(self, targets: Iterable[tuple[Key, str, HealthCheck]]) -> None:
        """Probe every target (concurrently) and record each answer."""
        found = list(targets)
        if not found:
            return
        for key, _, _ in found:
            self._last[key] = self._clock()
        answers = await asyncio.gather(
            *(probe_once(self._client, address, check) for _, address, check in found)
        )
        for (key, _, _), answer in zip(found, answers, strict=True):
            before = self.results.get(key)
            failures = 0 if answer.ok else (before.failures if before else 0) + 1
            self.results[key] = Probe(answer.ok, answer.answer, failures)

    def keep_only(self, keys: set[Key]) -> None:
        """Forget replicas no longer probed."""
        for key in [k for k in self.results if k not in keys]:
            del self.results[key]
        for key in [k for k in self._last if k not in keys]:
            del self._last[key]

    async def close(self) -> None:
        await self._client.aclose()
