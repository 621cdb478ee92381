"""Read ``JY_EVENTS`` (or another stream, e.g. ``JY_OUTPUT``) in order from a sequence, in
batches: the ordered-consumer reader.

Reads ``ev.>`` (or narrower filters) through an ephemeral pull consumer with no acks, fetched
up to 256 messages at a time (pull requests sent by hand: ``Tail._ask``). It is "ordered" the
way nats' ordered consumers are: it tracks the consumer sequence, and if a message is skipped
or the consumer vanishes (server restart, inactivity) it recreates the consumer from the last
delivered stream sequence + 1.
Live feeds must use this, never a core subscription to ``ev.>`` (which also sees refused writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import api

from events.bus import Bus
from events.direct import RawMessage
from events.envelope import StoredEvent
from events.store import decode
from schemas.subjects import EVENT_NAME_HEADER, EVENTS_STREAM, events_of

log = logging.getLogger(__name__)

PULL_PREFIX = "$JS.API.CONSUMER.MSG.NEXT"
LONG_POLL_S = 30.0
"""How long a pull request stays open at least, whatever one fetch waits: what it delivers
after a fetch gave up waiting lands in the inbox for the next one. (A request per fetch timeout
made a thousand idle agents, polling every 5 s, send 200 requests a second and get as many
timeout statuses back.) A request survives a reconnect to a server that kept its consumer (the
reply subject's interest comes back); a server that stops ends it with a status. Should one
still be dropped unheard, the first read after a reconnect asks again rather than wait out the
long poll (the client's reconnect count tells)."""
PULL_MARGIN_S = 0.05
"""How much later than the server this reader counts a pull request as expired: the server's
"request timeout" status ends a request (and a new one is sent after it, so that status is
never taken for the new one's); past the margin, a request whose end was never heard of (a
reconnect lost it) is replaced all the same."""


class Tail:
    def __init__(
        self,
        bus: Bus,
        *,
        from_seq: int = 1,
        subjects: list[str] | None = None,
        batch: int = 256,
        names: frozenset[str] | None = None,
        stream: str = EVENTS_STREAM,
    ) -> None:
        self._bus = bus
        self._stream = stream
        self._subjects = subjects or [events_of()]
        self._batch = batch
        self._names = names
        self.position = max(from_seq, 1) - 1
        """The last stream sequence delivered (or skipped by the name filter)."""
        self.pending = -1
        """Messages the consumer still had after the last delivered one, or when it was opened
        (-1: not known yet)."""
        self._sub: Subscription | None = None
        self._consumer: str | None = None
        self._consumer_seq = 0
        self._inbox: deque[Msg] = deque()
        """What the consumer delivered that ``fetch_raw`` has not taken yet (a new one for each
        consumer opened: a late delivery to an old one lands nowhere it is read)."""
        self._arrived = asyncio.Event()
        self._owed = 0
        """Messages the pull request in flight may still deliver (0: none in flight)."""
        self._owed_until = 0.0
        """When (monotonic) this reader counts the request in flight as expired."""
        self._asked_at_reconnects = 0
        """The connection's reconnect count when the request in flight was sent."""

    async def _open(self) -> Subscription:
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.position + 1,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=60.0,
            mem_storage=True,
            num_replicas=1,
            filter_subjects=self._subjects if len(self._subjects) > 1 else None,
            filter_subject=self._subjects[0] if len(self._subjects) == 1 else None,
        )
        self._consumer_seq = 0
        self._owed = 0
        subject = self._bus.nc.new_inbox()
        self._consumer = config.name = subject.rsplit(".", 1)[1]
        info = await self._bus.js.add_consumer(self._stream, config)
        self.pending = int(info.num_pending or 0)
        # A core subscription of its own, its pull requests sent by hand (``_ask``): nats-py's
        # ``fetch`` keeps waiting for a full batch after the first message of a long poll
        # arrives, which held a lone event back for up to the poll's whole timeout.
        inbox: deque[Msg] = deque()
        arrived = self._arrived

        async def deliver(msg: Msg) -> None:
            inbox.append(msg)
            arrived.set()

        self._inbox = inbox
        self._sub = await self._bus.nc.subscribe(subject, cb=deliver)
        return self._sub

    async def _reset(self, why: str) -> None:
        log.info("tail restarts at %d: %s", self.position + 1, why)
        await self.close()

    async def _ask(self, sub: Subscription, timeout: float) -> None:
        """A pull request for the next batch, long-polling ``LONG_POLL_S`` (or ``timeout`` if
        longer), unless one is in flight: what it delivers lands in the inbox whenever it comes,
        in order."""
        now, reconnects = time.monotonic(), self._bus.nc.stats["reconnects"]
        if self._owed > 0 and now < self._owed_until and reconnects == self._asked_at_reconnects:
            return
        expires = max(timeout, LONG_POLL_S)
        request = {"batch": self._batch, "expires": int(expires * 1e9)}
        await self._bus.nc.publish(
            f"{PULL_PREFIX}.{self._stream}.{self._consumer}",
            json.dumps(request).encode(),
            reply=sub.subject,
        )
        self._owed, self._owed_until = self._batch, now + expires + PULL_MARGIN_S
        self._asked_at_reconnects = reconnects

    def _drain(self) -> tuple[list[Msg], str]:
        """The messages in the inbox, and what ended the consumer if something did."""
        got: list[Msg] = []
        inbox = self._inbox
        while inbox:
            msg = inbox.popleft()
            status = (msg.headers or {}).get(api.Header.STATUS)
            if not status:
                self._owed -= 1
                got.append(msg)
            elif status in (api.StatusCode.REQUEST_TIMEOUT, api.StatusCode.NO_MESSAGES):
                self._owed = 0  # that request is over
            elif status != api.StatusCode.CONTROL_MESSAGE:
                # The consumer is gone (no responders), moved or refuses: open a new one.
                return got, f"the consumer answered {status} {msg.headers}"
        return got, ""

    async def fetch_raw(self, timeout: float = 1.0) -> list[RawMessage]:
        """The next batch in stream order, undecoded; [] if none arrived within ``timeout``.
        Returns as soon as something arrived, with whatever else had arrived by then."""
        sub = self._sub or await self._open()
        deadline = time.monotonic() + timeout
        while True:
            got, trouble = self._drain()
            if got or trouble:
                out = await self._take(got)
                if trouble and self._sub is sub:
                    await self._reset(trouble)
                return out
            now = time.monotonic()
            if now >= deadline:
                return []
            await self._ask(sub, deadline - now)
            if not self._inbox:
                self._arrived.clear()
                wait = min(deadline, self._owed_until) - time.monotonic()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), max(wait, 0.0))
                if not self._inbox and time.monotonic() >= self._owed_until:
                    self._owed = 0  # never heard of again (a reconnect lost it): ask anew

    async def _take(self, msgs: list[Msg]) -> list[RawMessage]:
        out: list[RawMessage] = []
        for msg in msgs:
            stream_seq, consumer_seq, pending = positions(msg.reply)
            if consumer_seq != self._consumer_seq + 1:
                await self._reset(f"gap after consumer seq {self._consumer_seq}")
                break
            self._consumer_seq = consumer_seq
            self.position = stream_seq
            self.pending = pending
            if self._names is not None and _name(msg) not in self._names:
                continue
            out.append(_raw(msg, stream_seq))
        return out

    async def fetch(self, timeout: float = 1.0) -> list[StoredEvent]:
        """The next batch in stream order, decoded and upcast; [] if none within ``timeout``."""
        return [decode(m) for m in await self.fetch_raw(timeout)]

    async def fetch_readable(self, timeout: float = 1.0) -> list[StoredEvent]:
        """``fetch`` for live feeds: an event that cannot be decoded (malformed, misfiled) is
        logged and left out instead of ending the feed; the consumers that fold it quarantine
        it (``events/quarantine.py``), a feed has nothing to hold."""
        out = []
        for message in await self.fetch_raw(timeout):
            try:
                out.append(decode(message))
            except ValueError as exc:  # pydantic's ValidationError and MisfiledEventError too
                log.warning("live feed skips seq %d on %s: %s", message.seq, message.subject, exc)
        return out

    async def num_pending(self) -> int:
        """How many matching messages lie beyond the position right now."""
        if self._sub is None:
            await self._open()
            return self.pending  # the server's count as it made the consumer: no second ask
        # Messages delivered but not taken yet are no longer pending for the server.
        assert self._consumer is not None
        info = await self._bus.js.consumer_info(self._stream, self._consumer)
        return int(info.num_pending or 0) + len(self._inbox)

    async def close(self) -> None:
        sub, self._sub = self._sub, None
        consumer, self._consumer = self._consumer, None
        self._inbox, self._owed = deque(), 0
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
        if consumer is not None and not self._bus.nc.is_closed:
            # Ephemeral consumers also expire on their own (inactive_threshold); deleting
            # them now keeps the server's consumer count flat when readers come and go.
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await self._bus.js.delete_consumer(self._stream, consumer)


def positions(reply: str) -> tuple[int, int, int]:
    """A delivery's stream sequence, consumer sequence and messages pending, read from its
    reply subject: ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.
    <pending>``, or the same with a domain and an account hash after ``ACK`` (and a token at the
    end). What nats-py's ``Msg.metadata`` reads, without the dates and objects it also makes for
    every message (a tail reads thousands a second, most of them a writer's own echoes)."""
    tokens, at = _ack_tokens(reply)
    return int(tokens[at + 5]), int(tokens[at + 6]), int(tokens[at + 8])


def deliveries(reply: str) -> int:
    """How many times a JetStream delivery has been delivered (1: the first), read from its
    reply subject as ``positions`` reads the rest (a command runner asks it of every
    command)."""
    tokens, at = _ack_tokens(reply)
    return int(tokens[at + 4])


def _ack_tokens(reply: str) -> tuple[list[str], int]:
    """A delivery's reply subject split, and where its stream name sits less two (0, or 2
    after a domain and an account hash); anything else is refused."""
    tokens = reply.split(".")
    if tokens[:2] != ["$JS", "ACK"] or not (len(tokens) == 9 or len(tokens) >= 11):
        raise nats.errors.Error(f"not a JetStream delivery: reply subject {reply!r}")
    return tokens, 0 if len(tokens) == 9 else 2


def _name(msg: Msg) -> str | None:
    return (msg.headers or {}).get(EVENT_NAME_HEADER)


def _raw(msg: Msg, seq: int) -> RawMessage:
    return RawMessage(seq=seq, subject=msg.subject, data=msg.data, headers=msg.headers or {})
