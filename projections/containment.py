"""What the projector holds back: events it could not read or store (quarantined, their
aggregates held), and the operators' corrections of them (``ev.correction.*``: read an
aggregate again without one event, or give it up). Reads ``ev.correction.*`` at start and the
``jy-quarantine`` bucket; writes the bucket."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import nats.errors
import nats.js.errors

from events.bus import Bus
from events.corrections import Corrections
from events.direct import RawMessage
from events.envelope import StoredEvent
from events.quarantine import Poison, Quarantine, record_quietly
from events.store import decode
from events.tail import Tail
from schemas.subjects import EVENT_NAME_HEADER, AggregateType, events_of

log = logging.getLogger(__name__)


class Containment:
    def __init__(self, bus: Bus, consumer: str) -> None:
        self._bus = bus
        self.consumer = consumer
        self.held: set[str] = set()
        """Subjects with an event the views could not take: their later events wait too."""
        self.corrected = Corrections()
        self.reapply: dict[str, None] = {}
        """Held subjects an operator corrected: to read again into the views."""
        self._poisoned: list[Poison] = []
        self._quarantine: Quarantine | None = None

    async def load(self) -> None:
        """What was held and corrected before this process started."""
        self._quarantine = await Quarantine.open(self._bus)
        entries = await self._quarantine.entries()
        self.held = {p.subject for p in entries if p.consumer == self.consumer}
        tail = Tail(self._bus, subjects=[events_of(AggregateType.CORRECTION)])
        try:
            while batch := await tail.fetch_raw(timeout=0.5):
                for message in batch:
                    self._note(message.seq, message.subject, message)
                if tail.pending == 0:
                    break
        finally:
            await tail.close()
        self.held |= self.corrected.voided
        self.held -= set(self.corrected.to_rebuild)  # corrected since: read them again
        self.reapply.update(self.corrected.to_rebuild)
        self.corrected.to_rebuild.clear()

    def decoded(self, messages: Sequence[RawMessage]) -> list[StoredEvent]:
        """The batch decoded, less what is held or skipped; what does not decode is held.
        Corrections are noted (and passed on: no view takes them)."""
        events: list[StoredEvent] = []
        for message in messages:
            if message.subject.startswith("ev.correction."):
                self._note(message.seq, message.subject, message)
            if message.subject in self.held or self.corrected.skips(message.subject, message.seq):
                continue
            try:
                events.append(decode(message))
            except Exception as exc:
                self.poison(
                    message.seq, message.subject, message.headers.get(EVENT_NAME_HEADER, ""), exc
                )
        return events

    def _note(self, seq: int, subject: str, message: RawMessage) -> None:
        try:
            target, voided = self.corrected.take(decode(message).envelope)
        except Exception as exc:
            self.poison(seq, subject, message.headers.get(EVENT_NAME_HEADER, ""), exc)
            return
        if voided:
            self.held.add(target)
        elif target in self.held:
            self.corrected.to_rebuild[target] = None
            self.reapply[target] = None

    def poison(self, seq: int, subject: str, name: str, exc: Exception) -> None:
        self.held.add(subject)
        self._poisoned.append(Poison.of(seq, self.consumer, subject, name, exc))

    async def flush(self) -> None:
        """Record what was held since the last call; release what operators settled."""
        poisoned, self._poisoned = self._poisoned, []
        await record_quietly(self._quarantine, poisoned)
        settled, self.corrected.resolved = list(self.corrected.resolved), {}
        if self._quarantine is None:
            return
        for subject in settled:
            try:
                await self._quarantine.release_subject(self.consumer, subject)
            except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
                log.warning("could not release %s from the quarantine: %r", subject, exc)
