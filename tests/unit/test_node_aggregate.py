"""Node ledger rules (allocations as a set keyed by kernel id, cordon, lost), as
given-events / when-command / then-events."""

from __future__ import annotations

import pytest

from commands.node.aggregate import Node
from commands.node.rules import (
    Allocation,
    AllocationConflictError,
    InsufficientCapacityError,
    NodeUnavailableError,
)
from events.catalogue import Event
from events.domain.node import (
    KernelStopRequested,
    NodeCapacityChanged,
    NodeCordoned,
    NodeLost,
    NodeRecovered,
    NodeRegistered,
    NodeUncordoned,
    ResourcesAllocated,
    ResourcesReleased,
)
from schemas.resources import ResourceSlots
from tests.unit.scenario import T0, at, given, then

NID = "node-1"
GIB = 1024**3
CAPACITY = ResourceSlots.of(cpu=8, memory=32 * GIB, gpu=2)
HALF_GPU = ResourceSlots.of(cpu=2, memory=8 * GIB, gpu="0.5")
REGISTERED = NodeRegistered(hostname="gpu-01", resource_group="default", capacity=CAPACITY)
ALLOCATED = ResourcesAllocated(kernel_id="k1", session_id="s1", slots=HALF_GPU)
NOW = at(60)


def test_register_records_the_capacity() -> None:
    node = Node.register(NID, "gpu-01", "default", CAPACITY, T0)

    assert then(node) == [REGISTERED]
    assert node.free == CAPACITY
    assert node.schedulable


def test_allocate_sets_slots_aside_for_a_kernel() -> None:
    node = given(Node, NID, REGISTERED)

    node.allocate("k1", "s1", HALF_GPU, NOW)

    assert then(node) == [ALLOCATED]
    assert node.allocations == {"k1": Allocation(session_id="s1", slots=HALF_GPU)}
    assert node.free == CAPACITY - HALF_GPU


def test_allocating_the_same_kernel_again_changes_nothing() -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED)

    assert not node.allocate("k1", "s1", HALF_GPU, NOW)
    assert then(node) == []
    assert node.allocated == HALF_GPU


@pytest.mark.parametrize(
    ("session_id", "slots"), [("s1", ResourceSlots.of(cpu=1)), ("s2", HALF_GPU)]
)
def test_a_kernel_cannot_hold_two_different_allocations(
    session_id: str, slots: ResourceSlots
) -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED)

    with pytest.raises(AllocationConflictError, match="k1"):
        node.allocate("k1", session_id, slots, NOW)
    assert then(node) == []


def test_allocate_refuses_what_does_not_fit_and_names_the_shortfall() -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED)

    with pytest.raises(InsufficientCapacityError, match="gpu"):
        node.allocate("k2", "s2", ResourceSlots.of(gpu=2), NOW)
    assert then(node) == []


def test_allocate_takes_exactly_the_free_capacity() -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED)

    node.allocate("k2", "s2", CAPACITY - HALF_GPU, NOW)

    assert node.free == ResourceSlots()
    assert len(then(node)) == 1


@pytest.mark.parametrize(
    ("flag", "word"),
    [(NodeCordoned(reason="maintenance"), "cordoned"), (NodeLost(reason="heartbeat"), "lost")],
)
def test_a_cordoned_or_lost_node_takes_no_new_allocation(flag: Event, word: str) -> None:
    node = given(Node, NID, REGISTERED, flag)

    with pytest.raises(NodeUnavailableError, match=word):
        node.allocate("k1", "s1", HALF_GPU, NOW)
    assert then(node) == []
    assert not node.schedulable


def test_a_retried_allocation_on_a_lost_node_is_still_a_no_op() -> None:
    # The retry of a decision that was stored must not fail because of what came after it.
    node = given(Node, NID, REGISTERED, ALLOCATED, NodeLost(reason="heartbeat"))

    assert not node.allocate("k1", "s1", HALF_GPU, NOW)
    assert then(node) == []


def test_release_gives_the_slots_back() -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED)

    node.release("k1", "session ended", NOW)

    assert then(node) == [ResourcesReleased(kernel_id="k1", reason="session ended")]
    assert node.free == CAPACITY
    assert node.allocations == {}


def test_releasing_an_unknown_kernel_changes_nothing() -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED, ResourcesReleased(kernel_id="k1", reason="x"))

    assert not node.release("k1", "again", NOW)
    assert not node.release("never-allocated", "x", NOW)
    assert then(node) == []


def test_cordon_and_uncordon_are_idempotent() -> None:
    node = given(Node, NID, REGISTERED)

    assert node.cordon("maintenance", NOW)
    assert not node.cordon("maintenance", NOW)
    assert node.uncordon("done", NOW)
    assert not node.uncordon("done", NOW)

    assert then(node) == [NodeCordoned(reason="maintenance"), NodeUncordoned(reason="done")]
    assert node.schedulable


def test_a_lost_node_keeps_its_allocations_until_they_are_released() -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED)

    assert node.mark_lost("heartbeat expired", NOW)
    assert not node.mark_lost("heartbeat expired", NOW)

    assert then(node) == [NodeLost(reason="heartbeat expired")]
    assert node.allocations == {"k1": Allocation(session_id="s1", slots=HALF_GPU)}


def test_a_recovered_node_takes_work_again() -> None:
    node = given(Node, NID, REGISTERED, NodeLost(reason="heartbeat"))

    assert node.recover("registered again", NOW)
    assert not node.recover("registered again", NOW)

    assert then(node) == [NodeRecovered(reason="registered again")]
    assert node.allocate("k1", "s1", HALF_GPU, NOW)


def test_capacity_changes_only_when_it_differs() -> None:
    node = given(Node, NID, REGISTERED)
    smaller = ResourceSlots.of(cpu=4, memory=16 * GIB, gpu=1)

    assert not node.change_capacity(CAPACITY, NOW)
    assert node.change_capacity(smaller, NOW)

    assert then(node) == [NodeCapacityChanged(capacity=smaller)]
    assert node.free == smaller


def test_capacity_below_the_allocations_leaves_nothing_free_but_keeps_them() -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED)

    node.change_capacity(ResourceSlots.of(cpu=1, memory=GIB), NOW)

    assert node.free == ResourceSlots()
    assert node.allocated == HALF_GPU


def test_an_allocation_says_what_the_kernel_runs() -> None:
    node = given(Node, NID, REGISTERED)

    node.allocate("k1", "s1", HALF_GPU, NOW, image="busybox", command=("sh", "-c", "exit 3"))

    assert then(node) == [
        ResourcesAllocated(
            kernel_id="k1",
            session_id="s1",
            slots=HALF_GPU,
            image="busybox",
            command=("sh", "-c", "exit 3"),
        )
    ]
    assert node.allocations["k1"].image == "busybox"


def test_stop_request_marks_the_kernel_but_keeps_its_slots() -> None:
    node = given(Node, NID, REGISTERED, ALLOCATED)

    assert node.request_stop("k1", "user request", NOW)

    assert then(node) == [KernelStopRequested(kernel_id="k1", reason="user request")]
    assert node.allocations["k1"].stopping
    assert node.allocated == HALF_GPU  # released only when the agent reports the exit


def test_stop_requested_twice_or_for_an_unknown_kernel_changes_nothing() -> None:
    node = given(
        Node, NID, REGISTERED, ALLOCATED, KernelStopRequested(kernel_id="k1", reason="user")
    )

    assert not node.request_stop("k1", "again", NOW)
    assert not node.request_stop("k9", "unknown", NOW)
    assert then(node) == []
    # A retried allocation decision for a stopping kernel is still the same allocation.
    assert not node.allocate("k1", "s1", HALF_GPU, NOW)


def test_only_an_empty_node_is_removed_and_then_never_allocated_on() -> None:
    from commands.node.rules import NodeBusyError
    from events.domain.node import NodeRemoved

    busy = given(Node, NID, REGISTERED, ALLOCATED)
    with pytest.raises(NodeBusyError, match="still holds 1 kernel"):
        busy.remove("retired", NOW)
    assert then(busy) == []

    node = given(Node, NID, REGISTERED, ALLOCATED, ResourcesReleased(kernel_id="k1", reason="x"))
    assert node.remove("retired", NOW)
    assert not node.remove("retired", NOW)
    assert then(node) == [NodeRemoved(reason="retired")]
    assert node.removed and not node.schedulable
    with pytest.raises(NodeUnavailableError, match="removed"):
        node.allocate("k2", "s2", HALF_GPU, NOW)
