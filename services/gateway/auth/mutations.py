"""The GraphQL login and logout mutations. Reads the login bucket through the authenticator;
writes login tokens."""

from __future__ import annotations

from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from schemas.tenancy import email_digest, user_id_for
from services.gateway.auth.authenticate import AuthError
from services.gateway.context import Context, ctx_of, who


@strawberry.type
class LoginResult:
    token: str = strawberry.field(description="send as `Authorization: Bearer <token>`")
    user_id: strawberry.ID
    expires_in_s: int


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
