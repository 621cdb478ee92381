"""The NVML boundary: the few nvidia-ml-py (``pynvml``) calls the agent makes, as a protocol so
that tests can hand in a fake module. Reads and writes no subjects."""

# The names mirror the C library's, as pynvml spells them.
# ruff: noqa: N802

from __future__ import annotations

import importlib
from typing import Protocol, cast

MIG_ENABLE = 1
"""``NVML_DEVICE_MIG_ENABLE``: the current mode ``nvmlDeviceGetMigMode`` answers when MIG is on."""


class MemoryInfo(Protocol):
    @property
    def total(self) -> int: ...


class PciInfo(Protocol):
    @property
    def busId(self) -> str | bytes:
        """``"00000000:3B:00.0"`` (bytes in nvidia-ml-py before 11.x)."""
        ...


class Utilization(Protocol):
    @property
    def gpu(self) -> int:
        """Percent of the last sample period (1/6 s to 1 s) in which a kernel ran on the GPU."""
        ...


class Nvml(Protocol):
    @property
    def NVMLError(self) -> type[Exception]:
        """Base of every NVML error (``NVMLError_LibraryNotFound``, ``..._DriverNotLoaded``)."""
        ...

    @property
    def NVMLError_NotSupported(self) -> type[Exception]:
        """The device cannot answer this query (e.g. MIG mode on a GPU without MIG)."""
        ...

    @property
    def NVMLError_FunctionNotFound(self) -> type[Exception]:
        """The driver predates the function (e.g. MIG queries before R450)."""
        ...

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int: ...

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...

    def nvmlDeviceGetUUID(self, handle: object) -> str | bytes: ...

    def nvmlDeviceGetName(self, handle: object) -> str | bytes: ...

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> MemoryInfo: ...

    def nvmlDeviceGetPciInfo(self, handle: object) -> PciInfo: ...

    def nvmlDeviceGetMigMode(self, handle: object) -> tuple[int, int] | list[int]:
        """(current, pending) MIG mode."""
        ...

    # ``nvmlDeviceGetNumaNodeId(handle) -> int`` is used when the module has it (the installed
    # nvidia-ml-py does); an older module or driver may not, and then sysfs answers.


class NvmlUse(Protocol):
    """The calls that read how busy a GPU is (``services.node.utilisation``)."""

    @property
    def NVMLError(self) -> type[Exception]: ...

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> object: ...

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Utilization: ...


def load_nvml_use() -> NvmlUse:
    """The real library, for utilisation (see ``load_nvml``)."""
    return cast(NvmlUse, importlib.import_module("pynvml"))


def load_nvml() -> Nvml:
    """The real library. Importing it is always safe: it loads ``libnvidia-ml.so.1`` only in
    ``nvmlInit``, which raises ``NVMLError_LibraryNotFound`` on a machine without a driver."""
    return cast(Nvml, importlib.import_module("pynvml"))
