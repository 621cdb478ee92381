"""Admin mutations on keypairs: authorise against the directory, store or delete the secret
key in ``jy-secrets``, send ``cmd.keypair.*``. A new secret key is shown once, in the answer."""

from __future__ import annotations

from typing import Any

import strawberry
from strawberry.types import Info

from commands import admin
from commands.authorisation import can_deactivate_keypair, can_issue_keypair
from services.gateway.admin_api import inputs as parse
from services.gateway.admin_api.naming import user_named
from services.gateway.admin_api.send import (
    answer,
    build,
    execute,
    invalid,
    may_administer_user,
    rejected,
    run,
    visible_keypair,
)
from services.gateway.admin_api.tenancy_types import AdminOutcome, IssuedKeypair
from services.gateway.auth.vault import new_access_key, new_secret_key
from services.gateway.context import Context, ctx_of, forbidden, who
from services.gateway.core.inputs import InputError

Ctx = Info[Context, Any]


@strawberry.type
class KeypairMutation:
    @strawberry.mutation(
        description="A new keypair; its secret key is in this answer only. userId: an id or "
        "an email."
    )
    async def create_keypair(
        self,
        info: Ctx,
        user_id: strawberry.ID,
        policy: str = "default",
        rate_limit: int | None = None,
        make_default: bool = False,
    ) -> IssuedKeypair:
        me, ctx = who(info), ctx_of(info)
        try:
            parse.rate_limit(rate_limit)
        except InputError as exc:
            raise invalid(exc) from exc
        user = user_named(ctx, me, str(user_id))
        if not can_issue_keypair(me, user.domain) or not may_administer_user(me, user):
            raise forbidden(info, "only an administrator of the user's domain issues keypairs")
        access_key, secret_key = new_access_key(), new_secret_key()
        fields: dict[str, Any] = {
            "access_key": access_key,
            "user_id": user.id,
            "policy": policy,
            "rate_limit": rate_limit,
            "make_default": make_default,
        }
        build(admin.CreateKeypair, me, secret_key_id="-", **fields)  # bad input: store nothing
        key_id = await ctx.services.vault.store_secret(access_key, secret_key)
        cmd = build(admin.CreateKeypair, me, secret_key_id=key_id, **fields)
        outcome = await execute(ctx, cmd)
        if outcome is not None and not outcome.accepted:
            await ctx.services.vault.delete_secret(access_key)
            raise rejected(outcome)
        # Pending: the keypair may still be created, so its secret is kept and shown.
        return IssuedKeypair(
            outcome=answer(outcome, cmd, access_key),
            access_key=strawberry.ID(access_key),
            secret_key=secret_key,
        )

    @strawberry.mutation(description="The keypair can no longer sign requests or start sessions.")
    async def deactivate_keypair(
        self, info: Ctx, access_key: strawberry.ID, reason: str = ""
    ) -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        keypair = visible_keypair(ctx, me, str(access_key))
        if not can_deactivate_keypair(me, keypair.user_id, keypair.domain):
            raise forbidden(info, "you cannot deactivate this keypair")
        cmd = build(admin.DeactivateKeypair, me, access_key=str(access_key), reason=reason)
        return await run(ctx, cmd, str(access_key))

    @strawberry.mutation
    async def reactivate_keypair(self, info: Ctx, access_key: strawberry.ID) -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        keypair = visible_keypair(ctx, me, str(access_key))
        if not can_issue_keypair(me, keypair.domain):
            raise forbidden(info, "only an administrator of the keypair's domain reactivates it")
        cmd = build(admin.ReactivateKeypair, me, access_key=str(access_key))
        return await run(ctx, cmd, str(access_key))
