"""The nodes and agents views' pure ``apply``: the ledger's allocations, use, cordon and loss,
and what the agent reports, each idempotent."""

from __future__ import annotations

from events.catalogue import Event
from events.domain.agent import AgentImagesChanged, AgentRegistered
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
from events.envelope import StoredEvent
from events.writes import AggregateRef
from projections import agents, nodes
from schemas.devices import DeviceInfo
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from tests.support import envelope, ref

CAPACITY = ResourceSlots(cpu_milli=8000, memory_bytes=2**34, gpu_hundredths=200)
HALF = ResourceSlots(cpu_milli=1000, memory_bytes=2**30, gpu_hundredths=50)


def stored(seq: int, aggregate: AggregateRef, version: int, event: Event) -> StoredEvent:
    payload = event.model_dump(mode="json")
    env = envelope(aggregate, version, name=event.event_name, payload=payload)
    return StoredEvent(seq, env.model_copy(update={"schema_version": event.schema_version}))


def fold(node: AggregateRef, events: list[Event]) -> nodes.NodeRecord | None:
    row: nodes.NodeRecord | None = None
    for version, event in enumerate(events, start=1):
        row = nodes.apply(row, stored(version * 10, node, version, event))
    return row


def registered() -> NodeRegistered:
    return NodeRegistered(hostname="gpu-1", resource_group="a100", capacity=CAPACITY)


def test_allocations_are_a_set_keyed_by_kernel_and_sum_to_what_is_used() -> None:
    node = ref(AggregateType.NODE)
    row = fold(
        node,
        [
            registered(),
            ResourcesAllocated(kernel_id="k1", session_id="s1", slots=HALF, image="cuda"),
            ResourcesAllocated(kernel_id="k2", session_id="s2", slots=HALF),
            KernelStopRequested(kernel_id="k1", reason="terminating"),
            KernelStopRequested(kernel_id="unknown", reason="late"),
        ],
    )
    assert row is not None
    assert row.used == HALF + HALF and row.capacity == CAPACITY
    assert {k: (a.session_id, a.stopping) for k, a in row.kernels.items()} == {
        "k1": ("s1", True),
        "k2": ("s2", False),
    }
    released = nodes.apply(
        row, stored(100, node, 6, ResourcesReleased(kernel_id="k1", reason="ended"))
    )
    assert released is not None and set(released.kernels) == {"k2"} and released.used == HALF


def test_cordon_loss_and_capacity_follow_the_ledger() -> None:
    node = ref(AggregateType.NODE)
    smaller = ResourceSlots(cpu_milli=4000)
    row = fold(
        node, [registered(), NodeCordoned(reason="maintenance"), NodeLost(reason="heartbeat")]
    )
    assert row is not None and (row.cordoned, row.lost, row.reason) == (True, True, "heartbeat")
    row = fold(
        node,
        [
            registered(),
            NodeCordoned(reason="maintenance"),
            NodeUncordoned(reason="done"),
            NodeLost(reason="heartbeat"),
            NodeRecovered(reason="epoch 2"),
            NodeCapacityChanged(capacity=smaller),
        ],
    )
    assert row is not None and (row.cordoned, row.lost, row.capacity) == (False, False, smaller)


def test_node_events_already_applied_or_without_a_ledger_change_nothing() -> None:
    node = ref(AggregateType.NODE)
    alloc = ResourcesAllocated(kernel_id="k1", session_id="s1", slots=HALF)
    row = fold(node, [registered(), alloc])
    assert row is not None and row.last_seq == 20
    assert nodes.apply(row, stored(20, node, 2, alloc)) is row
    assert (
        nodes.apply(row, stored(15, node, 2, ResourcesReleased(kernel_id="k1", reason="x"))) is row
    )
    assert nodes.apply(None, stored(5, node, 2, alloc)) is None


def test_agent_rows_keep_their_first_registration_and_follow_images() -> None:
    agent = ref(AggregateType.AGENT)
    gpu = DeviceInfo(kind="cuda", index=0, uuid="GPU-1", name="H100", memory_bytes=80 * 2**30)
    first = AgentRegistered(
        epoch=1, hostname="gpu-1", backend="docker", capacity=CAPACITY, devices=(gpu,)
    )
    row = agents.apply(None, stored(1, agent, 1, first))
    assert row is not None and row.devices == (gpu.model_dump(mode="json"),)
    row = agents.apply(row, stored(2, agent, 2, AgentImagesChanged(images=("cuda:12",))))
    again = first.model_copy(update={"epoch": 2, "backend": "simulated"})
    row = agents.apply(row, stored(3, agent, 3, again))
    assert row is not None
    assert (row.epoch, row.backend, row.images, row.last_seq) == (2, "simulated", (), 3)
    assert agents.apply(row, stored(2, agent, 2, AgentImagesChanged(images=("x",)))) is row
    assert (
        agents.apply(None, stored(9, ref(AggregateType.AGENT), 2, AgentImagesChanged(images=())))
        is None
    )
