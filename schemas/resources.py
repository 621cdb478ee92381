"""Resource quantities in integer quanta: milli-CPU, bytes, 1/100 GPU. Decimal only at the edges."""

from __future__ import annotations

from decimal import Decimal
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

GPU_QUANTUM = 100  # a GPU share is counted in hundredths
CPU_QUANTUM = 1000  # a CPU is counted in milli-CPU


class ResourceSlots(BaseModel):
    """An amount of compute: used for requests, capacities and allocations alike.

    Integers keep comparisons and sums exact and cheap in the scheduler's hot loop.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    cpu_milli: int = Field(default=0, ge=0, description="CPU in thousandths of a core")
    memory_bytes: int = Field(default=0, ge=0)
    gpu_hundredths: int = Field(default=0, ge=0, description="GPU in hundredths of a device")

    @classmethod
    def of(
        cls, *, cpu: Decimal | int | str = 0, memory: int = 0, gpu: Decimal | int | str = 0
    ) -> Self:
        """Build from human units (cores, bytes, devices); rejects finer than the quantum."""
        cpu_q = Decimal(cpu) * CPU_QUANTUM
        gpu_q = Decimal(gpu) * GPU_QUANTUM
        if cpu_q != cpu_q.to_integral_value():
            raise ValueError(f"cpu {cpu} is finer than 1/{CPU_QUANTUM} of a core")
        if gpu_q != gpu_q.to_integral_value():
            raise ValueError(f"gpu {gpu} is finer than 1/{GPU_QUANTUM} of a device")
        return cls(cpu_milli=int(cpu_q), memory_bytes=memory, gpu_hundredths=int(gpu_q))

    @property
    def cpu(self) -> Decimal:
        return Decimal(self.cpu_milli) / CPU_QUANTUM

    @property
    def gpu(self) -> Decimal:
        return Decimal(self.gpu_hundredths) / GPU_QUANTUM

    def __add__(self, other: ResourceSlots) -> ResourceSlots:
        return ResourceSlots(
            cpu_milli=self.cpu_milli + other.cpu_milli,
            memory_bytes=self.memory_bytes + other.memory_bytes,
            gpu_hundredths=self.gpu_hundredths + other.gpu_hundredths,
        )

    def __sub__(self, other: ResourceSlots) -> ResourceSlots:
        """Subtract; raises if any quantity would go below zero (accounting must never drift)."""
        return ResourceSlots(
            cpu_milli=self.cpu_milli - other.cpu_milli,
            memory_bytes=self.memory_bytes - other.memory_bytes,
            gpu_hundredths=self.gpu_hundredths - other.gpu_hundredths,
        )

    def fits_in(self, capacity: ResourceSlots) -> bool:
        return (
            self.cpu_milli <= capacity.cpu_milli
            and self.memory_bytes <= capacity.memory_bytes
            and self.gpu_hundredths <= capacity.gpu_hundredths
        )

    def shortfall(self, capacity: ResourceSlots) -> list[str]:
        """Names of the quantities that do not fit, for readable pending reasons."""
        names = []
        if self.cpu_milli > capacity.cpu_milli:
            names.append("cpu")
        if self.memory_bytes > capacity.memory_bytes:
            names.append("memory")
        if self.gpu_hundredths > capacity.gpu_hundredths:
            names.append("gpu")
        return names


ZERO = ResourceSlots()
