"""Keep a consumer's in-memory state equal to the log: catch up, then follow, without echoes.

Reads ``ev.>`` (or the filters given) through ``Tail``. State-building consumers (scheduler,
admission, agents, gateway feeds) subclass ``FoldedState``; ``Fold`` feeds it:

- the position (last folded stream sequence) and each aggregate's last sequence live in the
  state, so a snapshot of the state is also a snapshot of where to resume;
- ``catch_up()`` folds up to the stream's last sequence *read at the start* before the consumer
  may decide anything (a decision on a stale view would be fenced by OCC anyway, but would waste
  a round trip per aggregate);
- a consumer applies its own writes at once from the store's acks (``record_own``) and the fold
  ignores their echo when the tail delivers them later.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Generic, TypeVar

import nats.errors
import nats.js.errors

from events.bus import Bus
from events.corrections import Corrections
from events.direct import RawMessage
from events.envelope import StoredEvent
from events.quarantine import Poison, Quarantine, record_quietly
from events.store import EventStore, decode
from events.tail import Tail
from events.writes import AggregateRef, Committed, Write
from schemas.subjects import EVENT_NAME_HEADER, AggregateType, event_kind, events_of

log = logging.getLogger(__name__)

CORRECTIONS = events_of(AggregateType.CORRECTION)


class FoldedState(ABC):
    """Base for state folded from the log. Subclasses implement ``evolve``.

    An event ``evolve`` cannot apply (or the fold cannot decode) holds its aggregate: the
    subject goes into ``broken``, ``forget`` drops what was folded of it, later events of it
    are skipped, and the event waits in ``poisoned`` until the fold records it in the
    quarantine. Nothing else stops."""

    consumer = "consumer"
    """The name quarantined events are recorded under."""
    folds_corrections = False
    """Whether ``evolve`` also takes ``ev.correction.*`` events (the directory keeps them)."""

    def __init__(self, position: int = 0, guards: dict[str, int] | None = None) -> None:
        self.position = position
        """The last stream sequence folded from the tail."""
        self.guards: dict[str, int] = dict(guards or {})
        """Subject -> sequence of the last event applied for that aggregate (own writes too)."""
        self.broken: set[str] = set()
        """Subjects held after an event that could not be folded: never decided on."""
        self.poisoned: list[Poison] = []
        """Events held since the fold last recorded them in the quarantine."""
        self.corrected = Corrections()
        """Operators' corrections of held aggregates: events skipped, aggregates voided."""

    def guard(self, aggregate: AggregateRef) -> int:
        """The expected sequence for the next write to ``aggregate`` (0: not seen, so create)."""
        return self.guards.get(aggregate.subject, 0)

    def apply(self, event: StoredEvent) -> bool:
        """Fold one event unless it was already applied (an echo of an own write)."""
        subject = event.envelope.subject
        if event.seq <= self.guards.get(subject, 0):
            return False
        self.guards[subject] = event.seq
        if event.envelope.aggregate_type is AggregateType.CORRECTION:
            self._take_correction(event)
            if not self.folds_corrections:
                return True
        if subject in self.broken:
            return False
        try:
            self.evolve(event)
        except Exception as exc:
            self.hold(subject, event.seq, event.envelope.name, exc)
            return False
        return True

    def hold(self, subject: str, seq: int, name: str, exc: BaseException) -> None:
        """Stop folding ``subject``: it cannot be read past ``seq``."""
        self.guards[subject] = max(seq, self.guards.get(subject, 0))
        first = subject not in self.broken
        self.broken.add(subject)
        if first:
            self.forget(subject)
        self.poisoned.append(Poison.of(seq, self.consumer, subject, name, exc))

    def _take_correction(self, event: StoredEvent) -> None:
        try:
            target, voided = self.corrected.take(event.envelope)
        except Exception as exc:
            self.hold(event.envelope.subject, event.seq, event.envelope.name, exc)
            return
        if voided:
            if target not in self.broken:
                self.broken.add(target)
                self.forget(target)
        elif target in self.broken and target not in self.corrected.voided:
            self.corrected.to_rebuild[target] = None

    def skips(self, subject: str, name: str) -> bool:
        """Whether this state never looks at events named ``name`` on ``subject``: the fold
        then reads past them without decoding them (a hook: a state that follows an aggregate
        for one kind of its events, e.g. an agent's ledger for registrations on its own
        subject, where the agent's every fact is also written). The subject's guard does not
        move past them: only for a state that never writes that aggregate."""
        return False

    def forget(self, subject: str) -> None:  # noqa: B027 (a hook: most states keep nothing)
        """Drop what was folded of a held aggregate (override where state keeps it)."""

    def take_poisoned(self) -> list[Poison]:
        taken, self.poisoned = self.poisoned, []
        return taken

    @abstractmethod
    def evolve(self, event: StoredEvent) -> None:
        """Change the state for one event. Pure: no I/O, no clock."""


S = TypeVar("S", bound=FoldedState)


class Fold(Generic[S]):
    def __init__(
        self,
        bus: Bus,
        state: S,
        *,
        subjects: list[str] | None = None,
        kinds: Collection[AggregateType] | None = None,
        batch: int = 256,
        consumer: str | None = None,
    ) -> None:
        """Fold ``subjects`` (all of ``ev.>`` by default), or with ``kinds`` the whole log
        through one filter, folding only the events of those aggregate types.

        ``kinds`` is for a consumer of most of the log: a consumer with several filters costs
        the server, for every message it delivers, a walk of the subjects of a message block
        to find the next one that matches (with the scheduler's dozen filters at 1,000 nodes
        that walk was two thirds of nats-server's CPU), where one filter over the whole
        stream costs nothing; what the filters kept out is then skipped here, by subject,
        before it is decoded."""
        self.state = state
        if consumer is not None:
            state.consumer = consumer
        self._bus = bus
        self._quarantine: Quarantine | None = None
        self._store = EventStore(bus)
        self._kinds: frozenset[str] | None = None
        if kinds is not None:
            if subjects is not None:
                raise ValueError("a fold reads either subjects or kinds, not both")
            self._kinds = frozenset(k.value for k in (*kinds, AggregateType.CORRECTION))
        elif subjects is not None and CORRECTIONS not in subjects:
            subjects = [*subjects, CORRECTIONS]  # every consumer takes operators' corrections
        self._tail = Tail(bus, from_seq=state.position + 1, subjects=subjects, batch=batch)
        self.caught_up = asyncio.Event()

    async def pending(self) -> int:
        """Events of its subjects stored beyond what it has read, now: its lag
        (``events.metrics.ConsumerLag``; one request to the server)."""
        return await self._tail.num_pending()

    async def poll(self, timeout: float = 1.0) -> list[StoredEvent]:
        """Fold the next batch from the tail; returns the events that changed the state."""
        unseen = self._unseen(await self._tail.fetch_raw(timeout))
        applied = [e for e in unseen if self.state.apply(e)]
        self.state.position = max(self.state.position, self._tail.position)
        await self.record_poisoned()
        return applied

    def _unseen(self, messages: list[RawMessage]) -> list[StoredEvent]:
        """The messages not applied yet, decoded. An echo of an own write (applied from its
        ack) is recognised by its subject and sequence and never decoded: a writer folding
        its own log would otherwise decode most of what it reads for nothing."""
        guards, state, kinds = self.state.guards, self.state, self._kinds
        unseen = []
        for message in messages:
            if kinds is not None and event_kind(message.subject) not in kinds:
                continue
            if message.seq <= guards.get(message.subject, 0):
                continue
            if state.corrected.skips(message.subject, message.seq):
                guards[message.subject] = message.seq  # read past it, as the operator said
                continue
            if state.skips(message.subject, message.headers.get(EVENT_NAME_HEADER, "")):
                continue  # never looked at (the guard stays: see ``skips``)
            try:
                unseen.append(decode(message))
            except Exception as exc:  # not an envelope at all: hold its subject
                name = message.headers.get(EVENT_NAME_HEADER, "")
                state.hold(message.subject, message.seq, name, exc)
        return unseen

    async def record_poisoned(self) -> None:
        """Act on corrections (fold held aggregates again, release what they settled), then
        keep what the state held since the last call in the quarantine."""
        corrections = self.state.corrected
        if corrections.to_rebuild or corrections.resolved:
            await self._correct()
        poisoned = self.state.take_poisoned()
        if poisoned:
            await record_quietly(await self._quarantine_log(), poisoned)

    async def _quarantine_log(self) -> Quarantine:
        if self._quarantine is None:
            self._quarantine = await Quarantine.open(self._bus)
        return self._quarantine

    async def _correct(self) -> None:
        state, corrections = self.state, self.state.corrected
        for subject in list(corrections.to_rebuild):
            del corrections.to_rebuild[subject]
            messages = await self._store.reader.read_subject(subject)
            state.broken.discard(subject)
            state.forget(subject)
            state.guards[subject] = 0
            # The aggregate as far as this fold has read, without what the operator skipped.
            for message in messages:
                if message.seq > state.position or subject in state.broken:
                    break
                for event in self._unseen([message]):  # one by one: a skip moves the guard
                    state.apply(event)
            corrections.resolved[subject] = None
        settled, corrections.resolved = list(corrections.resolved), {}
        quarantine = await self._quarantine_log()
        for subject in settled:
            try:
                await quarantine.release_subject(state.consumer, subject)
            except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
                log.warning("could not release %s from the quarantine: %r", subject, exc)

    async def catch_up(self, *, timeout: float = 1.0) -> int:
        """Fold everything up to the log's end as read now; afterwards ``caught_up`` is set."""
        target = await self._store.stream_last_seq()
        self._tail.pending = -1  # what an earlier call saw pending is not known any more
        while self._tail.position < target:
            # With filters the last matching event may lie before ``target``: the consumer's
            # pending count (as of a moment after ``target`` was read) says when we hold it all.
            if self._tail.pending == 0:
                break
            if self._tail.pending < 0 and await self._tail.num_pending() == 0:
                break
            for event in self._unseen(await self._tail.fetch_raw(timeout)):
                self.state.apply(event)
            self.state.position = max(self.state.position, self._tail.position)
            await self.record_poisoned()
        self.caught_up.set()
        return target

    def record_own(self, writes: list[Write], committed: Committed) -> None:
        """Apply the consumer's own stored writes now, from the ack; their echo is skipped."""
        seqs = iter(committed.seqs)
        for write in writes:
            for envelope in write.events:
                self.state.apply(StoredEvent(seq=next(seqs), envelope=envelope))

    async def run(self, stop: asyncio.Event, *, timeout: float = 1.0) -> None:
        """Follow the log until ``stop`` is set (catching up first if not yet done)."""
        if not self.caught_up.is_set():
            await self.catch_up(timeout=timeout)
        while not stop.is_set():
            await self.poll(timeout)

    async def close(self) -> None:
        await self._tail.close()
