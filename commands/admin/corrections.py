"""Operator commands on a quarantined aggregate (``cmd.correction.skip``,
``cmd.correction.void``), decided by the tenancy service into the ``correction`` aggregate."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from commands.admin.fields import Reason
from commands.messages import Command
from schemas.subjects import AggregateType

CO = AggregateType.CORRECTION
Subject = Annotated[str, Field(pattern=r"^ev\.[a-z_]{1,32}\.[A-Za-z0-9_-]{1,64}$")]


class SkipQuarantinedEvent(Command):
    """Consumers read ``subject`` again without the event at ``seq``."""

    aggregate_type, verb = CO, "skip"
    target: Subject
    """The held aggregate, as `ev.<type>.<id>` (the quarantine names it)."""
    seq: int = Field(ge=1)
    reason: Reason = ""


class VoidAggregate(Command):
    """Consumers give ``subject`` up for good."""

    aggregate_type, verb = CO, "void"
    target: Subject
    """The held aggregate, as `ev.<type>.<id>` (the quarantine names it)."""
    reason: Reason = ""
