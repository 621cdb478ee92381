"""Utilisation sampling with a fake engine and a fake NVML: CPU use is the CPU time between two
samples over the CPUs allocated; GPU use is the busiest of the kernel's devices; use under the
floor is not noted, and the report carries the interval's highest."""

from __future__ import annotations

# The fake mirrors pynvml's names.
# ruff: noqa: N802
from dataclasses import dataclass, field
from datetime import UTC, datetime

from commands.activity_reports import ActivityReports
from events.catalogue import CATALOGUE
from events.domain.activity import SessionActivityReported
from events.memory import InMemoryStore
from schemas.activity import ActivitySource
from schemas.principal import Actor
from services.node.backend_simulated import SimulatedBackend
from services.node.utilisation import GpuUse, Sampled, UtilisationSampler

CPU, GPU = ActivitySource.CPU, ActivitySource.GPU


class Engine(SimulatedBackend):
    """CPU seconds set by the test (``None``: the engine cannot say)."""

    def __init__(self) -> None:
        super().__init__("node-1", [])
        self.used: dict[str, float | None] = {}

    async def cpu_seconds(self, container_id: str) -> float | None:
        return self.used.get(container_id)


@dataclass
class Rates:
    gpu: int


class NvmlError(Exception):
    pass


@dataclass
class FakeNvml:
    busy: dict[str, int] = field(default_factory=dict)
    inits: int = 0

    @property
    def NVMLError(self) -> type[Exception]:
        return NvmlError

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> object:
        if uuid not in self.busy:
            raise NvmlError(f"no device {uuid!r}")
        return uuid

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Rates:
        return Rates(self.busy[str(handle)])


def written(store: InMemoryStore) -> dict[tuple[str, ActivitySource], float | None]:
    found = {}
    for stored in store.events():
        event = CATALOGUE.decode(stored.envelope)
        assert isinstance(event, SessionActivityReported)
        for report in event.reports:
            assert report.kernel_id is not None
            found[(report.kernel_id, report.source)] = report.utilization_pct
    return found


def kernel(name: str, cpus: float, gpus: tuple[str, ...] = ()) -> Sampled:
    return Sampled(name, f"s-{name}", f"c-{name}", cpus, gpus)


NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


async def test_cpu_use_is_the_time_used_between_samples_over_the_cpus_allocated() -> None:
    engine, store = Engine(), InMemoryStore()
    reports = ActivityReports(store, "node-1", Actor.service("agent"))
    sampler = UtilisationSampler(engine, reports, None)
    half, two, idle = kernel("half", 0.5), kernel("two", 2), kernel("idle", 1)
    kernels = [half, two, idle]
    engine.used = {"c-half": 10.0, "c-two": 100.0, "c-idle": 5.0}
    await sampler.sample(kernels, NOW.timestamp(), 1000.0)
    assert reports.pending == 0  # one sample says nothing yet
    engine.used = {"c-half": 13.0, "c-two": 101.0, "c-idle": 5.05}  # 10 s later

    await sampler.sample(kernels, NOW.timestamp() + 10, 1010.0)
    engine.used = {"c-half": 14.0, "c-two": 102.0, "c-idle": 5.1}
    await sampler.sample(kernels, NOW.timestamp() + 20, 1020.0)
    await reports.flush(NOW)

    # half: 3 s of CPU in 10 s on 0.5 CPU is 60%, then 20%; two: 1 s in 10 s on 2 CPUs is
    # 5%; idle: 0.5% each time, under the floor.
    assert written(store) == {("half", CPU): 60.0, ("two", CPU): 5.0}


async def test_a_kernel_the_engine_cannot_measure_is_skipped() -> None:
    engine = Engine()
    reports = ActivityReports(InMemoryStore(), "node-1", Actor.service("agent"))
    sampler = UtilisationSampler(engine, reports, None)
    await sampler.sample([kernel("gone", 1)], NOW.timestamp(), 0.0)
    await sampler.sample([kernel("gone", 1)], NOW.timestamp() + 1, 1.0)

    assert reports.pending == 0


async def test_gpu_use_is_the_busiest_of_the_kernels_devices() -> None:
    engine, store, nvml = Engine(), InMemoryStore(), FakeNvml({"GPU-a": 3, "GPU-b": 40})
    gpus = GpuUse(nvml)
    reports = ActivityReports(store, "node-1", Actor.service("agent"))
    sampler = UtilisationSampler(engine, reports, gpus)
    both = kernel("both", 1, ("GPU-a", "GPU-b"))
    quiet = kernel("quiet", 1, ("GPU-a",))
    unknown = kernel("sim", 1, ("GPU-simulated",))

    await sampler.sample([both, quiet, unknown], NOW.timestamp(), 0.0)
    nvml.busy["GPU-a"] = 0
    await reports.flush(NOW)

    assert written(store) == {("both", GPU): 40.0, ("quiet", GPU): 3.0}
    gpus.close()
    assert nvml.inits == 0


async def test_no_driver_means_no_gpu_use_and_nothing_else_changes() -> None:
    class NoDriver(FakeNvml):
        def nvmlInit(self) -> None:
            raise NvmlError("NVML Shared Library Not Found")

    gpus = GpuUse(NoDriver())

    assert gpus.percent(["GPU-a"]) is None
    gpus.close()
