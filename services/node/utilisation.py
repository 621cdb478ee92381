"""Utilisation as activity: every sample period, each running kernel's CPU use since the last
sample (the backend's CPU time, in percent of the CPUs it was allocated) and its GPUs' use now
(NVML, the busiest of its devices; a shared device's use is everyone's on it) are noted in the
agent's activity reports (``commands.activity_reports``) when at least ``BUSY_FLOOR_PCT``: an
idle kernel notes nothing. The reports say the interval's highest; the scheduler compares them
with the owner's policy threshold. Reads and writes no subjects itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from commands.activity_reports import ActivityReports
from events.cancelling import cancelling
from schemas.activity import BUSY_FLOOR_PCT, ActivitySource
from services.node.backend import Backend
from services.node.nvml import NvmlUse

log = logging.getLogger(__name__)

SAMPLE_S = 10.0
"""The longest sample period: CPU use is averaged over it, GPU use read once in it."""


@dataclass(frozen=True, slots=True)
class Sampled:
    """A running kernel as the sampler needs it."""

    kernel_id: str
    session_id: str
    container_id: str
    cpus: float
    """The CPUs it was allocated (100% = all of them busy)."""
    gpus: tuple[str, ...] = ()
    """The uuids of the GPUs it holds (whole or a share)."""


class GpuUse:
    """Each GPU's utilisation now, through NVML: none without a driver (said once)."""

    def __init__(self, nvml: NvmlUse) -> None:
        self._nvml = nvml
        self._ready: bool | None = None

    def percent(self, uuids: Sequence[str]) -> float | None:
        """The busiest of these devices' utilisation; None when NVML cannot say."""
        nvml = self._nvml
        if self._ready is None:
            try:
                nvml.nvmlInit()
                self._ready = True
            except nvml.NVMLError as exc:
                log.info("no GPU utilisation to report (%s)", exc)
                self._ready = False
        if not self._ready:
            return None
        found: list[float] = []
        for uuid in uuids:
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
                found.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except nvml.NVMLError:
                continue  # a simulated device, or one gone: nothing to say about it
        return max(found, default=None)

    def close(self) -> None:
        if self._ready:
            self._ready = None
            self._nvml.nvmlShutdown()


class UtilisationSampler:
    def __init__(self, backend: Backend, reports: ActivityReports, gpus: GpuUse | None) -> None:
        self._backend = backend
        self._reports = reports
        self._gpus = gpus
        self._last: dict[str, tuple[float, float]] = {}
        """Kernel id -> (monotonic time, CPU seconds) of its last sample."""

    async def sample(self, kernels: Sequence[Sampled], wall: float, mono: float) -> None:
        """One sample of ``kernels`` taken at ``wall`` (epoch seconds) / ``mono``."""
        # The engine is asked for every kernel at once; NVML is read in one thread.
        used = await asyncio.gather(*(self._backend.cpu_seconds(k.container_id) for k in kernels))
        busy = await self._gpu_use(kernels)
        last, self._last = self._last, {}  # kernels gone since are forgotten
        for kernel, cpu, gpu in zip(kernels, used, busy, strict=True):
            before = last.get(kernel.kernel_id)
            if cpu is not None:
                self._last[kernel.kernel_id] = (mono, cpu)
            if cpu is not None and before is not None and mono > before[0] and kernel.cpus > 0:
                pct = 100.0 * (cpu - before[1]) / ((mono - before[0]) * kernel.cpus)
                self._note(kernel, ActivitySource.CPU, wall, pct)
            if gpu is not None:
                self._note(kernel, ActivitySource.GPU, wall, gpu)

    async def _gpu_use(self, kernels: Sequence[Sampled]) -> list[float | None]:
        """Each kernel's GPU use now (None: it holds none, or NVML cannot say)."""
        gpus = self._gpus
        if gpus is None or not any(k.gpus for k in kernels):
            return [None] * len(kernels)
        return await asyncio.to_thread(lambda: [gpus.percent(k.gpus) for k in kernels])

    def _note(self, kernel: Sampled, source: ActivitySource, wall: float, pct: float) -> None:
        if pct >= BUSY_FLOOR_PCT:
            self._reports.note_use(kernel.session_id, kernel.kernel_id, source, wall, pct)

    async def run(self, period_s: float, kernels: Callable[[], Sequence[Sampled]]) -> None:
        """Sample every ``period_s`` until cancelled; a failed sample is logged and skipped."""
        while not cancelling():
            try:
                await self.sample(kernels(), time.time(), time.monotonic())
            except Exception as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                log.warning("sampling utilisation failed: %r", exc)
            await asyncio.sleep(period_s)
