"""The NVML boundary: the few nvidia-ml-py (``pynvml``) calls the agent makes, as a protocol so
that tests can hand in a fake module. Reads and writes no subjects."""

# The names mirror the C library's, as pynvml spells them.
# ruff: noqa: N802

from __future__ import annotations

import importlib
from typing import Protocol, cast


class MemoryInfo(Protocol):
    @property
    def total(self) -> int: ...


class Nvml(Protocol):
    @property
    def NVMLError(self) -> type[Exception]:
        """Base of every NVML error (``NVMLError_LibraryNotFound``, ``..._DriverNotLoaded``)."""
        ...

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int: ...

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...

    def nvmlDeviceGetUUID(self, handle: object) -> str | bytes: ...

    def nvmlDeviceGetName(self, handle: object) -> str | bytes: ...

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> MemoryInfo: ...


def load_nvml() -> Nvml:
    """The real library. Importing it is always safe: it loads ``libnvidia-ml.so.1`` only in
    ``nvmlInit``, which raises ``NVMLError_LibraryNotFound`` on a machine without a driver."""
    return cast(Nvml, importlib.import_module("pynvml"))
