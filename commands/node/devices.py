"""Device-level rules of the node ledger (``commands.node``): which devices an allocation may
name, and the running tally of who holds what on each device. Pure; no subjects.

A device is held whole by one kernel, or shared in hundredths by several, never both; shares
on one device never exceed 100 and never go on a MIG-enabled device.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from commands.errors import DomainError
from schemas.devices import DeviceInfo, DeviceShare
from schemas.resources import GPU_QUANTUM

DeviceTally = dict[int, tuple[int, int]]
"""Device index -> (kernels holding it whole, hundredths shared). Only devices in use appear.
Values are tuples, so a shallow copy of the dict is a safe working copy."""


class DeviceAllocationError(DomainError):
    """An allocation names devices the ledger cannot give it."""


class UnknownDeviceError(DeviceAllocationError):
    """The allocation names a device this node does not have."""


class DuplicateDeviceError(DeviceAllocationError):
    """The allocation names the same device twice."""


class DeviceSumError(DeviceAllocationError):
    """The devices named do not add up to the GPU amount allocated."""


class DeviceTakenError(DeviceAllocationError):
    """A device named is held whole by another kernel, or a whole device is wanted that is
    already (partly) in use."""


class DeviceOversharedError(DeviceAllocationError):
    """Shares on a device would go over one whole device."""


class MigShareError(DeviceAllocationError):
    """A share on a device in MIG mode (MIG devices are handed out whole only)."""


def gpus(hundredths: int) -> str:
    return f"{hundredths / GPU_QUANTUM:.2f} GPU"


def check_devices(
    node_id: str,
    node_devices: Sequence[DeviceInfo],
    tally: Mapping[int, tuple[int, int]],
    shares: Sequence[DeviceShare],
    gpu_hundredths: int,
) -> None:
    """Raise a ``DeviceAllocationError`` saying why, unless ``shares`` may be given now."""
    by_index = {d.index: d for d in node_devices}
    seen: set[int] = set()
    for share in shares:
        where = f"node {node_id}: device {share.index} ({share.uuid})"
        if share.index in seen:
            raise DuplicateDeviceError(f"{where} is named twice in one allocation")
        seen.add(share.index)
        device = by_index.get(share.index)
        if device is None or device.uuid != share.uuid:
            raise UnknownDeviceError(f"{where} is not a device of this node")
        if share.whole and share.hundredths != GPU_QUANTUM:
            raise DeviceSumError(f"{where} is held whole but counted as {gpus(share.hundredths)}")
    if node_devices or shares:
        named = sum(s.hundredths for s in shares)
        if gpu_hundredths and not shares:
            raise DeviceSumError(
                f"node {node_id}: an allocation of {gpus(gpu_hundredths)} must name its devices"
            )
        if named != gpu_hundredths:
            raise DeviceSumError(
                f"node {node_id}: the devices named hold {gpus(named)} but the allocation is "
                f"for {gpus(gpu_hundredths)}"
            )
    for share in shares:
        _check_free(node_id, by_index[share.index], tally.get(share.index, (0, 0)), share)


def _check_free(node_id: str, device: DeviceInfo, use: tuple[int, int], share: DeviceShare) -> None:
    where = f"node {node_id}: device {device.index} ({device.uuid})"
    whole, shared = use
    if whole:
        raise DeviceTakenError(f"{where} is held whole by another kernel")
    if share.whole:
        if shared:
            raise DeviceTakenError(
                f"{where} cannot be held whole: {gpus(shared)} of it is shared already"
            )
        return
    if device.mig_enabled:
        raise MigShareError(f"{where} is in MIG mode and cannot be shared")
    if shared + share.hundredths > GPU_QUANTUM:
        raise DeviceOversharedError(
            f"{where} has {gpus(GPU_QUANTUM - shared)} unshared, less than the "
            f"{gpus(share.hundredths)} asked"
        )


def add(tally: DeviceTally, shares: Iterable[DeviceShare], sign: int = 1) -> None:
    """Count ``shares`` in (``sign`` 1) or out (-1). Entries are replaced, never mutated."""
    for share in shares:
        whole, shared = tally.get(share.index, (0, 0))
        if share.whole:
            whole += sign
        else:
            shared += sign * share.hundredths
        if whole or shared:
            tally[share.index] = (whole, shared)
        else:
            tally.pop(share.index, None)


def tally_of(allocations: Iterable[Iterable[DeviceShare]]) -> DeviceTally:
    tally: DeviceTally = {}
    for shares in allocations:
        add(tally, shares)
    return tally


def device_use(
    node_devices: Iterable[DeviceInfo], tally: Mapping[int, tuple[int, int]]
) -> dict[int, tuple[bool, int]]:
    """Every device of the node -> (held whole, hundredths shared); a device that went away
    while still allocated is listed too, so nothing held is ever hidden."""
    use = {d.index: (False, 0) for d in node_devices}
    for index, (whole, shared) in tally.items():
        use[index] = (whole > 0, shared)
    return use
