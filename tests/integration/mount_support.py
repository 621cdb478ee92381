"""Helpers for the tests of folders mounted into sessions on a real nats-server: folders
seeded on ``ev.vfolder.*`` as the storage service writes them, and a real agent (simulated
backend) with the volumes it is given."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from commands.folders.aggregate import VFolder
from commands.repository import load, pending_write
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore
from schemas.ids import new_id, node_id_for_host
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.tenancy import SessionOwner
from schemas.vfolder import OwnerKind
from services.node.agent import NodeAgent
from services.node.backend_simulated import SimulatedBackend
from services.node.settings import AgentSettings
from tests.integration.scheduler_support import eventually, now

STORAGE = Actor.service("storage")


async def seed(store: EventStore, folder: VFolder) -> None:
    """Store what the folder decided, as the storage service would."""
    cause = Cause(
        causation_id=new_id(), correlation_id=new_id(), actor=STORAGE, tenant=SYSTEM_TENANT
    )
    last = (await load(store, VFolder, folder.id)).last_seq
    write = pending_write((folder, last), cause)
    assert write is not None
    await store.append(write)


async def folder(
    store: EventStore, owner: SessionOwner, name: str, *, volume: str = "local", **kw: str
) -> VFolder:
    made = VFolder.create(
        new_id(), name, OwnerKind(kw.get("kind", "user")), kw.get("owner_id", owner.user_id),
        owner.domain, volume, now(),
    )  # fmt: skip
    await seed(store, made)
    return made


@asynccontextmanager
async def agent_on(
    bus: Bus, image: str, volumes: dict[str, Path], *, hostname: str | None = None
) -> AsyncIterator[NodeAgent]:
    """A running agent (simulated backend) with these volume roots, registered."""
    settings = AgentSettings(
        hostname=hostname or f"sim-{new_id()}",
        backend="simulated",
        simulated_images=(image,),
        volumes=volumes,
        cpu=8,
        memory_bytes=32 << 30,
    )
    backend = SimulatedBackend(node_id_for_host(settings.hostname), [image])
    agent = NodeAgent(bus, settings, backend)
    stopping = asyncio.Event()
    task = asyncio.create_task(agent.run(stopping))

    async def registered() -> int:
        if task.done():
            task.result()
        return agent.record.epoch

    await eventually(registered)
    try:
        yield agent
    finally:
        stopping.set()
        await task
