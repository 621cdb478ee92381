"""A decision pass (in memory) gives a cluster session spread over nodes its overlay network
with every allocation: the same for all its kernels, in the lowest slot no live session holds,
with every node's registered address; a cluster session on one node and a single kernel get
none, and a slot is free again once its session's allocations are released."""

from __future__ import annotations

from commands.agent import Agent
from commands.messages import CreateSession
from commands.outcome import Accepted
from events.domain.node import ResourcesAllocated
from schemas.ids import node_id_for_host, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode, KernelSpec, SessionSpec
from schemas.tenancy import KeypairPolicyLimits
from services.scheduler.rules.cluster_network import VNI_BASE
from tests.unit.pass_support import ADMIN, IMAGE, World, slots

NODES = {"gpu-a": "192.0.2.1", "gpu-b": "192.0.2.2"}
BIG = slots(cpu=3)
"""One such kernel fits a node of 4 CPUs: a session of two is spread."""


async def given(nodes: dict[str, str] = NODES) -> World:
    world = World()
    await world.tenancy(KeypairPolicyLimits(max_containers_per_session=4))
    for host, address in nodes.items():
        agent = world.agents[node_id_for_host(host)] = Agent.register(
            node_id_for_host(host), epoch=1, hostname=host, backend="simulated",
            capacity=slots(cpu=4, mem=32), images=(IMAGE,), address=address, now=world.clock(),
        )  # fmt: skip
        await world.record(Actor.service(f"agent-{host}"), agent)
    return world


async def cluster(world: World, need: ResourceSlots, kernels: int = 2) -> str:
    spec = SessionSpec(
        image=IMAGE,
        kernels=tuple(KernelSpec(resources=need) for _ in range(kernels)),
        cluster_mode=ClusterMode.MULTI_NODE,
    )
    cmd = CreateSession(actor=ADMIN, tenant=SYSTEM_TENANT, spec=spec, owner=world.owner)
    (decision,) = await world.commands.create_sessions([cmd], world.ctx)
    assert isinstance(decision, Accepted), decision
    return session_id_for(cmd.command_id)


def allocations(world: World, session_id: str) -> list[tuple[str, ResourcesAllocated]]:
    return [(n, e) for n, e in world.stored(ResourcesAllocated) if e.session_id == session_id]


async def test_a_session_spread_over_nodes_gets_one_overlay_for_all_its_kernels() -> None:
    world = await given()
    session_id = await cluster(world, BIG)

    await world.decide()

    placed = allocations(world, session_id)
    assert {node for node, _ in placed} == {node_id_for_host(h) for h in NODES}
    networks = {e.cluster for _, e in placed}
    assert len(networks) == 1
    (network,) = networks
    assert network is not None
    assert (network.vni, network.subnet) == (VNI_BASE, "10.64.0.0/24")
    by_name = {p.hostname: p for p in network.peers}
    for node, event in placed:
        me = by_name[event.hostname]
        assert me.node_id == node
        assert me.node_address == NODES[world.state.agents[node].hostname]
        assert event.env["RANK"] == str(me.rank)
        assert event.env["LOCAL_RANK"] == "0"
    assert [p.rank for p in network.peers] == [0, 1]
    assert by_name["main1"].rank == 0


async def test_two_live_sessions_get_two_slots_and_a_released_one_is_taken_again() -> None:
    world = await given({f"gpu-{i}": f"192.0.2.{i}" for i in range(1, 5)})
    first = await cluster(world, BIG)
    second = await cluster(world, BIG)
    await world.decide()

    slots_of = {
        s: {e.cluster.vni - VNI_BASE for _, e in allocations(world, s) if e.cluster}
        for s in (first, second)
    }
    assert sorted(slots_of.values(), key=min) == [{0}, {1}]

    # The first session's kernels end: its allocations are released, its slot is free.
    ended = first if slots_of[first] == {0} else second
    session = world.state.sessions[ended].session
    for kernel_id in session.kernel_ids:
        agent = world.agents[session.placements[kernel_id]]
        agent.kernel_started(kernel_id, ended, f"jy-{kernel_id}", world.clock())
        agent.kernel_exited(kernel_id, 0, "exited", world.clock())
        await world.record(Actor.service("agent"), agent)
    await world.decide()
    third = await cluster(world, BIG)
    await world.decide()

    assert {e.cluster.vni - VNI_BASE for _, e in allocations(world, third) if e.cluster} == {0}


async def test_a_cluster_on_one_node_and_a_single_kernel_get_no_overlay() -> None:
    world = await given()
    together = await cluster(world, slots(cpu=1))  # both fit one node: concentrated
    single = await cluster(world, slots(cpu=1), kernels=1)

    await world.decide()

    placed = allocations(world, together)
    assert len({node for node, _ in placed}) == 1
    assert all(e.cluster is None for _, e in placed)
    assert [e.env.get("LOCAL_RANK") for _, e in placed] == ["0", "1"]
    assert all(e.cluster is None for _, e in allocations(world, single))
