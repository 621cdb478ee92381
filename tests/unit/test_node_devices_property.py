"""Property: whatever sequence of allocations and releases a node ledger is asked for, a device
is never over one GPU, never both whole-held and shared, never shared in MIG mode; the ledger
takes exactly what an independent check says fits; and releasing everything gives every device
back. The ledger rebuilt from its own events agrees with the one that decided them."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from commands.errors import DomainError
from commands.node.aggregate import Node
from schemas.devices import DeviceInfo, DeviceShare
from schemas.resources import ResourceSlots
from tests.unit.scenario import CAUSE, T0, at

DEVICES = (
    *(DeviceInfo(kind="cuda", index=i, uuid=f"GPU-{i}") for i in range(3)),
    DeviceInfo(kind="cuda", index=3, uuid="GPU-3", mig_enabled=True),
)
CAPACITY = ResourceSlots(cpu_milli=10**6, memory_bytes=1 << 40, gpu_hundredths=400)
KERNELS = [f"k{i}" for i in range(6)]


@dataclass(frozen=True)
class Allocate:
    kernel: str
    devices: tuple[DeviceShare, ...]


@dataclass(frozen=True)
class Release:
    kernel: str


def device_share(index: int, hundredths: int, whole: bool) -> DeviceShare:
    return DeviceShare(
        index=index, uuid=f"GPU-{index}", hundredths=100 if whole else hundredths, whole=whole
    )


shares = st.builds(
    device_share,
    index=st.integers(0, 3),
    hundredths=st.sampled_from([1, 10, 25, 40, 50, 60, 75, 99, 100]),
    whole=st.booleans(),
)
steps = st.one_of(
    st.builds(Allocate, st.sampled_from(KERNELS), st.lists(shares, max_size=3).map(tuple)),
    st.builds(Release, st.sampled_from(KERNELS)),
)


def expected_to_fit(node: Node, kernel: str, devices: tuple[DeviceShare, ...]) -> bool:
    """The rules, checked from the allocations alone (not from the ledger's tally)."""
    if kernel in node.allocations or len({d.index for d in devices}) < len(devices):
        return False
    for d in devices:
        holders = [s for a in node.allocations.values() for s in a.devices if s.index == d.index]
        if any(s.whole for s in holders) or (d.whole and holders):
            return False
        if not d.whole and (
            DEVICES[d.index].mig_enabled or sum(s.hundredths for s in holders) + d.hundredths > 100
        ):
            return False  # fmt: skip
    asked = sum(d.hundredths for d in devices)
    return asked <= node.free.gpu_hundredths


def check_invariants(node: Node) -> None:
    for device in DEVICES:
        holders = [
            s for a in node.allocations.values() for s in a.devices if s.index == device.index
        ]
        whole = [s for s in holders if s.whole]
        shared = sum(s.hundredths for s in holders if not s.whole)
        assert len(whole) <= 1
        assert not (whole and shared)
        assert shared <= 100
        assert not (device.mig_enabled and shared)
        assert node.device_use()[device.index] == (bool(whole), shared)


@settings(max_examples=300, deadline=None)
@given(st.lists(steps, max_size=25))
def test_devices_are_never_over_allocated_and_all_come_back(
    script: list[Allocate | Release],
) -> None:
    node = Node.register("n", "h", "default", CAPACITY, T0, devices=DEVICES)
    for second, step in enumerate(script, start=1):
        now = at(second)
        if isinstance(step, Release):
            node.release(step.kernel, "done", now)
        else:
            held = node.allocations.get(step.kernel)
            fits = expected_to_fit(node, step.kernel, step.devices)
            gpus = sum(d.hundredths for d in step.devices)
            slots = ResourceSlots(cpu_milli=1, gpu_hundredths=gpus)
            try:
                changed = node.allocate(step.kernel, "s", slots, now, devices=step.devices)
            except DomainError:
                assert not fits
                assert node.allocations.get(step.kernel) == held
            else:
                # Taken exactly when it fits; a kernel already holding it is a no-op.
                assert changed == fits
                assert changed or held == node.allocations[step.kernel]
        check_invariants(node)
        # The running sum is the sum of what is held, whatever the order of events.
        held_slots = [a.slots for a in node.allocations.values()]
        assert node.allocated == sum(held_slots, ResourceSlots())

    replayed = Node.rehydrate(node.collect(CAUSE))
    assert replayed is not None
    assert (replayed.allocations, replayed.device_use()) == (node.allocations, node.device_use())
    assert replayed.free == node.free

    for kernel in list(node.allocations):
        node.release(kernel, "end", at(len(script) + 1))

    assert node.device_use() == {d.index: (False, 0) for d in DEVICES}
    assert node.free == CAPACITY
