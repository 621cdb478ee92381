"""Folders mounted into sessions on a real nats-server: folders seeded on ``ev.vfolder.*`` as
the storage service writes them, a session created through the scheduler's command consumer
with mounts, its ``SessionRequested`` and every kernel's ``ResourcesAllocated`` carrying them,
a real agent (simulated backend) bind-mounting them from its volume, and a kernel whose
folder's volume the node lacks failing there with a reason naming both (placement sends no
session there: ``test_mount_placement.py``)."""

from __future__ import annotations

from pathlib import Path

from commands.bus import CommandBus
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id, session_id_for
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
from schemas.vfolder import Mount, MountRequest, Permission, folder_relpath
from services.node.backend_simulated import SimulatedBackend
from tests.integration.mount_support import agent_on, folder, seed
from tests.integration.node_support import change_ledger, facts
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
from tests.support import NOW
from tests.tenancy_support import UNLIMITED_KEYPAIR, make_tenancy


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


async def test_a_folder_on_a_volume_the_node_lacks_fails_the_kernel(
    bus: Bus, store: EventStore, image: str, tmp_path: Path
) -> None:
    # Placement sends no session there (test_mount_placement.py); the agent checks anyway, so
    # an allocation written by hand (or a volume taken away since) fails with a reason.
    kernel_id, remote = new_id(), Mount(
        folder_id=new_id(), name="remote", volume="nfs", path="/home/work/remote",
        read_only=False,
    )  # fmt: skip

    async with agent_on(bus, image, {"local": tmp_path}) as agent:
        await change_ledger(
            store, agent.node_id,
            lambda node: node.allocate(
                kernel_id, f"session-{kernel_id}", slots(cpu=1, mem=1), NOW, image=image,
                command=("sleep", "60"), mounts=(remote,),
            ),
        )  # fmt: skip

        async def failure() -> str | None:
            for name, payload in await facts(store, agent.node_id):
                if name == "KernelFailedToStart" and payload["kernel_id"] == kernel_id:
                    return str(payload["reason"])
            return None

        reason = await eventually(failure)

    assert reason == (
        "folder remote is on volume nfs, which this node does not have (its volumes: local; "
        "JETYARD_AGENT_VOLUMES)"
    )
