"""Node loss in the decision pass, in memory: a lost node's sessions end ``node-lost`` with what
was last known of each kernel, and the kernels they had on other nodes are asked to stop."""

from __future__ import annotations

from commands.messages import CreateSession
from commands.node.aggregate import Node
from commands.outcome import Accepted
from events.domain.node import KernelStopRequested, NodeLost
from schemas.ids import session_id_for
from schemas.principal import SYSTEM_TENANT
from schemas.session import ClusterMode, KernelSpec, SessionSpec, SessionStatus
from schemas.tenancy import KeypairPolicyLimits
from tests.unit.pass_support import ADMIN, IMAGE, World, rival, slots
from tests.unit.scenario import T0


async def test_a_multi_node_session_ends_and_its_kernels_elsewhere_are_stopped() -> None:
    world = World()
    await world.tenancy(KeypairPolicyLimits(max_containers_per_session=2))
    first = await world.register("gpu-1", slots(cpu=2, mem=4, gpu=0))
    second = await world.register("gpu-2", slots(cpu=2, mem=4, gpu=0))
    spec = SessionSpec(
        image=IMAGE,
        kernels=(KernelSpec(resources=slots(cpu=2, mem=1)),) * 2,
        cluster_mode=ClusterMode.MULTI_NODE,
    )
    cmd = CreateSession(actor=ADMIN, tenant=SYSTEM_TENANT, spec=spec, owner=world.owner)
    (decision,) = await world.commands.create_sessions([cmd], world.ctx)
    assert isinstance(decision, Accepted), decision
    session_id = session_id_for(cmd.command_id)
    await world.decide()
    session = world.state.sessions[session_id].session
    assert set(session.placements.values()) == {first, second}
    main, sub = session.kernel_ids
    on_first = main if session.placements[main] == first else sub
    agent = world.agents[first]
    agent.kernel_started(on_first, session_id, "jy-x", world.clock())
    await world.record(ADMIN, agent)
    await world.decide()
    mark = world.last_seq()

    world.state.gone[first] = None  # its heartbeat expired
    await world.decide()

    assert [n for n, _ in world.stored(NodeLost, after=mark)] == [first]
    ended = world.state.sessions[session_id].session
    assert ended.status is SessionStatus.TERMINATED
    assert ended.reason.startswith("node-lost: node gpu-1 stopped answering")
    host = "main1" if on_first == main else "sub1"
    assert f"{host} running" in ended.reason  # what was last known of each kernel
    ((node_id, stop),) = world.stored(KernelStopRequested, after=mark)
    assert node_id == second and stop.kernel_id != on_first
    assert world.state.nodes[first].allocations == {}


async def test_a_ledger_holding_a_session_never_placed_does_not_stop_the_loss() -> None:
    # Another writer's allocation on the node for a session the log never scheduled (still
    # PENDING): a history the scheduler does not write, and one it must get past.
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    placed = await world.create(slots(gpu=1))
    waiting = await world.create(slots(gpu=1))
    await world.decide()
    kernel = world.state.sessions[waiting].session.main_kernel
    await rival(
        world.store, Node, node_id,
        lambda node: node.allocate(kernel, waiting, slots(cpu=1, mem=1), T0),
    )  # fmt: skip
    await world.sync()
    mark = world.last_seq()

    world.state.gone[node_id] = None  # its heartbeat expired
    await world.decide()

    assert [n for n, _ in world.stored(NodeLost, after=mark)] == [node_id]
    assert world.state.sessions[placed].session.status is SessionStatus.TERMINATED
    assert world.state.sessions[waiting].session.status is SessionStatus.PENDING
    assert world.state.nodes[node_id].allocations == {}
