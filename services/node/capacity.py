"""What this machine offers: CPU, memory, its NUMA layout, and NVIDIA GPUs through NVML (none
without a driver), each with its NUMA node and MIG mode. Reads and writes no subjects."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import cast

from schemas.devices import DeviceInfo, NumaNode
from schemas.resources import CPU_QUANTUM, GPU_QUANTUM, ResourceSlots
from services.node.nvml import MIG_ENABLE, Nvml, load_nvml
from services.node.topology import NODE_ROOT, PCI_ROOT, numa_nodes, pci_numa_node

log = logging.getLogger(__name__)

# Said once per process: a process may hold many agents (scale tests) or re-discover often.
_no_driver_said = False
SIMULATED_GPU_MEMORY = 80 << 30


@dataclass(frozen=True, slots=True)
class Capacity:
    slots: ResourceSlots
    devices: tuple[DeviceInfo, ...] = ()
    numa: tuple[NumaNode, ...] = ()

    def cpus_of(self, numa_node: int | None) -> tuple[int, ...]:
        """The CPUs of a NUMA node (none if it is None or unknown here)."""
        return next((n.cpus for n in self.numa if n.node == numa_node), ())


def host_cpu_milli() -> int:
    """CPUs this process may use (its affinity honours cpusets), in milli-CPU."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        count = os.cpu_count() or 1
    return count * CPU_QUANTUM


def host_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024  # the kernel writes kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value  # bytes < 11.x


def discover_gpus(nvml: Nvml | None = None, pci_root: Path = PCI_ROOT) -> tuple[DeviceInfo, ...]:
    """Every NVIDIA GPU NVML reports; none (said once, clearly) when there is no driver.
    ``pci_root``: where sysfs lists PCI devices (for the NUMA node when NVML cannot say)."""
    global _no_driver_said
    nvml = nvml if nvml is not None else load_nvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        if not _no_driver_said:
            _no_driver_said = True
            log.warning(
                "no NVIDIA driver found (%s: %s): this node offers no GPUs", type(exc).__name__, exc
            )
        return ()
    devices: list[DeviceInfo] = []
    try:
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                devices.append(
                    DeviceInfo(
                        kind="cuda",
                        index=index,
                        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                        name=_text(nvml.nvmlDeviceGetName(handle))[:128],
                        memory_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                        numa_node=_numa_node(nvml, handle, pci_root),
                        mig_enabled=_mig_enabled(nvml, handle),
                    )
                )
            except nvml.NVMLError as exc:
                # One broken device (fallen off the bus) must not hide the healthy ones.
                log.error("GPU %d is not usable and is left out: %s", index, exc)
    except nvml.NVMLError as exc:
        log.error("cannot count GPUs (%s): this node offers no GPUs", exc)
        return ()
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError as exc:
            log.warning("nvmlShutdown failed: %s", exc)
    return tuple(devices)


def _numa_node(nvml: Nvml, handle: object, pci_root: Path) -> int | None:
    """NVML's answer when it has one, else sysfs by PCI bus id; None when neither knows."""
    ask = cast(Callable[[object], int] | None, getattr(nvml, "nvmlDeviceGetNumaNodeId", None))
    if ask is not None:
        try:
            node = int(ask(handle))
        except nvml.NVMLError:
            pass  # an older driver: sysfs knows too
        else:
            return node if node >= 0 else None
    try:
        bus_id = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
    except nvml.NVMLError as exc:
        log.warning("no PCI bus id for a GPU (%s): its NUMA node is unknown", exc)
        return None
    return pci_numa_node(bus_id, pci_root)


def _mig_enabled(nvml: Nvml, handle: object) -> bool:
    """MIG mode is on now (a pending change counts after the reset that applies it). A GPU
    without MIG, or a driver before MIG, answers "not supported"/"no such function": off.
    Any other error propagates: the device is broken and left out."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound):
        return False
    return int(current) == MIG_ENABLE


def discover(
    *,
    nvml: Nvml | None = None,
    gpus: bool = True,
    cpu: Decimal | None = None,
    memory_bytes: int | None = None,
    node_root: Path = NODE_ROOT,
    pci_root: Path = PCI_ROOT,
) -> Capacity:
    """The machine's capacity; ``cpu`` and ``memory_bytes`` override what is found (to keep
    some for the system, or to shape simulated machines). ``gpus=False`` skips NVML.
    ``node_root``/``pci_root``: the sysfs trees read for the NUMA layout (tests hand in
    their own)."""
    devices = discover_gpus(nvml, pci_root) if gpus else ()
    slots = _slots(cpu, memory_bytes, len(devices))
    return Capacity(slots=slots, devices=devices, numa=numa_nodes(node_root))


def _slots(cpu: Decimal | None, memory_bytes: int | None, gpus: int) -> ResourceSlots:
    return ResourceSlots(
        cpu_milli=int(cpu * CPU_QUANTUM) if cpu is not None else host_cpu_milli(),
        memory_bytes=memory_bytes if memory_bytes is not None else host_memory_bytes(),
        gpu_hundredths=gpus * GPU_QUANTUM,
    )


def simulated_capacity(
    node_id: str, gpus: int, cpu: Decimal | None, memory_bytes: int | None
) -> Capacity:
    """A simulated machine: the host's CPU and memory unless overridden, and ``gpus`` made-up
    80 GiB devices (uuids unique per node and index). With two GPUs or more it is a made-up
    two-socket machine: the first half of the GPUs and CPUs on NUMA node 0, the rest on 1.
    Neither NVML nor sysfs is asked."""
    slots = _slots(cpu, memory_bytes, gpus)
    two_sockets = gpus >= 2
    per_socket = -(-gpus // 2)  # GPUs on node 0 (the larger half)
    devices = tuple(
        DeviceInfo(
            kind="cuda",
            index=i,
            uuid=f"GPU-sim-{node_id}-{i}",
            name="simulated GPU",
            memory_bytes=SIMULATED_GPU_MEMORY,
            numa_node=(0 if i < per_socket else 1) if two_sockets else None,
        )
        for i in range(gpus)
    )
    cpus = max(2, slots.cpu_milli // CPU_QUANTUM)
    numa = (
        (NumaNode(node=0, cpus=tuple(range(cpus // 2))),
         NumaNode(node=1, cpus=tuple(range(cpus // 2, cpus))))
        if two_sockets else ()
    )  # fmt: skip
    return Capacity(slots=slots, devices=devices, numa=numa)
