"""The decision pass, step by step, in memory: node ledgers for agents, admission against the
quota scopes, placement on devices, and kernel facts turned into session transitions."""

from __future__ import annotations

from commands.unit_of_work import working_copy
from events.domain.node import (
    NodeCapacityChanged,
    NodeRegistered,
    ResourcesAllocated,
    ResourcesReleased,
)
from events.domain.quota import QuotaReleased, QuotaReserved
from events.domain.session import (
    SessionAdmitted,
    SessionFailed,
    SessionPendingReasonChanged,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
)
from schemas.devices import DeviceShare
from schemas.session import SessionStatus
from schemas.tenancy import KeypairPolicyLimits, SessionOwner, quota_id_for
from services.scheduler.passes import run_pass
from services.scheduler.steps.place import offer_of
from tests.unit.pass_support import Watched, World, slots


def scopes_of(owner: SessionOwner) -> set[str]:
    return {quota_id_for(kind, scope_id) for kind, scope_id in owner.scopes()}


async def test_an_agent_registering_opens_its_node_ledger() -> None:
    world = World()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))

    assert await world.decide() == 1

    ((ledger, registered),) = world.stored(NodeRegistered)
    assert ledger == node_id
    assert (registered.hostname, registered.resource_group) == ("gpu-1", "default")
    assert registered.capacity == slots(cpu=8, mem=32, gpu=1)
    assert [d.uuid for d in registered.devices] == ["GPU-gpu-1-0"]
    assert world.state.nodes[node_id].capacity == slots(cpu=8, mem=32, gpu=1)


async def test_a_registration_with_other_hardware_changes_the_ledger_capacity() -> None:
    world = World()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    await world.decide()
    await world.register("gpu-1", slots(cpu=16, mem=64, gpu=2))
    mark = world.last_seq()

    await world.decide()

    ((ledger, changed),) = world.stored(NodeCapacityChanged, after=mark)
    assert ledger == node_id and changed.capacity == slots(cpu=16, mem=64, gpu=2)
    assert len(changed.devices) == 2
    assert world.stored(NodeRegistered, after=mark) == []
    assert world.state.nodes[node_id].free == slots(cpu=16, mem=64, gpu=2)


async def test_the_same_registration_again_changes_nothing() -> None:
    world = World()
    await world.register("gpu-1")
    await world.decide()
    await world.register("gpu-1")  # a restarted agent, same hardware
    mark = world.last_seq()

    assert await world.decide() == 0
    assert world.names(after=mark) == []


async def test_a_created_session_is_admitted_and_scheduled_in_one_pass() -> None:
    world = World()
    owner = await world.tenancy()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    await world.decide()
    session_id = await world.create(slots(cpu=2, mem=4, gpu=1))
    mark, commits = world.last_seq(), world.store.commits

    await world.decide()

    # Admitted and placed by one pass: its SessionScheduled, stored in one atomic write with
    # its reservations, admits it (no SessionAdmitted).
    assert world.stored(SessionAdmitted, after=mark) == []
    assert world.store.commits == commits + 1
    assert world.state.sessions[session_id].session.admitted
    reserved = dict(world.stored(QuotaReserved, after=mark))
    assert set(reserved) == scopes_of(owner)
    assert all(e.sessions == {session_id: slots(cpu=2, mem=4, gpu=1)} for e in reserved.values())
    kernel = world.state.sessions[session_id].session.main_kernel
    ((_, scheduled),) = world.stored(SessionScheduled, after=mark)
    assert scheduled.placements == {kernel: node_id}
    ((ledger, allocated),) = world.stored(ResourcesAllocated, after=mark)
    assert (ledger, allocated.kernel_id, allocated.session_id) == (node_id, kernel, session_id)
    assert allocated.devices == (
        DeviceShare(index=0, uuid="GPU-gpu-1-0", hundredths=100, whole=True),
    )
    assert world.state.sessions[session_id].session.status is SessionStatus.SCHEDULED
    assert world.state.nodes[node_id].free == slots(cpu=6, mem=28)


async def test_a_session_that_does_not_fit_waits_with_a_reason() -> None:
    world = World()
    await world.tenancy()
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    first = await world.create(slots(gpu=1))
    second = await world.create(slots(gpu=1))
    mark = world.last_seq()

    await world.decide()

    assert [sid for sid, _ in world.stored(SessionScheduled, after=mark)] == [first]
    ((waiting, noted),) = world.stored(SessionPendingReasonChanged, after=mark)
    assert waiting == second
    assert noted.reason.startswith("no node in group default has 1 free GPU")
    assert world.state.sessions[second].session.status is SessionStatus.PENDING
    assert world.state.queues["default"] == [second]


async def test_a_pass_writes_its_placements_before_what_it_leaves_waiting() -> None:
    # A replay takes a pass's queue from the log's order: the session admitted and placed at
    # once (no SessionAdmitted) must be seen before the pass's pending reasons.
    world = World()
    owner = await world.tenancy()
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    await world.decide()
    first = await world.create(slots(gpu=1))
    second = await world.create(slots(gpu=1))
    mark = world.last_seq()

    await world.decide()

    names = [(e.envelope.name, e.envelope.aggregate_id) for e in world.store.events(after_seq=mark)]
    waiting = names.index(("SessionPendingReasonChanged", second))
    assert names.index(("SessionScheduled", first)) < waiting
    assert names.index(("SessionAdmitted", second)) < waiting
    assert ("SessionAdmitted", first) not in names
    reserved = world.stored(QuotaReserved, after=mark)
    assert {sid for _, e in reserved for sid in e.sessions} == {first, second}
    assert {q for q, _ in reserved} == scopes_of(owner)
    assert world.state.sessions[second].session.admitted
    assert world.state.queues["default"] == [second]


async def test_what_another_replica_places_is_admitted_on_its_own() -> None:
    world = World()
    owner = await world.tenancy()
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    await world.decide()
    session_id = await world.create(slots(gpu=1))
    mark = world.last_seq()

    await run_pass(
        world.state, world.store, world.clock, max_events=1000, attempts=3,
        may_place=lambda group: False,
    )  # fmt: skip

    assert [sid for sid, _ in world.stored(SessionAdmitted, after=mark)] == [session_id]
    assert set(dict(world.stored(QuotaReserved, after=mark))) == scopes_of(owner)
    assert world.stored(SessionScheduled, after=mark) == []
    assert world.state.waiting["default"] == {session_id: None}


async def test_a_session_over_the_keypair_limit_waits_until_a_running_one_ends() -> None:
    world = World()
    owner = await world.tenancy(KeypairPolicyLimits(max_concurrent_sessions=1))
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=2))
    first = await world.create(slots(gpu=1))
    second = await world.create(slots(gpu=1))
    await world.decide()
    assert [sid for sid, _ in world.stored(SessionScheduled)] == [first]
    ((waiting, noted),) = world.stored(SessionPendingReasonChanged)
    assert waiting == second and owner.access_key in noted.reason

    await world.started(first)
    await world.decide()
    assert [sid for sid, _ in world.stored(SessionStarted)] == [first]
    await world.exited(first, 0)
    mark = world.last_seq()
    await world.decide()

    ((ended, terminated),) = world.stored(SessionTerminated, after=mark)
    assert (ended, terminated.exit_code) == (first, 0)
    first_kernel = world.state.sessions[first].session.main_kernel
    assert [(n, e.kernel_id) for n, e in world.stored(ResourcesReleased, after=mark)] == [
        (node_id, first_kernel)
    ]
    released = dict(world.stored(QuotaReleased, after=mark))
    assert set(released) == scopes_of(owner)
    assert all(set(e.sessions) == {first} for e in released.values())
    assert world.stored(SessionAdmitted) == []  # each admitted by its placement
    assert [sid for sid, _ in world.stored(SessionScheduled, after=mark)] == [second]
    assert set(dict(world.stored(QuotaReserved, after=mark))) == scopes_of(owner)


async def test_a_kernel_that_fails_to_start_errs_the_session_and_gives_everything_back() -> None:
    world = World()
    owner = await world.tenancy()
    node_id = await world.register("gpu-1")
    session_id = await world.create(slots(gpu=1))
    await world.decide()
    await world.failed(session_id, "image pull failed")
    mark = world.last_seq()

    await world.decide()

    ((failed_id, failed),) = world.stored(SessionFailed, after=mark)
    assert failed_id == session_id and "image pull failed" in failed.reason
    assert world.state.sessions[session_id].session.status is SessionStatus.ERROR
    assert [n for n, _ in world.stored(ResourcesReleased, after=mark)] == [node_id]
    assert set(dict(world.stored(QuotaReleased, after=mark))) == scopes_of(owner)
    ledger = await world.ledger(node_id)
    assert ledger.allocations == {} and ledger.free == ledger.capacity


async def test_facts_decided_again_change_nothing() -> None:
    world = World()
    await world.tenancy()
    await world.register("gpu-1")
    session_id = await world.create(slots(gpu=1))
    await world.decide()
    await world.started(session_id)
    work = world.state.take_work()
    world.state.give_back(work)
    await world.decide()
    assert [sid for sid, _ in world.stored(SessionStarted)] == [session_id]
    world.state.give_back(work)  # the same facts again, as after a restart
    mark = world.last_seq()

    assert await world.decide() == 0
    assert world.names(after=mark) == []
    assert world.state.take_work().facts == []


async def test_a_head_admitted_in_this_pass_has_not_starved_and_lets_others_backfill() -> None:
    world = World()
    await world.tenancy()
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=2))
    await world.create(slots(gpu=1))
    await world.decide()  # one of the two GPUs in use
    head = await world.create(slots(gpu=2))
    small = await world.create(slots(gpu=1))
    mark = world.last_seq()

    await world.decide()

    assert [sid for sid, _ in world.stored(SessionScheduled, after=mark)] == [small]
    reasons = dict(world.stored(SessionPendingReasonChanged, after=mark))
    assert list(reasons) == [head] and "reserved" not in reasons[head].reason


async def test_a_node_s_offer_is_kept_until_its_ledger_or_agent_changes() -> None:
    # A pass over a thousand nodes builds offers only for the nodes that changed.
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=2))
    await world.decide()
    node = world.state.nodes[node_id]
    first = offer_of(world.state, node)
    assert offer_of(world.state, node) is first  # nothing changed: the same offer

    await world.create(slots(cpu=2, mem=4, gpu=1))
    await world.decide()  # placed there: the ledger moved on
    placed = offer_of(world.state, node)
    assert placed is not first and placed.free == slots(cpu=6, mem=28, gpu=1)
    assert sum(d.whole for d in placed.devices) == 1

    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=2))  # its agent reports again
    again = offer_of(world.state, node)
    assert again is not placed and again.free == placed.free

    copy = working_copy(node)  # a pass's own copy is offered fresh, never kept
    assert offer_of(world.state, copy) is not again
    assert offer_of(world.state, node) is again

    await world.create(slots(cpu=2, mem=4, gpu=1))
    await world.create(slots(cpu=2, mem=4, gpu=1))
    await world.decide()  # one more fits on the kept offer's free GPU, the next waits
    assert len(world.stored(SessionScheduled)) == 2
    assert offer_of(world.state, node).free.gpu_hundredths == 0


async def one_exited(*, waiting: int) -> tuple[World, str, list[str]]:
    """A one-GPU node whose session has exited (the fact not decided yet), with ``waiting``
    more sessions waiting for the GPU: (the world, the node, the waiting sessions)."""
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    first = await world.create(slots(gpu=1))
    others = [await world.create(slots(gpu=1)) for _ in range(waiting)]
    await world.decide()
    await world.started(first)
    await world.decide()
    await world.exited(first, 0)
    return world, node_id, others


async def test_a_kernel_s_end_is_stored_before_the_queue_is_placed() -> None:
    world, node_id, (second,) = await one_exited(waiting=1)
    watched = Watched(world.store)

    await world.decide(store=watched)

    names = [[e.name for w in commit for e in w.events] for commit in watched.handed]
    # The end first, alone (a long queue's placement never delays it), with its quota given
    # back on every scope ahead of it in the same commit...
    assert set(names[0]) == {"QuotaReleased", "ResourcesReleased", "SessionTerminated"}
    assert names[0].count("QuotaReleased") == 4  # keypair, user, project, domain
    assert names[0].index("SessionTerminated") > max(
        i for i, name in enumerate(names[0]) if name == "QuotaReleased"
    )
    # ...then the placement, which sees the GPU given back.
    placed = [name for commit in names[1:] for name in commit]
    assert {"ResourcesAllocated", "SessionScheduled"} <= set(placed)
    assert "QuotaReleased" not in placed
    assert [sid for sid, _ in world.stored(SessionScheduled)][-1] == second
    assert (await world.ledger(node_id)).allocations.keys() == {
        world.state.sessions[second].session.main_kernel
    }


async def test_a_kernel_s_end_with_nothing_waiting_is_one_commit() -> None:
    world, _, _ = await one_exited(waiting=0)
    watched = Watched(world.store)

    await world.decide(store=watched)

    (commit,) = watched.handed
    assert {"ResourcesReleased", "SessionTerminated", "QuotaReleased"} <= {
        e.name for w in commit for e in w.events
    }
