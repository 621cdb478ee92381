"""The ``quarantine`` query (events consumers could not decode or apply: the ``jy-quarantine``
bucket) and the corrections (``skipQuarantinedEvent``, ``voidAggregate``: commands on
``cmd.correction.*``), for the cluster's administrators only."""

from __future__ import annotations

from typing import Any

import strawberry
from strawberry.types import Info

from commands import admin
from commands.authorisation import Principal, can_administer_cluster
from commands.correction import correction_id_for
from events.quarantine import Poison
from services.gateway.admin_api.send import build, run
from services.gateway.admin_api.tenancy_types import AdminOutcome
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
        description="Events consumers could not fold, oldest first (superadmins; at most 500): "
        "those after log position `after` (0: from the first), so a long quarantine is read "
        "a page at a time."
    )
    async def quarantine(
        self, info: Info[Context, Any], first: int = 100, after: int = 0
    ) -> list[QuarantinedEvent]:
        _superadmin(info)
        quarantine = ctx_of(info).services.quarantine
        entries = [] if quarantine is None else await quarantine.entries()
        later = [p for p in entries if p.seq > after]
        return [QuarantinedEvent.of(p) for p in later[: max(0, min(first, MAX_LISTED))]]


@strawberry.type
class QuarantineMutation:
    @strawberry.mutation(
        description="Read a held aggregate again without one event (the log stays as it is): "
        "every consumer folds it anew from its first event, skipping `seq`. Superadmins."
    )
    async def skip_quarantined_event(
        self, info: Info[Context, Any], subject: str, seq: int, reason: str = ""
    ) -> AdminOutcome:
        me = _superadmin(info)
        cmd = build(admin.SkipQuarantinedEvent, me, target=subject, seq=seq, reason=reason)
        return await run(ctx_of(info), cmd, correction_id_for(subject))

    @strawberry.mutation(
        description="Give a held aggregate up: every consumer drops it and ignores its events. "
        "Superadmins."
    )
    async def void_aggregate(
        self, info: Info[Context, Any], subject: str, reason: str = ""
    ) -> AdminOutcome:
        me = _superadmin(info)
        cmd = build(admin.VoidAggregate, me, target=subject, reason=reason)
        return await run(ctx_of(info), cmd, correction_id_for(subject))


def _superadmin(info: Info[Context, Any]) -> Principal:
    me = who(info)
    if not can_administer_cluster(me):
        raise forbidden(info, "only cluster administrators correct quarantined aggregates")
    return me
