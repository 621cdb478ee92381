"""Batched direct gets on ``JY_EVENTS``: many messages per request, never one request per event.

nats-py has no helper for the batched forms of ``$JS.API.DIRECT.GET`` (``next_by_subj`` with
``batch``, and ``multi_last``), so this module speaks them: one request, a burst of replies on
one inbox, ended by a ``204 EOB`` status message. One wildcard inbox subscription serves every
request of the process.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

MAX_BATCH = 1024


@dataclass(frozen=True, slots=True)
class RawMessage:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]


class DirectGetError(RuntimeError):
    pass


class DirectReader:
    def __init__(self, nc: Client, stream: str, *, timeout: float = 5.0) -> None:
        self._nc = nc
        self._api = f"$JS.API.DIRECT.GET.{stream}"
        self._timeout = timeout
        self._prefix = nc.new_inbox()
        self._waiting: dict[str, asyncio.Queue[Msg]] = {}
        self._counter = 0
        self._ready: asyncio.Lock = asyncio.Lock()
        self._subscribed = False
        self.requests = 0
        """Requests sent so far: lets tests and benchmarks count round trips."""

    async def _subscribe(self) -> None:
        async with self._ready:
            if not self._subscribed:
                await self._nc.subscribe(f"{self._prefix}.*", cb=self._deliver)
                self._subscribed = True

    async def _deliver(self, msg: Msg) -> None:
        queue = self._waiting.get(msg.subject.rsplit(".", 1)[1])
        if queue is not None:
            queue.put_nowait(msg)

    async def _request(self, body: dict[str, Any]) -> tuple[list[RawMessage], int]:
        """Send one batched request; return its messages and how many more match."""
        if not self._subscribed:
            await self._subscribe()
        self._counter += 1
        token = str(self._counter)
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        self._waiting[token] = queue
        self.requests += 1
        try:
            await self._nc.publish(
                self._api, json.dumps(body).encode(), reply=f"{self._prefix}.{token}"
            )
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
            del self._waiting[token]

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
