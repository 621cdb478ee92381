"""Logging in and out, and the access log for administrators. Reads ``JY_ACCESS`` and the
login bucket through the authenticator; writes login tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import can_read_domain
from schemas.tenancy import email_digest, user_id_for
from services.gateway.auth.authenticate import AuthError
from services.gateway.context import Context, ctx_of, forbidden, who


@strawberry.type
class LoginResult:
    token: str = strawberry.field(description="send as `Authorization: Bearer <token>`")
    user_id: strawberry.ID
    expires_in_s: int


@strawberry.type
class AccessEntry:
    seq: int
    at: datetime
    domain: str | None
    user_id: str | None
    access_key: str | None
    role: str | None
    source: str
    operation: str
    outcome: str


@strawberry.type
class AccountQuery:
    @strawberry.field(
        description="Requests and WebSocket connections, oldest first from `since` or after "
        "`after` (a seq). Superadmins see every domain (or one), domain admins and monitors theirs."
    )
    async def access_log(
        self,
        info: Info[Context, Any],
        first: int = 100,
        after: int | None = None,
        since: datetime | None = None,
        domain: str | None = None,
    ) -> list[AccessEntry]:
        principal = who(info)
        if principal.is_superadmin:
            scope = domain
        elif can_read_domain(principal, principal.domain) and domain in (None, principal.domain):
            scope = principal.domain
        else:
            raise forbidden(info, "only administrators may read the access log")
        records = await ctx_of(info).services.access.read(
            domain=scope, after_seq=after or 0, since=since, first=first
        )
        return [AccessEntry(seq=seq, **record.model_dump()) for seq, record in records]


@strawberry.type
class AccountMutation:
    @strawberry.mutation(description="Log in with email and password; no signature needed.")
    async def login(self, info: Info[Context, Any], email: str, password: str) -> LoginResult:
        services = ctx_of(info).services
        try:
            token = await services.authenticator.login(email, password, services.email_key)
        except AuthError as exc:
            ctx_of(info).denied.append(exc.code)
            raise GraphQLError(exc.message, extensions={"code": exc.code}) from None
        return LoginResult(
            token=token,
            user_id=strawberry.ID(user_id_for(email_digest(email, services.email_key))),
            expires_in_s=int(services.bus.settings.login_ttl_s),
        )

    @strawberry.mutation(description="End the login this request carries.")
    async def logout(self, info: Info[Context, Any]) -> bool:
        who(info)
        token = ctx_of(info).bearer
        if token is None:
            raise GraphQLError("this request was signed with a keypair: there is no login")
        await ctx_of(info).services.authenticator.logout(token)
        return True
