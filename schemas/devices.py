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
