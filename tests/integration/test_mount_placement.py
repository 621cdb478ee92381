"""Volume-aware placement on a real nats-server: two real agents (simulated backend) of the
same size register, only one with the volume a session's folder lies on; the scheduler (its
command consumer and decision passes) places the session there and the agent mounts the
folder. A session whose volume no node has waits, its reason naming the volume, until an agent
with that volume registers."""

from __future__ import annotations

from pathlib import Path

from commands.bus import CommandBus
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id, node_id_for_host, session_id_for
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
from schemas.vfolder import MountRequest, folder_relpath
from services.node.backend_simulated import SimulatedBackend
from tests.integration.mount_support import agent_on, folder
from tests.integration.scheduler_support import (
    StartScheduler,
    create,
    history,
    reason_of,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy


def two_hosts() -> tuple[str, str]:
    """Two host names whose node ids sort in this order: with the same free capacity every
    selection policy (concentrated, dispersed, round-robin from a fresh scheduler) takes the
    first, so a placement on the second is the volume's doing, not chance."""
    first, second = f"sim-{new_id()}", f"sim-{new_id()}"
    if node_id_for_host(first) > node_id_for_host(second):
        first, second = second, first
    return first, second


async def registered_volumes(store: EventStore, node_id: str) -> list[list[str]]:
    return [
        e.envelope.payload.get("volumes", [])
        for e in await history(store, AggregateType.AGENT, node_id)
        if e.name == "AgentRegistered"
    ]


async def test_a_session_lands_on_the_one_node_with_its_folders_volume(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, tmp_path: Path
) -> None:
    owner = (await make_tenancy(store)).owner
    await start_scheduler()
    volume = f"vol-{new_id()[:8]}"  # no other test's node has it
    data = await folder(store, owner, "data", volume=volume)
    (tmp_path / folder_relpath(data.id)).mkdir(parents=True)
    without_host, with_host = two_hosts()

    async with (
        agent_on(bus, image, {}, hostname=without_host) as without,
        agent_on(bus, image, {volume: tmp_path}, hostname=with_host) as with_volume,
    ):
        assert await registered_volumes(store, without.node_id) == [[]]
        assert await registered_volumes(store, with_volume.node_id) == [[volume]]
        cmd = create(image, slots(cpu=1, mem=1), owner, mounts=(MountRequest(folder="data"),))
        outcome = await CommandBus(bus).execute(cmd, timeout=5)
        assert outcome is not None and outcome.accepted, outcome
        session_id = session_id_for(cmd.command_id)

        session = await session_in(store, session_id, SessionStatus.RUNNING)

        assert set(session.placements.values()) == {with_volume.node_id}
        backend = with_volume._backend
        assert isinstance(backend, SimulatedBackend)
        launch = backend.launch_of(session.main_kernel)
        assert launch is not None
        assert [b["Source"] for b in launch.config["HostConfig"]["Mounts"]] == [
            str(tmp_path / folder_relpath(data.id))
        ]
        ledger = await history(store, AggregateType.NODE, without.node_id)
        assert not [e for e in ledger if e.name == "ResourcesAllocated"]


async def test_a_session_waits_for_a_node_with_its_volume(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, tmp_path: Path
) -> None:
    owner = (await make_tenancy(store)).owner
    await start_scheduler()
    volume = f"vol-{new_id()[:8]}"
    data = await folder(store, owner, "data", volume=volume)
    (tmp_path / folder_relpath(data.id)).mkdir(parents=True)

    async with agent_on(bus, image, {"local": tmp_path}):
        cmd = create(image, slots(cpu=1, mem=1), owner, mounts=(MountRequest(folder="data"),))
        outcome = await CommandBus(bus).execute(cmd, timeout=5)
        assert outcome is not None and outcome.accepted, outcome
        session_id = session_id_for(cmd.command_id)

        reason = await reason_of(store, session_id, volume)

        assert reason == (
            f"no available node in group default has volume {volume} "
            "(the session mounts a folder on it)"
        )

        async with agent_on(bus, image, {volume: tmp_path}) as arrived:
            session = await session_in(store, session_id, SessionStatus.RUNNING)

    assert set(session.placements.values()) == {arrived.node_id}
