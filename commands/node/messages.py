"""Operator commands on a node (``cmd.node.cordon``, ``cmd.node.drain``, ``cmd.node.uncordon``,
``cmd.node.purge_image``, ``cmd.node.remove``),
decided by the scheduler, the node ledger's one writer. Sent by the gateway for superadmins."""

from __future__ import annotations

from pydantic import Field

from commands.messages import Command
from schemas.ids import Token
from schemas.subjects import AggregateType

MAX_DRAIN_S = 30 * 24 * 3600


class CordonNode(Command):
    """No new sessions on the node; what runs stays."""

    aggregate_type, verb = AggregateType.NODE, "cordon"
    node_id: Token
    reason: str = Field(default="cordoned by an operator", min_length=1, max_length=512)


class DrainNode(Command):
    """Cordon, and let what runs end; with ``deadline_s`` what still runs then is stopped."""

    aggregate_type, verb = AggregateType.NODE, "drain"
    node_id: Token
    reason: str = Field(default="drained by an operator", min_length=1, max_length=512)
    deadline_s: int | None = Field(default=None, ge=0, le=MAX_DRAIN_S)


class PurgeImage(Command):
    """Remove an image from the node's disk (its agent refuses while a kernel there uses it)."""

    aggregate_type, verb = AggregateType.NODE, "purge_image"
    node_id: Token
    reference: str = Field(min_length=1, max_length=512, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
    reason: str = Field(default="purged by an operator", min_length=1, max_length=512)


class UncordonNode(Command):
    """Take sessions again (a drain ends too)."""

    aggregate_type, verb = AggregateType.NODE, "uncordon"
    node_id: Token
    reason: str = Field(default="uncordoned by an operator", min_length=1, max_length=512)


class RemoveNode(Command):
    """Take the machine out of the cluster for good (refused while it holds kernels)."""

    aggregate_type, verb = AggregateType.NODE, "remove"
    node_id: Token
    reason: str = Field(default="removed by an operator", min_length=1, max_length=512)
