"""Capacity discovery: CPU and memory from the host, GPUs through NVML, with a fake pynvml at
the library boundary (same functions and error classes as nvidia-ml-py)."""

# The fake mirrors pynvml's names.
# ruff: noqa: N802

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from schemas.devices import DeviceInfo
from services.node import capacity
from services.node.capacity import discover, discover_gpus, host_memory_bytes
from services.node.nvml import load_nvml

GIB = 1 << 30


class FakeNVMLError(Exception):
    pass


class FakeLibraryNotFoundError(FakeNVMLError):
    def __str__(self) -> str:
        return "NVML Shared Library Not Found"


@dataclass(frozen=True)
class FakeMemory:
    total: int
    free: int
    used: int


@dataclass(frozen=True)
class FakeGpu:
    uuid: str
    name: str
    memory: int


class FakeNvml:
    """pynvml with GPUs, or (``gpus=None``) without a driver: nvmlInit raises."""

    NVMLError: type[Exception] = FakeNVMLError

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


TWO_GPUS = [
    FakeGpu("GPU-11111111-aaaa", "NVIDIA H100 80GB HBM3", 80 * GIB),
    FakeGpu("GPU-22222222-bbbb", "NVIDIA A10", 24 * GIB),
]


@pytest.fixture(autouse=True)
def said_nothing_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    # "Said once" is per process; each test starts as a fresh process would.
    monkeypatch.setattr(capacity, "_no_driver_said", False)


def test_two_gpus_become_two_devices_and_two_whole_gpus_of_capacity() -> None:
    nvml = FakeNvml(TWO_GPUS)

    found = discover(nvml=nvml, cpu=None, memory_bytes=64 * GIB)

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
