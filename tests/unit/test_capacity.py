"""Capacity discovery: CPU and memory from the host, GPUs through NVML, with a fake pynvml at
the library boundary (same functions and error classes as nvidia-ml-py)."""

# The fake mirrors pynvml's names.
# ruff: noqa: N802

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from schemas.devices import DeviceInfo, NumaNode
from services.node import capacity
from services.node.capacity import (
    discover,
    discover_gpus,
    host_memory_bytes,
    simulated_capacity,
)
from services.node.nvml import load_nvml
from services.node.topology import format_cpulist, numa_nodes, parse_cpulist

GIB = 1 << 30


class FakeNVMLError(Exception):
    pass


class FakeLibraryNotFoundError(FakeNVMLError):
    def __str__(self) -> str:
        return "NVML Shared Library Not Found"


class FakeNotSupportedError(FakeNVMLError):
    pass


class FakeFunctionNotFoundError(FakeNVMLError):
    pass


@dataclass(frozen=True)
class FakeMemory:
    total: int
    free: int
    used: int


@dataclass(frozen=True)
class FakePci:
    busId: str  # noqa: N815 (pynvml's name)


@dataclass(frozen=True)
class FakeGpu:
    uuid: str
    name: str
    memory: int
    numa: int | None = None
    """What nvmlDeviceGetNumaNodeId answers; None: it raises NotSupported."""
    bus_id: str = "00000000:3B:00.0"
    mig: bool | None = False
    """MIG mode now; None: the GPU has no MIG (NotSupported)."""


class FakeNvml:
    """pynvml with GPUs, or (``gpus=None``) without a driver: nvmlInit raises."""

    NVMLError: type[Exception] = FakeNVMLError
    NVMLError_NotSupported: type[Exception] = FakeNotSupportedError
    NVMLError_FunctionNotFound: type[Exception] = FakeFunctionNotFoundError

    def __init__(self, gpus: list[FakeGpu] | None) -> None:
        self.gpus = gpus
        self.initialised = False
        self.shut_down = False

    def nvmlInit(self) -> None:
        if self.gpus is None:
            raise FakeLibraryNotFoundError()
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def _ready(self) -> list[FakeGpu]:
        if not self.initialised or self.gpus is None:
            raise FakeNVMLError("Uninitialized")
        return self.gpus

    def nvmlDeviceGetCount(self) -> int:
        return len(self._ready())

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        return self._ready()[index]

    def nvmlDeviceGetUUID(self, handle: object) -> str:
        assert isinstance(handle, FakeGpu)
        return handle.uuid

    def nvmlDeviceGetName(self, handle: object) -> bytes:
        assert isinstance(handle, FakeGpu)
        return handle.name.encode()  # older nvidia-ml-py answers bytes

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> FakeMemory:
        assert isinstance(handle, FakeGpu)
        return FakeMemory(total=handle.memory, free=handle.memory, used=0)

    def nvmlDeviceGetNumaNodeId(self, handle: object) -> int:
        assert isinstance(handle, FakeGpu)
        if handle.numa is None:
            raise FakeNotSupportedError("Not Supported")
        return handle.numa

    def nvmlDeviceGetPciInfo(self, handle: object) -> FakePci:
        assert isinstance(handle, FakeGpu)
        return FakePci(handle.bus_id)

    def nvmlDeviceGetMigMode(self, handle: object) -> list[int]:
        assert isinstance(handle, FakeGpu)
        if handle.mig is None:
            raise FakeNotSupportedError("Not Supported")
        return [int(handle.mig), int(handle.mig)]


class OlderNvml(FakeNvml):
    """A module without nvmlDeviceGetNumaNodeId: the NUMA node comes from sysfs."""

    def __getattribute__(self, name: str) -> object:
        if name == "nvmlDeviceGetNumaNodeId":
            raise AttributeError(name)
        return super().__getattribute__(name)


TWO_GPUS = [
    FakeGpu("GPU-11111111-aaaa", "NVIDIA H100 80GB HBM3", 80 * GIB),
    FakeGpu("GPU-22222222-bbbb", "NVIDIA A10", 24 * GIB),
]


@pytest.fixture(autouse=True)
def said_nothing_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    # "Said once" is per process; each test starts as a fresh process would.
    monkeypatch.setattr(capacity, "_no_driver_said", False)


def test_two_gpus_become_two_devices_and_two_whole_gpus_of_capacity(tmp_path: Path) -> None:
    nvml = FakeNvml(TWO_GPUS)

    found = discover(nvml=nvml, cpu=None, memory_bytes=64 * GIB, pci_root=tmp_path)

    assert found.devices == (
        DeviceInfo(
            kind="cuda",
            index=0,
            uuid="GPU-11111111-aaaa",
            name="NVIDIA H100 80GB HBM3",
            memory_bytes=80 * GIB,
        ),
        DeviceInfo(
            kind="cuda", index=1, uuid="GPU-22222222-bbbb", name="NVIDIA A10", memory_bytes=24 * GIB
        ),
    )
    assert found.slots.gpu_hundredths == 200
    assert found.slots.memory_bytes == 64 * GIB
    assert found.slots.cpu_milli >= 1000
    assert nvml.shut_down


def test_without_a_driver_there_are_no_gpus_and_it_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="services.node.capacity")
    nvml = FakeNvml(None)

    first = discover(nvml=nvml)
    again = discover_gpus(nvml)

    assert (first.devices, first.slots.gpu_hundredths, again) == ((), 0, ())
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "no NVIDIA driver found (FakeLibraryNotFoundError: NVML Shared Library Not Found): "
        "this node offers no GPUs"
    ]


def test_the_real_library_finds_the_gpus_the_driver_has(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The real nvidia-ml-py: without a driver nvmlInit fails cleanly and the node offers no
    GPUs; with one, every device the driver counts is discovered."""
    real = load_nvml()
    try:
        real.nvmlInit()
    except real.NVMLError:
        driver_devices = 0
    else:
        driver_devices = real.nvmlDeviceGetCount()
        real.nvmlShutdown()
    caplog.set_level(logging.WARNING, logger="services.node.capacity")

    found = discover_gpus()

    assert len(found) == driver_devices
    if driver_devices == 0:
        assert "this node offers no GPUs" in caplog.text


def test_one_broken_gpu_leaves_the_others() -> None:
    class OneBroken(FakeNvml):
        def nvmlDeviceGetUUID(self, handle: object) -> str:
            if handle is self._ready()[0]:
                raise FakeNVMLError("GPU is lost")
            return super().nvmlDeviceGetUUID(handle)

    found = discover_gpus(OneBroken(TWO_GPUS))

    assert [d.uuid for d in found] == ["GPU-22222222-bbbb"]
    assert found[0].index == 1


def test_memory_comes_from_meminfo_in_kibibytes(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384 kB\nMemFree:        1024 kB\n")

    assert host_memory_bytes(meminfo) == 16 * 1024 * 1024
    assert host_memory_bytes(tmp_path / "missing") > 0  # falls back to sysconf


# ---- NUMA node and MIG mode per device ----------------------------------------------------


def pci_tree(root: Path, numa_of: dict[str, str]) -> Path:
    """A fake /sys/bus/pci/devices: one directory per device (Linux's 4-digit domain form)."""
    for name, numa in numa_of.items():
        (root / name).mkdir(parents=True)
        (root / name / "numa_node").write_text(f"{numa}\n")
    return root


def gpu(
    uuid: str,
    *,
    numa: int | None = None,
    bus_id: str = "00000000:3B:00.0",
    mig: bool | None = False,
) -> FakeGpu:
    return FakeGpu(uuid, "NVIDIA H100", 80 * GIB, numa=numa, bus_id=bus_id, mig=mig)


def test_the_numa_node_comes_from_nvml_when_it_can_say(tmp_path: Path) -> None:
    nvml = FakeNvml([gpu("GPU-a", numa=1), gpu("GPU-b", numa=-1)])

    found = discover_gpus(nvml, pci_root=pci_tree(tmp_path, {"0000:3b:00.0": "0"}))

    assert [d.numa_node for d in found] == [1, None]  # NVML's answer wins; -1 is "none"


@pytest.mark.parametrize("nvml_class", [FakeNvml, OlderNvml], ids=["not-supported", "absent"])
def test_the_numa_node_comes_from_sysfs_by_pci_bus_id_otherwise(
    tmp_path: Path, nvml_class: type[FakeNvml]
) -> None:
    tree = pci_tree(tmp_path, {"0000:3b:00.0": "1", "0000:86:00.0": "-1"})
    gpus = [
        gpu("GPU-a", bus_id="00000000:3B:00.0"),
        gpu("GPU-b", bus_id="00000000:86:00.0"),
        gpu("GPU-c", bus_id="00000000:AF:00.0"),  # not in sysfs
    ]

    found = discover_gpus(nvml_class(gpus), pci_root=tree)

    assert [(d.uuid, d.numa_node) for d in found] == [
        ("GPU-a", 1),
        ("GPU-b", None),
        ("GPU-c", None),
    ]


def test_a_sysfs_tree_with_8_digit_domains_is_read_too(tmp_path: Path) -> None:
    tree = pci_tree(tmp_path, {"00000000:3b:00.0": "1"})

    found = discover_gpus(OlderNvml([gpu("GPU-a")]), pci_root=tree)

    assert found[0].numa_node == 1


@pytest.mark.parametrize(("mig", "enabled"), [(True, True), (False, False), (None, False)],
                         ids=["on", "off", "not-supported"])  # fmt: skip
def test_mig_mode_is_reported_per_device(tmp_path: Path, mig: bool | None, enabled: bool) -> None:
    found = discover_gpus(FakeNvml([gpu("GPU-a", mig=mig)]), pci_root=tmp_path)

    assert found[0].mig_enabled is enabled


def test_a_driver_without_mig_queries_reports_mig_off(tmp_path: Path) -> None:
    class BeforeMig(FakeNvml):
        def nvmlDeviceGetMigMode(self, handle: object) -> list[int]:
            raise FakeFunctionNotFoundError("Function Not Found")

    found = discover_gpus(BeforeMig([gpu("GPU-a")]), pci_root=tmp_path)

    assert [(d.uuid, d.mig_enabled) for d in found] == [("GPU-a", False)]


def test_a_device_that_errors_on_mig_is_left_out_and_one_without_numa_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Faulty(FakeNvml):
        def nvmlDeviceGetMigMode(self, handle: object) -> list[int]:
            if handle is self._ready()[0]:
                raise FakeNVMLError("Unknown Error")
            return super().nvmlDeviceGetMigMode(handle)

        def nvmlDeviceGetPciInfo(self, handle: object) -> FakePci:
            raise FakeNVMLError("GPU is lost")

    caplog.set_level(logging.WARNING, logger="services.node.capacity")

    found = discover_gpus(Faulty([gpu("GPU-a"), gpu("GPU-b")]), pci_root=tmp_path)

    assert [(d.uuid, d.numa_node) for d in found] == [("GPU-b", None)]
    assert "GPU 0 is not usable and is left out: Unknown Error" in caplog.text
    assert "its NUMA node is unknown" in caplog.text


# ---- the CPUs of each NUMA node -----------------------------------------------------------


def node_tree(root: Path, cpulists: dict[str, str]) -> Path:
    for name, cpulist in cpulists.items():
        (root / name).mkdir(parents=True)
        (root / name / "cpulist").write_text(f"{cpulist}\n")
    (root / "possible").write_text("0-2\n")  # a file beside the nodes, not a node
    return root


def test_numa_nodes_and_their_cpus_come_from_sysfs(tmp_path: Path) -> None:
    tree = node_tree(tmp_path, {"node1": "4-7,12-15", "node0": "0-3,8-11", "node2": ""})

    found = discover(gpus=False, node_root=tree)

    assert found.numa == (
        NumaNode(node=0, cpus=(0, 1, 2, 3, 8, 9, 10, 11)),
        NumaNode(node=1, cpus=(4, 5, 6, 7, 12, 13, 14, 15)),
    )  # node2 has memory only: nothing to pin to
    assert found.cpus_of(1) == (4, 5, 6, 7, 12, 13, 14, 15)
    assert found.cpus_of(None) == found.cpus_of(9) == ()


def test_a_machine_without_the_numa_tree_reports_no_numa(tmp_path: Path) -> None:
    assert numa_nodes(tmp_path / "missing") == ()


@pytest.mark.parametrize(
    ("text", "cpus", "folded"),
    [("0-3,8-11\n", (0, 1, 2, 3, 8, 9, 10, 11), "0-3,8-11"), ("5", (5,), "5"), ("", (), ""),
     ("0,2,3,4", (0, 2, 3, 4), "0,2-4")],
)  # fmt: skip
def test_cpu_lists_parse_and_fold(text: str, cpus: tuple[int, ...], folded: str) -> None:
    assert parse_cpulist(text) == cpus
    assert format_cpulist(cpus) == folded


def test_a_simulated_machine_splits_its_gpus_and_cpus_over_two_numa_nodes() -> None:
    found = simulated_capacity("n1", 8, cpu=None, memory_bytes=GIB)

    assert [d.numa_node for d in found.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [n.node for n in found.numa] == [0, 1]
    assert set(found.numa[0].cpus).isdisjoint(found.numa[1].cpus)
    assert all(n.cpus for n in found.numa)
    assert found.slots.gpu_hundredths == 800
    assert found.devices[0].memory_bytes == 80 * GIB


def test_a_simulated_machine_with_one_gpu_reports_no_numa() -> None:
    found = simulated_capacity("n1", 1, cpu=None, memory_bytes=GIB)

    assert (found.numa, found.devices[0].numa_node) == ((), None)
