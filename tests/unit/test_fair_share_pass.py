"""A decision pass (in memory) in a fair-share group: usage comes from the node ledgers'
allocations and releases at their own times, the queue follows the factors, each waiting
session's reason says them, and a scheduler folded again from the log (a restart, a replica)
holds the same usage and decides the same order.

The group counts GPUs only (CPU and memory weigh 0): one node of 8 GPUs is a weighted
capacity of 80 per second; the half-life h is one day. From 0 to h Alice holds 4 GPUs and Bob
2, and still do: at h, Alice's normalised usage is 40·(h/ln2)·(1/2) / (80·h/ln2) = 0.25, Bob's
0.125, their project's (and domain's) 0.375. User factors 2^(-0.25/0.5) = 0.71 and
2^(-0.125/0.5) = 0.84; project and domain 2^(-0.375) = 0.77.
"""

from __future__ import annotations

from commands.tenancy import Keypair, User
from events.domain.session import SessionPendingReasonChanged
from events.writes import AggregateRef
from placement.fairshare import UsageBook, weigh
from schemas.fair_share import FairShareSettings, FairShareStanding
from schemas.ids import new_id
from schemas.subjects import AggregateType
from schemas.tenancy import (
    GroupScheduling,
    KeypairPolicyLimits,
    QueuePolicy,
    Role,
    SessionOwner,
    email_digest,
)
from services.scheduler.state import SchedulerState
from services.scheduler.state.usage import UsageFeed
from tests.unit.pass_support import ADMIN, World, slots

H = 86_400
FAIR = GroupScheduling(
    queue_policy=QueuePolicy.FAIR_SHARE,
    fair_share=FairShareSettings(usage_half_life_s=H, cpu_usage_weight=0, memory_usage_weight=0),
)


async def colleague(world: World, alice: SessionOwner) -> SessionOwner:
    """A second user in Alice's project, with a keypair under the same policy."""
    now, suffix = world.clock(), new_id()[:8]
    digest = email_digest(f"bob-{suffix}@example.org", b"tests")
    user = User.create(
        alice.domain, Role.USER, digest, "sealed", "default", [alice.project_id], now
    )
    policy = world.state.directory.keypairs[alice.access_key].policy
    keypair = Keypair.create(
        f"AKB{suffix.upper()}", user.id, alice.domain, new_id(), policy, None, now
    )
    await world.record(ADMIN, user, keypair)
    return SessionOwner(
        access_key=keypair.id, user_id=user.id, project_id=alice.project_id, domain=alice.domain
    )


async def as_owner(world: World, owner: SessionOwner, gpus: int) -> str:
    world.owner = owner
    return await world.create(slots(cpu=1, mem=1, gpu=gpus))


async def test_the_light_users_session_goes_first_and_every_reason_says_the_factors() -> None:
    world = World()
    alice = await world.tenancy(KeypairPolicyLimits(), FAIR)
    bob = await colleague(world, alice)
    await world.register("box", slots(cpu=16, mem=16, gpu=8))
    first = [await as_owner(world, alice, 4), await as_owner(world, bob, 2)]
    await world.decide()
    assert all(world.state.sessions[s].session.placements for s in first)

    await world.sync()  # the tail reads the pass's writes back: usage counts from there on
    world.clock.advance(H)  # both still hold their GPUs: 2 of 8 are free
    alice_next = await as_owner(world, alice, 4)  # asked first
    bob_next = await as_owner(world, bob, 4)
    mark = world.last_seq()
    await world.decide()

    assert world.state.queues["default"] == [bob_next, alice_next]
    reasons = dict(world.stored(SessionPendingReasonChanged, after=mark))
    short = "no node in group default has 4 free GPUs (most free: 2)"
    assert reasons[bob_next].fair_share == FairShareStanding(domain=0.77, project=0.77, user=0.84)
    assert reasons[bob_next].reason == f"{short}; fair share: domain 0.77, project 0.77, user 0.84"
    assert reasons[alice_next].fair_share == FairShareStanding(domain=0.77, project=0.77, user=0.71)
    assert reasons[alice_next].reason == (
        f"{short}; fair share: domain 0.77, project 0.77, user 0.71"
    )

    # A minute later the factors have moved less than their rounding: nothing is written.
    world.clock.advance(60)
    mark = world.last_seq()
    await world.decide()
    assert not world.stored(SessionPendingReasonChanged, after=mark)

    # A restart (or a replica) folds the same usage from the log, to the bit.
    again = world.folded_again()
    at = world.clock().timestamp()
    book = again.usage.until(again.position).usage("default", at)
    assert book == world.state.usage.until(world.state.position).usage("default", at)
    used = {a: weigh(x, FAIR.fair_share) for a, x in book.items()}
    assert (
        used[(alice.domain, alice.project_id, alice.user_id)]
        > used[(bob.domain, bob.project_id, bob.user_id)]
    )


def test_the_book_takes_changes_in_the_logs_order_whatever_order_they_were_folded_in() -> None:
    """A replica applies its own allocation (seq 3) from its ack before another writer's
    release stored before it (seq 2, stamped later than the allocation by a lagging clock)
    reaches its tail; a second replica folds them in the log's order. Same bits."""
    account = ("lab", "vision", "alice")

    def allocate(book: UsageBook) -> None:
        book.allocate("k2", "g", account, slots(cpu=1, mem=1, gpu=1), 100.0)

    def release(book: UsageBook) -> None:
        book.release("k1", 150.0)

    def first(book: UsageBook) -> None:
        book.allocate("k1", "g", account, slots(cpu=1, mem=1, gpu=2), 0.0)

    own_first, in_order = UsageFeed(), UsageFeed()
    for feed, changes in ((own_first, [(1, first), (3, allocate), (2, release)]),
                          (in_order, [(1, first), (2, release), (3, allocate)])):  # fmt: skip
        for seq, change in changes:
            feed.offer(seq, change)
    assert own_first.until(1).usage("g", 200.0) == in_order.until(1).usage("g", 200.0)
    assert own_first.until(3).usage("g", 500.0) == in_order.until(3).usage("g", 500.0)


async def test_an_allocation_read_back_before_its_sessions_request_counts_for_its_owner() -> None:
    """Another replica takes a session's request and places it at once; this one, refused on
    the node ledger, reads the ledger back (``UnitOfWork.refresh``) before its tail brings
    the request. The allocation counts under the session's owner all the same, as it does in
    a fold of the log in order (a restart's): what a change says cannot depend on what else
    was folded when it was."""
    world = World()
    alice = await world.tenancy(KeypairPolicyLimits(), FAIR)
    node = AggregateRef(AggregateType.NODE, await world.register("box", slots(gpu=8)))
    await world.decide()  # opens the node ledger
    mark = world.last_seq()
    await as_owner(world, alice, 4)
    await world.decide()
    world.clock.advance(H)

    events = world.store.events()
    late = SchedulerState()
    for event in events[:mark]:
        late.apply(event)
        late.position = event.seq
    for event in (await world.store.read(node, after_seq=late.guard(node))).events:
        late.apply(event)  # the refresh: the allocation, ahead of the session's request
    for event in events[mark:]:  # the tail: the ledger's events are echoes by now
        late.apply(event)
        late.position = event.seq

    at = world.clock().timestamp()
    in_order = world.folded_again()
    book = late.usage.until(late.position).usage("default", at)
    assert book == in_order.usage.until(in_order.position).usage("default", at)
    assert list(book) == [(alice.domain, alice.project_id, alice.user_id)]


async def test_a_cluster_without_a_fair_share_group_keeps_no_backlog_of_usage() -> None:
    """Every pass takes the usage changes the tail has passed, whatever the group's policy:
    they do not pile up in the feed of a scheduler that never orders by fair share."""
    world = World()
    await world.tenancy(KeypairPolicyLimits(), GroupScheduling(queue_policy=QueuePolicy.FIFO))
    await world.register("box", slots(cpu=16, mem=16, gpu=8))
    for _ in range(3):
        await world.create(slots(cpu=1, mem=1, gpu=1))
    await world.decide()
    await world.sync()  # the tail reads the allocations back: they are offered to the feed
    assert world.state.usage.waiting > 0
    await world.decide()
    assert world.state.usage.waiting == 0
