"""The agent's activity reports, which the scheduler's idle timeout reads: every
``activity_interval_s`` the kernels that printed (noted by ``services.node.output``) or used
their CPUs or GPUs (sampled by ``services.node.utilisation``) since the last report are written
on ``ev.activity.<node id>`` (``commands.activity_reports``), only for kernels that still run
here as the agent's aggregate says. Writes that subject only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

from commands.activity_reports import ActivityReports
from events.writes import Store
from services.node.backend import Backend
from services.node.ledger import Ledger
from services.node.nvml import load_nvml_use
from services.node.record import AGENT_ACTOR, AgentRecord
from services.node.utilisation import SAMPLE_S, GpuUse, Sampled, UtilisationSampler


class AgentActivity:
    def __init__(
        self,
        store: Store,
        backend: Backend,
        record: AgentRecord,
        ledger: Ledger,
        *,
        interval_s: float,
    ) -> None:
        self.reports = ActivityReports(store, backend.node_id, AGENT_ACTOR)
        self._record = record
        self._ledger = ledger
        self._interval_s = interval_s
        # GPU use is read through NVML on Docker only (a simulated machine's GPUs are not real).
        self._gpus = GpuUse(load_nvml_use()) if backend.name == "docker" else None
        self._sampler = UtilisationSampler(backend, self.reports, self._gpus)

    def loops(self, clock: Callable[[], datetime]) -> list[Coroutine[Any, Any, None]]:
        """What runs while the agent does: the reports and the utilisation samples."""
        return [
            self.reports.run(self._interval_s, clock, self._running),
            self._sampler.run(min(self._interval_s, SAMPLE_S), self._sampled),
        ]

    async def close(self) -> None:
        if self._gpus is not None:
            await asyncio.to_thread(self._gpus.close)

    def _sampled(self) -> list[Sampled]:
        """The kernels running here, with what they were allocated."""
        allocations = self._ledger.allocations
        found = []
        for kernel_id, running in self._record.running.items():
            allocation = allocations.get(kernel_id)
            if allocation is not None:
                cpus = allocation.slots.cpu_milli / 1000
                gpus = tuple(d.uuid for d in allocation.devices)
                found.append(
                    Sampled(kernel_id, running.session_id, running.container_id, cpus, gpus)
                )
        return found

    def _running(self, session_id: str, kernel_id: str | None) -> bool:
        """Whether the kernel still runs here as the log says (only those are reported)."""
        known = self._record.running.get(kernel_id or "")
        return known is not None and known.session_id == session_id
