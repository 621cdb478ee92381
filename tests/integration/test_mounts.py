"""Folders mounted into sessions on a real nats-server: folders seeded on ``ev.vfolder.*`` as
the storage service writes them, a session created through the scheduler's command consumer
with mounts, its ``SessionRequested`` and every kernel's ``ResourcesAllocated`` carrying them,
a real agent (simulated backend) bind-mounting them from its volume, and a kernel whose
folder's volume the node lacks failing with a reason naming both."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from commands.bus import CommandBus
from commands.repository import load, pending_write
from commands.session import Session
from commands.vfolder import VFolder
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore
from schemas.ids import new_id, node_id_for_host, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from schemas.vfolder import Mount, MountRequest, OwnerKind, Permission, folder_relpath
from services.node.agent import NodeAgent
from services.node.backend_simulated import SimulatedBackend
from services.node.settings import AgentSettings
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    create,
    eventually,
    history,
    now,
    session_in,
    slots,
)
from tests.tenancy_support import UNLIMITED_KEYPAIR, make_tenancy

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
async def agent_on(bus: Bus, image: str, volumes: dict[str, Path]) -> AsyncIterator[NodeAgent]:
    settings = AgentSettings(
        hostname=f"sim-{new_id()}",
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


async def test_a_session_mounts_its_folders_on_every_kernel(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, tmp_path: Path
) -> None:
    owner = (
        await make_tenancy(
            store, limits=UNLIMITED_KEYPAIR.model_copy(update={"max_containers_per_session": 2})
        )
    ).owner
    await start_scheduler()
    data = await folder(store, owner, "data")
    dot = await folder(store, owner, ".cache")
    theirs = await folder(store, owner, "corpus", owner_id="someone-else-01")
    theirs.invite(owner.user_id, Permission.READ_ONLY, now())
    theirs.accept(owner.user_id, now())
    await seed(store, theirs)
    for made in (data, dot, theirs):
        (tmp_path / folder_relpath(made.id)).mkdir(parents=True)

    async with agent_on(bus, image, {"local": tmp_path}) as agent:
        # Sent right after the folders were stored: the scheduler may not have folded them.
        cmd = create(
            image, slots(cpu=1, mem=1), owner, kernels=2,
            mounts=(MountRequest(folder="data", path="/data"), MountRequest(folder="corpus")),
        )  # fmt: skip
        outcome = await CommandBus(bus).execute(cmd, timeout=5)
        assert outcome is not None and outcome.accepted, outcome
        session_id = session_id_for(cmd.command_id)
        want = [
            Mount(folder_id=data.id, name="data", volume="local", path="/data", read_only=False),
            Mount(folder_id=theirs.id, name="corpus", volume="local", path="/home/work/corpus",
                  read_only=True),
            Mount(folder_id=dot.id, name=".cache", volume="local", path="/home/work/.cache",
                  read_only=False),
        ]  # fmt: skip

        session = await session_in(store, session_id, SessionStatus.RUNNING)

        (requested,) = [
            e for e in await history(store, AggregateType.SESSION, session_id)
            if e.name == "SessionRequested"
        ]  # fmt: skip
        assert [Mount.model_validate(m) for m in requested.envelope.payload["mounts"]] == want
        assert list(session.mounts) == want
        ledger = await history(store, AggregateType.NODE, agent.node_id)
        allocated = [e.envelope.payload for e in ledger if e.name == "ResourcesAllocated"]
        assert sorted(a["kernel_id"] for a in allocated) == sorted(session.kernel_ids)
        for payload in allocated:
            assert [Mount.model_validate(m) for m in payload["mounts"]] == want
        backend = agent._backend
        assert isinstance(backend, SimulatedBackend)
        for kernel_id in session.kernel_ids:
            launch = backend.launch_of(kernel_id)
            assert launch is not None
            assert [
                (b["Source"], b["Target"], b["ReadOnly"])
                for b in launch.config["HostConfig"]["Mounts"]
            ] == [(str(tmp_path / folder_relpath(m.folder_id)), m.path, m.read_only) for m in want]


async def test_a_create_naming_a_folder_it_cannot_mount_is_refused(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    owner = (await make_tenancy(store)).owner
    await start_scheduler()
    await FakeAgent(store, slots(cpu=8, mem=32), (image,)).register()
    await folder(store, owner, "private", owner_id="someone-else-02")
    trashed = await folder(store, owner, "old")
    trashed.trash("tidy up", now())
    await seed(store, trashed)
    commands = CommandBus(bus)

    for ref, code, message in (
        ("private", "not-found", "there is no folder private"),
        ("old", "conflict", "folder old is trashed: only a ready folder is mounted"),
    ):
        cmd = create(image, slots(), owner, mounts=(MountRequest(folder=ref),))
        outcome = await commands.execute(cmd, timeout=5)
        assert outcome is not None and not outcome.accepted
        assert (outcome.code, outcome.message) == (code, message)
        assert await history(store, AggregateType.SESSION, session_id_for(cmd.command_id)) == []


async def test_a_folder_on_a_volume_the_node_lacks_fails_the_session(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, tmp_path: Path
) -> None:
    owner = (await make_tenancy(store)).owner
    await start_scheduler()
    await folder(store, owner, "remote", volume="nfs")

    async with agent_on(bus, image, {"local": tmp_path}):
        cmd = create(image, slots(), owner, mounts=(MountRequest(folder="remote"),))
        outcome = await CommandBus(bus).execute(cmd, timeout=5)
        assert outcome is not None and outcome.accepted, outcome

        failed: Session = await session_in(
            store, session_id_for(cmd.command_id), SessionStatus.ERROR
        )

    assert failed.reason == (
        "kernel failed to start: folder remote is on volume nfs, which this node does not "
        "have (its volumes: local; JETYARD_AGENT_VOLUMES)"
    )
