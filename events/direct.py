"""Batched direct gets on ``JY_EVENTS``: many messages per request, never one request per event.

nats-py has no helper for the batched forms of ``$JS.API.DIRECT.GET`` (``next_by_subj`` with
``batch``, and ``multi_last``), so this module speaks them: one request, a burst of replies on
one inbox, ended by a ``204 EOB`` status message. One wildcard inbox subscription per
connection (``Replies``, held by ``Bus``) serves every request sent on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

MAX_BATCH = 1024


@dataclass(frozen=True, slots=True)
class RawMessage:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]


class DirectGetError(RuntimeError):
    pass


class Replies:
    """Replies to what one connection sends, on one wildcard inbox subscription (made by
    ``connect``, ended with the connection), each handed by the last token of its subject to
    whoever waits for it. Readers and stores are cheap handles made and dropped at will (one per
    request, some of them): a subscription each would pile up on a connection that outlives
    them, with a task each."""

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self._prefix = nc.new_inbox()
        self._routes: dict[str, Callable[[Msg], None]] = {}
        self._tokens = itertools.count(1)
        self._ready = asyncio.Lock()
        self._sub: Subscription | None = None

    async def open(self) -> None:
        """Subscribe, if not yet done (``connect`` does it, for the connection's lifetime)."""
        async with self._ready:
            if self._sub is None:
                self._sub = await self.nc.subscribe(f"{self._prefix}.*", cb=self._deliver)

    async def close(self) -> None:
        """Unsubscribe: for a ``Bus`` made by hand on a connection that outlives it."""
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()

    async def route(self, deliver: Callable[[Msg], None]) -> str:
        """A reply subject whose replies go to ``deliver`` until it is dropped."""
        if self._sub is None:
            await self.open()
        token = str(next(self._tokens))
        self._routes[token] = deliver
        return f"{self._prefix}.{token}"

    def drop(self, subject: str) -> None:
        self._routes.pop(subject.rsplit(".", 1)[1], None)

    async def _deliver(self, msg: Msg) -> None:
        deliver = self._routes.get(msg.subject.rsplit(".", 1)[1])
        if deliver is not None:
            deliver(msg)


class DirectReader:
    def __init__(self, replies: Replies, stream: str, *, timeout: float = 5.0) -> None:
        self._replies = replies
        self._nc = replies.nc
        self._api = f"$JS.API.DIRECT.GET.{stream}"
        self._timeout = timeout
        self.requests = 0
        """Requests sent so far: lets tests and benchmarks count round trips."""

    async def _request(self, body: dict[str, Any]) -> tuple[list[RawMessage], int]:
        """Send one batched request; return its messages and how many more match."""
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        reply = await self._replies.route(queue.put_nowait)
        self.requests += 1
        try:
            await self._nc.publish(self._api, json.dumps(body).encode(), reply=reply)
            messages: list[RawMessage] = []
            while True:
                msg = await asyncio.wait_for(queue.get(), self._timeout)
                headers = msg.headers or {}
                status = headers.get("Status")
                if status == "204":
                    return messages, int(headers.get("Nats-Num-Pending", "0"))
                if status == "404":
                    return messages, 0
                if status is not None:
                    raise DirectGetError(f"direct get failed: {status} {headers}")
                messages.append(
                    RawMessage(
                        seq=int(headers["Nats-Sequence"]),
                        subject=headers["Nats-Subject"],
                        data=msg.data,
                        headers=headers,
                    )
                )
        finally:
            self._replies.drop(reply)

    async def read_subject(
        self, subject: str, *, from_seq: int = 1, limit: int | None = None, batch: int = 256
    ) -> list[RawMessage]:
        """Every message on ``subject`` from ``from_seq`` on (at most ``limit``), in order."""
        out: list[RawMessage] = []
        start = max(from_seq, 1)
        while True:
            want = (
                min(batch, MAX_BATCH) if limit is None else min(batch, MAX_BATCH, limit - len(out))
            )
            if want <= 0:
                return out
            messages, pending = await self._request(
                {"seq": start, "next_by_subj": subject, "batch": want}
            )
            out.extend(messages)
            if pending == 0 or not messages:
                return out
            start = messages[-1].seq + 1

    async def last_of(self, subjects: list[str]) -> dict[str, RawMessage]:
        """The last message of each subject that has one (absent subjects are left out)."""
        found: dict[str, RawMessage] = {}
        for i in range(0, len(subjects), MAX_BATCH):
            chunk = subjects[i : i + MAX_BATCH]
            messages, _ = await self._request({"multi_last": chunk, "batch": len(chunk)})
            for message in messages:
                found[message.subject] = message
        return found

    async def seq_before(self, at: datetime, subject: str) -> int | None:
        """The position just before the first message on ``subject`` (wildcards too) stored
        at or after ``at``; None when none was (every one lies before ``at``: the caller's
        answer is the log's end, which the event store says)."""
        messages, _ = await self._request(
            {"start_time": at.isoformat(), "next_by_subj": subject, "batch": 1}
        )
        return messages[0].seq - 1 if messages else None
