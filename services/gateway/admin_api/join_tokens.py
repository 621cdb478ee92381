"""Join tokens for the cluster's administrators: ``createJoinToken`` (the token is in its
answer only), ``revokeJoinToken`` (commands on ``cmd.join_token.*``, decided by the tenancy
service) and ``joinTokens`` (the directory's fold of ``ev.join_token.*``: never a secret).
A machine presents a token at ``POST /join`` (``services.gateway.admin_api.join_desk``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import strawberry
from strawberry.types import Info

from commands import admin
from commands.authorisation import Principal, can_administer_cluster
from commands.join_token import JoinToken, digest, new_token
from services.gateway.admin_api.send import answer, build, execute, rejected, run
from services.gateway.admin_api.tenancy_types import AdminOutcome
from services.gateway.context import Context, ctx_of, forbidden, who

Ctx = Info[Context, Any]


def _superadmin(info: Ctx) -> Principal:
    me = who(info)
    if not can_administer_cluster(me):
        raise forbidden(info, "only cluster administrators make, list or revoke join tokens")
    return me


@strawberry.type(description="A machine's join token: `token` is shown here once and never again.")
class IssuedJoinToken:
    outcome: AdminOutcome
    token_id: strawberry.ID
    token: str = strawberry.field(
        description="give it to `jetyard join <gateway url> --token …` on the new machine"
    )
    expires_at: datetime | None = strawberry.field(description="None while still pending")


@strawberry.type(description="A join token (its secret is never kept, only its digest).")
class JoinTokenInfo:
    id: strawberry.ID
    resource_group: str
    note: str
    created_at: datetime
    expires_at: datetime
    expired: bool
    revoked: bool
    revoked_at: datetime | None
    nodes: list[str] = strawberry.field(description="the nodes that joined with it")

    @classmethod
    def of(cls, token: JoinToken, now: datetime) -> JoinTokenInfo:
        return cls(
            id=strawberry.ID(token.id), resource_group=token.resource_group, note=token.note,
            created_at=token.created_at, expires_at=token.expires_at,
            expired=token.expired(now), revoked=token.revoked_at is not None,
            revoked_at=token.revoked_at, nodes=list(token.nodes),
        )  # fmt: skip


@strawberry.type
class JoinTokenQuery:
    @strawberry.field(description="Every join token, newest first (superadmins).")
    def join_tokens(self, info: Ctx, include_expired: bool = True) -> list[JoinTokenInfo]:
        _superadmin(info)
        now = datetime.now(UTC)
        tokens = sorted(
            ctx_of(info).directory.join_tokens.values(), key=lambda t: t.created_at, reverse=True
        )
        return [JoinTokenInfo.of(t, now) for t in tokens if include_expired or not t.expired(now)]


@strawberry.type
class JoinTokenMutation:
    @strawberry.mutation(
        description="A token a new machine joins with (`jetyard join`) until it expires, into "
        "`resourceGroup`. The token is in this answer only."
    )
    async def create_join_token(
        self, info: Ctx, expires_in_seconds: int = 3600, resource_group: str = "default",
        note: str = "",
    ) -> IssuedJoinToken:  # fmt: skip
        me, ctx = _superadmin(info), ctx_of(info)
        token_id, secret, token = new_token()
        cmd = build(
            admin.CreateJoinToken, me, token_id=token_id, secret_sha256=digest(secret),
            expires_in_s=expires_in_seconds, resource_group=resource_group, note=note,
        )  # fmt: skip
        outcome = await execute(ctx, cmd)
        if outcome is not None and not outcome.accepted:
            raise rejected(outcome)
        made = ctx.directory.join_tokens.get(token_id)
        return IssuedJoinToken(
            outcome=answer(outcome, cmd, token_id),
            token_id=strawberry.ID(token_id),
            token=token,
            expires_at=made.expires_at if made is not None else None,
        )

    @strawberry.mutation(description="No machine joins with the token from now on.")
    async def revoke_join_token(
        self, info: Ctx, id: strawberry.ID, reason: str = "revoked by an operator"
    ) -> AdminOutcome:
        cmd = build(admin.RevokeJoinToken, _superadmin(info), token_id=str(id), reason=reason)
        return await run(ctx_of(info), cmd, str(id))
