"""Fair share's vocabulary: one resource group's settings (how usage is weighed and how fast it
is forgotten), the shares domains, projects and users are given, and where a waiting session's
owner stands. Pure values; the rule is ``placement.fairshare`` (docs/scheduling.md, "Fair
share").
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

HALF_LIFE_DEFAULT_S = 7 * 24 * 3600
HALF_LIFE_LEAST_S = 60
HALF_LIFE_MOST_S = 366 * 24 * 3600
WEIGHT_MOST = 1000.0

SHARE_DEFAULT = 1
SHARE_MOST = 10_000
FairShare = Annotated[int, Field(ge=1, le=SHARE_MOST)]
"""A domain's, project's or user's share: its weight among its siblings (1 … 10000; 1 for
those stored before shares existed)."""


class FairShareSettings(BaseModel):
    """How one resource group counts usage for fair share: resource-seconds weighted per slot,
    decayed with a half-life. Its fields are settings of their own (``GroupScheduling``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    usage_half_life_s: int = Field(
        default=HALF_LIFE_DEFAULT_S,
        ge=HALF_LIFE_LEAST_S,
        le=HALF_LIFE_MOST_S,
        description="fair share: usage counts half as much this many seconds after it happened",
    )
    gpu_usage_weight: float = Field(
        default=10.0,
        ge=0.0,
        le=WEIGHT_MOST,
        description="fair share: the weight of one GPU held for a second",
    )
    cpu_usage_weight: float = Field(
        default=1.0,
        ge=0.0,
        le=WEIGHT_MOST,
        description="fair share: the weight of one CPU core held for a second",
    )
    memory_usage_weight: float = Field(
        default=0.25,
        ge=0.0,
        le=WEIGHT_MOST,
        description="fair share: the weight of one GiB of memory held for a second",
    )


class FairShareStanding(BaseModel):
    """Where a waiting session's owner stands in its group, as the scheduler ordered the queue:
    each level's factor 2^(-usage/share), in (0, 1], rounded to two decimals (so a factor that
    decays a little does not rewrite the reason every pass). Higher goes first, domain before
    project before user."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    domain: float = 1.0
    project: float = 1.0
    user: float = 1.0
