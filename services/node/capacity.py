"""What this machine offers: CPU, memory, and NVIDIA GPUs through NVML (none without a driver).
Reads and writes no subjects."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from schemas.devices import DeviceInfo
from schemas.resources import CPU_QUANTUM, GPU_QUANTUM, ResourceSlots
from services.node.nvml import Nvml, load_nvml

log = logging.getLogger(__name__)

# Said once per process: a process may hold many agents (scale tests) or re-discover often.
_no_driver_said = False


@dataclass(frozen=True, slots=True)
class Capacity:
    slots: ResourceSlots
    devices: tuple[DeviceInfo, ...] = ()


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


def discover_gpus(nvml: Nvml | None = None) -> tuple[DeviceInfo, ...]:
    """Every NVIDIA GPU NVML reports; none (said once, clearly) when there is no driver."""
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


def discover(
    *,
    nvml: Nvml | None = None,
    gpus: bool = True,
    cpu: Decimal | None = None,
    memory_bytes: int | None = None,
) -> Capacity:
    """The machine's capacity; ``cpu`` and ``memory_bytes`` override what is found (to keep
    some for the system, or to shape simulated machines). ``gpus=False`` skips NVML."""
    devices = discover_gpus(nvml) if gpus else ()
    slots = ResourceSlots(
        cpu_milli=int(cpu * CPU_QUANTUM) if cpu is not None else host_cpu_milli(),
        memory_bytes=memory_bytes if memory_bytes is not None else host_memory_bytes(),
        gpu_hundredths=len(devices) * GPU_QUANTUM,
    )
    return Capacity(slots=slots, devices=devices)


def simulated_capacity(
    node_id: str, gpus: int, cpu: Decimal | None, memory_bytes: int | None
) -> Capacity:
    """A simulated machine: the host's CPU and memory unless overridden, and ``gpus`` made-up
    devices (uuids unique per node and index). NVML is not asked."""
    devices = tuple(
        DeviceInfo(kind="cuda", index=i, uuid=f"GPU-sim-{node_id}-{i}", name="simulated GPU")
        for i in range(gpus)
    )
    found = discover(gpus=False, cpu=cpu, memory_bytes=memory_bytes)
    slots = found.slots.model_copy(update={"gpu_hundredths": GPU_QUANTUM * len(devices)})
    return Capacity(slots=slots, devices=devices)
