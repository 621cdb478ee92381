"""The ``quarantine`` query: events consumers could not decode or apply (the ``jy-quarantine``
bucket), for the cluster's administrators only. Reads the bucket; writes nothing."""

from __future__ import annotations

from typing import Any

import strawberry
from strawberry.types import Info

from commands.authorisation import can_administer_cluster
from events.quarantine import Poison
from services.gateway.context import Context, ctx_of, forbidden, who

MAX_LISTED = 500


@strawberry.type(description="An event a consumer could not fold; its aggregate is held.")
class QuarantinedEvent:
    seq: int = strawberry.field(description="its stream sequence in JY_EVENTS")
    consumer: str
    subject: str = strawberry.field(description="the aggregate, as ev.<type>.<id>")
    event: str = strawberry.field(description="its wire name, empty when it had none")
    error: str
    at: str = strawberry.field(description="when the consumer met it (ISO 8601)")

    @classmethod
    def of(cls, poison: Poison) -> QuarantinedEvent:
        return cls(
            seq=poison.seq,
            consumer=poison.consumer,
            subject=poison.subject,
            event=poison.event,
            error=poison.error,
            at=poison.at,
        )


@strawberry.type
class QuarantineQuery:
    @strawberry.field(
        description="Events consumers could not fold, oldest first (superadmins; at most 500)."
    )
    async def quarantine(
        self, info: Info[Context, Any], first: int = 100
    ) -> list[QuarantinedEvent]:
        if not can_administer_cluster(who(info)):
            raise forbidden(info, "only cluster administrators see the quarantine")
        quarantine = ctx_of(info).services.quarantine
        entries = [] if quarantine is None else await quarantine.entries()
        return [QuarantinedEvent.of(p) for p in entries[: max(0, min(first, MAX_LISTED))]]
