"""Helpers for the live output tests: a session written by hand (as the scheduler would) with
its kernel allocated on a node, its end, and a ``sessionOutput`` subscription over
graphql-transport-ws that collects what it streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import websockets

from commands.repository import load, pending_write
from commands.session.aggregate import Session
from events.envelope import Cause
from events.store import EventStore
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.tenancy import SessionOwner
from tests.integration.gateway_support import Gateway
from tests.integration.node_support import change_ledger
from tests.support import NOW

SLOTS = ResourceSlots.of(cpu="0.5", memory=64 << 20)
OUTPUT = """subscription($id: ID!, $since: Int!) {
    sessionOutput(id: $id, since: $since) { kernelId position lines dropped notice } }"""


def _cause() -> Cause:
    command = new_id()
    return Cause(
        causation_id=command,
        correlation_id=command,
        actor=Actor.service("scheduler"),
        tenant=SYSTEM_TENANT,
    )


async def _write(store: EventStore, session: Session, seq: int) -> None:
    write = pending_write((session, seq), _cause())
    assert write is not None
    await store.append(write)


async def new_session(store: EventStore, owner: SessionOwner | None = None) -> tuple[str, str]:
    """A PENDING session of one kernel: (session id, kernel id)."""
    spec = SessionSpec(image="busybox", kernels=(KernelSpec(resources=SLOTS),))
    session = Session.request(new_id(), spec, NOW, owner=owner)
    await _write(store, session, 0)
    return session.id, session.kernel_ids[0]


async def run_on(
    store: EventStore, session_id: str, node_id: str, image: str, command: tuple[str, ...]
) -> str:
    """Schedule the session's kernel on ``node_id`` and allocate it there; mark it RUNNING."""
    loaded = await load(store, Session, session_id)
    session = loaded.aggregate
    assert session is not None
    kernel = session.kernel_ids[0]
    session.schedule({kernel: node_id}, "placed", NOW)
    session.kernel_started(kernel, NOW)
    await _write(store, session, loaded.last_seq)
    await change_ledger(
        store,
        node_id,
        lambda node: node.allocate(kernel, session_id, SLOTS, NOW, image=image, command=command),
    )
    return kernel


async def end(store: EventStore, session_id: str) -> None:
    loaded = await load(store, Session, session_id)
    session = loaded.aggregate
    assert session is not None
    session.kernel_exited(session.kernel_ids[0], 0, "exited", NOW)
    await _write(store, session, loaded.last_seq)


@dataclass
class Received:
    chunks: list[dict[str, Any]] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    completed: bool = False

    @property
    def lines(self) -> list[str]:
        return [line for chunk in self.chunks for line in chunk["lines"]]


@asynccontextmanager
async def subscribed(
    gateway: Gateway, auth: JetyardAuth, session_id: str, since: int = 0
) -> AsyncIterator[tuple[Received, asyncio.Task[None]]]:
    """A ``sessionOutput`` subscription; the task collects until it completes or fails."""
    url = gateway.url.replace("http", "ws") + "/graphql"
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        init = {"type": "connection_init", "payload": auth.connection_params(gateway.host)}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        payload = {"query": OUTPUT, "variables": {"id": session_id, "since": since}}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        received = Received()

        async def collect() -> None:
            async for raw in ws:
                message = json.loads(raw)
                if message["type"] == "next":
                    if message["payload"].get("errors"):
                        received.errors += message["payload"]["errors"]
                        return
                    received.chunks.append(message["payload"]["data"]["sessionOutput"])
                elif message["type"] == "error":
                    received.errors += message["payload"]
                    return
                elif message["type"] == "complete":
                    received.completed = True
                    return

        task = asyncio.create_task(collect())
        try:
            yield received, task
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
