"""Accelerator devices an agent reports (one entry per GPU or other device it can hand out)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DeviceInfo(BaseModel):
    """One device as the agent's driver sees it. Carried in events, so unknown fields are
    ignored: a newer agent may report more than this code knows."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: str = Field(min_length=1, max_length=32, description='device family, e.g. "cuda"')
    index: int = Field(ge=0, description="the driver's index on this machine")
    uuid: str = Field(min_length=1, max_length=128)
    name: str = Field(default="", max_length=128, description="model name, e.g. NVIDIA H100")
    memory_bytes: int = Field(default=0, ge=0)
    numa_node: int | None = Field(default=None, ge=0, description="None: not reported")
    mig_enabled: bool = Field(default=False, description="MIG mode is on (shares refused)")


class NumaNode(BaseModel):
    """One NUMA node of a machine and the CPU cores close to it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    node: int = Field(ge=0)
    cpus: tuple[int, ...] = Field(description="logical CPU ids, as in /sys/devices/system/node")


class DeviceShare(BaseModel):
    """What one kernel holds of one device: the whole device (``cuda.device``) or a share of
    it in hundredths (``cuda.shares``). A device is never both whole-held and shared."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    index: int = Field(ge=0)
    uuid: str = Field(min_length=1, max_length=128)
    hundredths: int = Field(ge=1, le=100)
    whole: bool = False
    """Held whole (then ``hundredths`` is 100)."""
