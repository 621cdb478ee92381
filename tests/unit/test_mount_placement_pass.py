"""A decision pass (in memory) places a session with folders only on a node whose agent
registered their volumes; it waits with the volume named while none has it, and is placed once
an agent registers again with it (a registration wakes a pass)."""

from __future__ import annotations

from commands.folders.aggregate import VFolder
from events.domain.node import ResourcesAllocated
from events.domain.session import SessionScheduled
from schemas.ids import new_id, node_id_for_host
from schemas.tenancy import KeypairPolicyLimits
from schemas.vfolder import MountRequest, OwnerKind
from tests.unit.pass_support import ADMIN, World, slots


async def given(world: World, *, volume: str) -> None:
    """A tenancy, a folder ``data`` on ``volume``, and two nodes: gpu-1 has no volume and is
    what the default group's selection (concentrated: the least free) picks first; gpu-2,
    larger, has ``local``."""
    owner = await world.tenancy(KeypairPolicyLimits(max_containers_per_session=2))
    made = VFolder.create(
        new_id(), "data", OwnerKind.USER, owner.user_id, owner.domain, volume, world.clock()
    )
    await world.record(ADMIN, made)
    await world.register("gpu-1", slots(cpu=8, mem=32))
    await world.register("gpu-2", slots(cpu=64, mem=256), volumes=("local",))


async def test_a_session_with_folders_goes_to_the_node_with_their_volume() -> None:
    world = World()
    await given(world, volume="local")
    with_folder = await world.create(slots(cpu=1), mounts=(MountRequest(folder="data"),))
    without = await world.create(slots(cpu=1))

    await world.decide()

    scheduled = dict(world.stored(SessionScheduled))
    assert set(scheduled[with_folder].placements.values()) == {node_id_for_host("gpu-2")}
    assert set(scheduled[without].placements.values()) == {node_id_for_host("gpu-1")}
    allocated = {e.session_id: node for node, e in world.stored(ResourcesAllocated)}
    assert allocated[with_folder] == node_id_for_host("gpu-2")


async def test_it_waits_naming_the_volume_until_a_node_registers_it() -> None:
    world = World()
    await given(world, volume="nfs")
    session_id = await world.create(slots(cpu=1), mounts=(MountRequest(folder="data"),))

    await world.decide()

    assert not world.stored(SessionScheduled)
    session = world.state.sessions[session_id].session
    assert session.reason == (
        "no available node in group default has volume nfs (the session mounts a folder on it)"
    )

    mark = world.last_seq()
    await world.register("gpu-1", slots(cpu=8, mem=32), volumes=("local", "nfs"))
    await world.decide()

    ((placed, scheduled),) = world.stored(SessionScheduled, after=mark)
    assert placed == session_id
    assert set(scheduled.placements.values()) == {node_id_for_host("gpu-1")}
    assert world.folded_again().agents[node_id_for_host("gpu-1")].volumes == {"local", "nfs"}
