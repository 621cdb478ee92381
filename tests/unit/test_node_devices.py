"""Node ledger at device level (whole devices, shares, MIG, NUMA), as given-events /
when-command / then-events."""

from __future__ import annotations

import pytest

from commands.node.aggregate import Node
from commands.node.devices import (
    DeviceOversharedError,
    DeviceSumError,
    DeviceTakenError,
    DuplicateDeviceError,
    MigShareError,
    UnknownDeviceError,
)
from commands.node.rules import InsufficientCapacityError, UnknownNumaNodeError
from events.catalogue import Event
from events.domain.node import (
    NodeCapacityChanged,
    NodeRegistered,
    ResourcesAllocated,
    ResourcesReleased,
)
from events.snapshots import Snapshot
from schemas.devices import DeviceInfo, DeviceShare, NumaNode
from schemas.resources import ResourceSlots
from tests.unit.scenario import T0, at, given, then

NID = "node-1"
GIB = 1 << 30
GPUS = tuple(
    DeviceInfo(kind="cuda", index=i, uuid=f"GPU-{i}", memory_bytes=80 * GIB, numa_node=i // 2)
    for i in range(4)
)
MIG = DeviceInfo(kind="cuda", index=4, uuid="GPU-4", mig_enabled=True)
NUMA = (NumaNode(node=0, cpus=(0, 1, 2, 3)), NumaNode(node=1, cpus=(4, 5, 6, 7)))
CAPACITY = ResourceSlots.of(cpu=64, memory=512 * GIB, gpu=5)
REGISTERED = NodeRegistered(
    hostname="gpu-01",
    resource_group="default",
    capacity=CAPACITY,
    devices=(*GPUS, MIG),
    numa=NUMA,
)
NOW = at(60)


def whole(index: int) -> DeviceShare:
    return DeviceShare(index=index, uuid=f"GPU-{index}", hundredths=100, whole=True)


def share(index: int, hundredths: int) -> DeviceShare:
    return DeviceShare(index=index, uuid=f"GPU-{index}", hundredths=hundredths)


def gpu(hundredths: int) -> ResourceSlots:
    return ResourceSlots(cpu_milli=1000, gpu_hundredths=hundredths)


def allocated(kernel: str, *devices: DeviceShare, numa_node: int | None = None) -> Event:
    return ResourcesAllocated(
        kernel_id=kernel,
        session_id=f"s-{kernel}",
        slots=gpu(sum(d.hundredths for d in devices)),
        devices=devices,
        numa_node=numa_node,
    )


def allocate(node: Node, kernel: str, *devices: DeviceShare, numa_node: int | None = None) -> bool:
    return node.allocate(
        kernel,
        f"s-{kernel}",
        gpu(sum(d.hundredths for d in devices)),
        NOW,
        devices=devices,
        numa_node=numa_node,
    )


def test_register_records_devices_and_numa_and_all_devices_start_free() -> None:
    node = Node.register(NID, "gpu-01", "default", CAPACITY, T0, devices=(*GPUS, MIG), numa=NUMA)

    assert then(node) == [REGISTERED]
    assert node.device_use() == dict.fromkeys(range(5), (False, 0))


def test_whole_devices_are_allocated_with_their_numa_node_and_hostname() -> None:
    node = given(Node, NID, REGISTERED)

    node.allocate(
        "k1", "s-k1", gpu(200), NOW, devices=(whole(0), whole(1)), hostname="main1", numa_node=0
    )

    event = ResourcesAllocated(
        kernel_id="k1",
        session_id="s-k1",
        slots=gpu(200),
        devices=(whole(0), whole(1)),
        hostname="main1",
        numa_node=0,
    )
    assert then(node) == [event]
    assert node.allocations["k1"].devices == (whole(0), whole(1))
    assert (node.allocations["k1"].hostname, node.allocations["k1"].numa_node) == ("main1", 0)
    assert node.device_use() == {0: (True, 0), 1: (True, 0), 2: (False, 0), 3: (False, 0),
                                 4: (False, 0)}  # fmt: skip


def test_four_quarter_shares_fit_on_one_device_and_a_fifth_does_not() -> None:
    node = given(Node, NID, REGISTERED)

    for k in range(4):
        allocate(node, f"k{k}", share(0, 25))

    assert len(then(node)) == 4
    assert node.device_use()[0] == (False, 100)
    with pytest.raises(DeviceOversharedError, match=r"device 0 \(GPU-0\) has 0.00 GPU unshared"):
        allocate(node, "k5", share(0, 1))
    assert then(node) == []


@pytest.mark.parametrize(
    ("history", "wanted", "error", "words"),
    [
        ((whole(0),), share(0, 10), DeviceTakenError, "held whole by another kernel"),
        ((whole(0),), whole(0), DeviceTakenError, "held whole by another kernel"),
        ((share(0, 10),), whole(0), DeviceTakenError, "0.10 GPU of it is shared already"),
        ((share(0, 60),), share(0, 50), DeviceOversharedError, "0.40 GPU unshared"),
    ],
)
def test_a_device_is_never_both_whole_and_shared_nor_over_one_gpu(
    history: tuple[DeviceShare, ...], wanted: DeviceShare, error: type[Exception], words: str
) -> None:
    node = given(Node, NID, REGISTERED, allocated("k0", *history))

    with pytest.raises(error, match=words):
        allocate(node, "k1", wanted)
    assert then(node) == []


def test_a_mig_device_is_handed_out_whole_but_never_shared() -> None:
    node = given(Node, NID, REGISTERED)
    mig = DeviceShare(index=4, uuid="GPU-4", hundredths=50)

    with pytest.raises(MigShareError, match="MIG mode"):
        allocate(node, "k1", mig)
    assert allocate(node, "k2", whole(4))


@pytest.mark.parametrize(
    "devices",
    [
        (DeviceShare(index=9, uuid="GPU-9", hundredths=100, whole=True),),
        (DeviceShare(index=0, uuid="GPU-other", hundredths=100, whole=True),),
    ],
    ids=["no-such-index", "uuid-mismatch"],
)
def test_an_allocation_must_name_devices_of_this_node(devices: tuple[DeviceShare, ...]) -> None:
    node = given(Node, NID, REGISTERED)

    with pytest.raises(UnknownDeviceError, match="is not a device of this node"):
        allocate(node, "k1", *devices)
    assert then(node) == []


def test_the_same_device_twice_in_one_allocation_is_refused() -> None:
    node = given(Node, NID, REGISTERED)

    with pytest.raises(DuplicateDeviceError, match="named twice"):
        allocate(node, "k1", share(0, 30), share(0, 30))


@pytest.mark.parametrize(
    ("slots", "devices", "words"),
    [
        (gpu(100), (), "an allocation of 1.00 GPU must name its devices"),
        (gpu(150), (whole(0),), "hold 1.00 GPU but the allocation is for 1.50 GPU"),
        (gpu(0), (share(0, 20),), "hold 0.20 GPU but the allocation is for 0.00 GPU"),
        (gpu(50), (DeviceShare(index=0, uuid="GPU-0", hundredths=50, whole=True),), "whole"),
    ],
)
def test_the_devices_must_add_up_to_the_gpus_allocated(
    slots: ResourceSlots, devices: tuple[DeviceShare, ...], words: str
) -> None:
    node = given(Node, NID, REGISTERED)

    with pytest.raises(DeviceSumError, match=words):
        node.allocate("k1", "s1", slots, NOW, devices=devices)
    assert then(node) == []


def test_a_node_without_devices_keeps_gpu_accounting_by_amount_only() -> None:
    # Ledgers written before devices were reported: the amount is all there is to check.
    plain = NodeRegistered(hostname="h", resource_group="default", capacity=CAPACITY)
    node = given(Node, NID, plain)

    assert node.allocate("k1", "s1", gpu(150), NOW)
    assert node.device_use() == {}
    with pytest.raises(UnknownDeviceError):
        allocate(node, "k2", whole(0))


def test_device_rules_come_after_the_amount_rules() -> None:
    node = given(Node, NID, REGISTERED, allocated("k0", whole(0), whole(1), whole(2), whole(3)))

    with pytest.raises(InsufficientCapacityError, match="gpu"):
        allocate(node, "k1", share(0, 50), whole(1), whole(2), whole(3), whole(4))


def test_an_unknown_numa_node_is_refused() -> None:
    node = given(Node, NID, REGISTERED)

    with pytest.raises(UnknownNumaNodeError, match="no NUMA node 7"):
        allocate(node, "k1", whole(0), numa_node=7)


def test_the_same_device_allocation_again_changes_nothing() -> None:
    node = given(Node, NID, REGISTERED, allocated("k1", share(0, 30), share(1, 30)))

    assert not allocate(node, "k1", share(0, 30), share(1, 30))
    assert then(node) == []
    assert node.device_use()[0] == (False, 30)  # counted once


def test_releasing_gives_the_devices_back() -> None:
    node = given(Node, NID, REGISTERED, allocated("k1", whole(0)), allocated("k2", share(1, 40)))

    node.release("k1", "exited", NOW)
    node.release("k2", "exited", NOW)

    assert then(node) == [
        ResourcesReleased(kernel_id="k1", reason="exited"),
        ResourcesReleased(kernel_id="k2", reason="exited"),
    ]
    assert node.device_use() == dict.fromkeys(range(5), (False, 0))
    assert allocate(node, "k3", share(0, 100))


def test_capacity_changes_when_devices_or_numa_differ() -> None:
    node = given(Node, NID, REGISTERED)

    assert not node.change_capacity(CAPACITY, NOW, devices=(*GPUS, MIG), numa=NUMA)
    assert node.change_capacity(CAPACITY, NOW, devices=GPUS, numa=NUMA)
    assert node.change_capacity(CAPACITY, NOW, devices=GPUS, numa=())

    assert then(node) == [
        NodeCapacityChanged(capacity=CAPACITY, devices=GPUS, numa=NUMA),
        NodeCapacityChanged(capacity=CAPACITY, devices=GPUS, numa=()),
    ]
    assert node.devices == GPUS


def test_a_device_that_went_away_while_held_still_shows_as_held() -> None:
    node = given(Node, NID, REGISTERED, allocated("k1", whole(4)))

    node.change_capacity(CAPACITY, NOW, devices=GPUS, numa=NUMA)

    assert node.device_use()[4] == (True, 0)


def test_device_use_is_rebuilt_from_a_snapshot() -> None:
    node = given(Node, NID, REGISTERED, allocated("k1", whole(0)), allocated("k2", share(1, 40)))
    snapshot: Snapshot = node.snapshot(seq=3, now=NOW)

    restored = Node.from_snapshot(snapshot)

    assert restored.device_use() == node.device_use()
    assert restored.devices == node.devices and restored.numa == NUMA
    with pytest.raises(DeviceTakenError):
        allocate(restored, "k3", share(0, 10))


def test_old_events_without_devices_still_load() -> None:
    old = REGISTERED.model_dump(mode="json")
    del old["devices"], old["numa"]

    loaded = NodeRegistered.model_validate(old)

    assert (loaded.devices, loaded.numa) == ((), ())
