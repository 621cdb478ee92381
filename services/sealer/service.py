"""The sealer: follows ``JY_EVENTS`` from the position the last seal covers, links every
message into the chain (``events.audit.chain``), and stores a signed seal on ``seal.log``
once ``every_events`` messages wait or ``every_s`` seconds after the first of them was read.

One writer at a time, by construction: each seal is stored with
``Nats-Expected-Last-Subject-Sequence`` on the subject, so a second sealer (a replica, or a
stale one) that lost the race gets 10071, reads the winner's seal and goes on from there. A
seal that cannot be stored (no leader, a timeout) is tried again with the same messages: the
chain is only cut once a seal is stored. At start the sealer trusts the newest seal's head
(``jetyard audit verify`` checks the chain, the sealer extends it); a newest message on
``seal.log`` that is no seal stops it with that said, since sealing on top would bless it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

import nats.errors
import nats.js.errors
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from events.audit.chain import Chain
from events.audit.log_io import PushTail, last_seal
from events.audit.seals import NO_PREVIOUS, Seal, sign
from events.bus import Bus
from events.store import EXPECTED_HEADER, WRONG_LAST_SEQUENCE
from schemas.subjects import SEALS_STREAM, SEALS_SUBJECT
from services.sealer.settings import SealerSettings

log = logging.getLogger(__name__)

RETRY_S = 1.0


def utc_now() -> datetime:
    return datetime.now(UTC)


class Sealer:
    def __init__(
        self,
        bus: Bus,
        settings: SealerSettings,
        key: Ed25519PrivateKey,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.bus = bus
        self.settings = settings
        self.key = key
        self.clock = clock
        self.chain = Chain()
        self.last: Seal | None = None
        self.guard = 0
        """``seal.log``'s last sequence: what the next seal is stored against."""
        self.written = 0
        """Seals this sealer stored."""
        self.lost = 0
        """Seals another sealer stored first."""
        self._first_unsealed_at: float | None = None
        self._tail: PushTail | None = None

    async def resume(self) -> None:
        """Go on from the newest seal (or the log's start)."""
        found = await last_seal(self.bus)
        if found is None:
            self.last, self.guard, self.chain = None, 0, Chain()
        else:
            self.last, self.guard = found
            self.chain = Chain(bytes.fromhex(self.last.head), self.last.last)
        self._first_unsealed_at = None
        if self._tail is not None:
            await self._tail.close()
        self._tail = PushTail(self.bus, from_seq=self.chain.position + 1)
        log.info(
            "sealer resumes after seal %d at position %d",
            self.last.number if self.last else 0, self.chain.position,
        )  # fmt: skip

    async def run(self, stop: asyncio.Event) -> None:
        if self._tail is None:
            await self.resume()
        while not stop.is_set():
            try:
                await self.step()
            except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
                log.warning("sealer: the log is out of reach (%r); trying again", exc)
                await asyncio.sleep(RETRY_S)

    async def step(self) -> None:
        """Read what the log has, and seal if it is time."""
        assert self._tail is not None
        for message in await self._tail.fetch(self._wait()):
            self.chain.add(message)
            if self._first_unsealed_at is None:
                self._first_unsealed_at = time.monotonic()
            if self.chain.count >= self.settings.every_events and await self.seal() is None:
                return  # another sealer was first: resumed from its seal, the batch is stale
        if self._due():
            await self.seal()

    async def seal(self) -> Seal | None:
        """Store a seal over what was linked since the last one; None if another sealer
        stored one first (this one then goes on from that)."""
        if self.chain.count == 0:
            return None
        last = self.last
        seal = sign(
            self.key,
            number=last.number + 1 if last else 1,
            first=last.last + 1 if last else 1,
            last=self.chain.position,
            count=self.chain.count,
            head=self.chain.head,
            marks=bytes(self.chain.marks),
            previous=last.digest() if last else NO_PREVIOUS,
            sealed_at=self.clock(),
        )
        try:
            ack = await self.bus.js.publish(
                SEALS_SUBJECT, seal.to_bytes(), stream=SEALS_STREAM,
                headers={EXPECTED_HEADER: str(self.guard)},
            )  # fmt: skip
        except nats.js.errors.APIError as exc:
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise
            self.lost += 1
            log.warning("sealer: another sealer stored a seal first; going on from it")
            await self.resume()
            return None
        self.chain.cut()
        self.last, self.guard = seal, ack.seq
        self.written += 1
        self._first_unsealed_at = None
        return seal

    def _wait(self) -> float:
        if self._first_unsealed_at is None:
            return self.settings.poll_timeout_s
        left = self._first_unsealed_at + self.settings.every_s - time.monotonic()
        return max(0.05, min(self.settings.poll_timeout_s, left))

    def _due(self) -> bool:
        started = self._first_unsealed_at
        return started is not None and time.monotonic() - started >= self.settings.every_s

    async def close(self) -> None:
        if self._tail is not None:
            await self._tail.close()
