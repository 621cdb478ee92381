"""``startApp``: the URL of one of a session's apps through the app proxy, carrying a
short-lived token (``schemas/app_tokens.py``), good once, that the proxy turns into a cookie
for that app. The caller must be able to act on the session (its owner, or an admin of its
domain); the session must be RUNNING and the app reported open over HTTP, or the app
``terminal`` (every running session's shell, docs/appproxy.md). ``revokeAppAccess`` voids
every URL and cookie issued so far for one app of the session, or all of them. Reads the
sessions view; writes only ``jy-app-grants`` (a revocation)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import can_act_on_session
from schemas.app_tokens import AppClaims, issue, new_grant, revoked_key
from schemas.ids import check_token
from schemas.service_ports import NAME_PATTERN, PortProtocol, PortState
from schemas.session import SessionStatus
from schemas.subjects import GRANTS_BUCKET
from schemas.tenancy import Role
from schemas.terminal_tokens import TERMINAL
from services.gateway.context import Context, ctx_of, who
from services.gateway.core.session_owners import owner_of, visible_session


@strawberry.type(description="Where to open an app, and until when the URL's token is good.")
class AppAccess:
    url: str
    expires_at: datetime


def _refused(message: str, code: str = "refused") -> GraphQLError:
    return GraphQLError(message, extensions={"code": code})


@strawberry.type
class AppMutation:
    @strawberry.mutation(
        description="The URL of a running session's app (service port) through the app proxy, "
        "with a short-lived token: opening it sets a cookie for that app alone."
    )
    async def start_app(
        self, info: Info[Context, Any], session_id: strawberry.ID, app: str
    ) -> AppAccess:
        ctx = ctx_of(info)
        principal = who(info)
        key = ctx.settings.appproxy_token_key
        if key is None:
            raise _refused(
                "this gateway has no app proxy key (JETYARD_GATEWAY_APPPROXY_TOKEN_KEY): it "
                "cannot open apps",
                "unavailable",
            )
        view = await visible_session(info, check_token(str(session_id), "session id"))
        owner = owner_of(view.record) if view is not None else None
        if view is None or not can_act_on_session(principal, owner):
            raise _refused(f"there is no session {session_id}", "not-found")
        record = view.record
        if record.status is not SessionStatus.RUNNING:
            raise _refused(f"session {record.id} is {record.status.value}, not RUNNING")
        ports = [p for p in record.service_ports if p.name == app]
        if app == TERMINAL:
            pass  # every running session has one: a shell through its agent (no port)
        elif not ports:
            declared = sorted({p.name for p in record.service_ports})
            raise _refused(
                f"session {record.id} has no app {app!r}"
                + (
                    f" (it has {', '.join(declared)})" if declared else " (its image declares none)"
                ),
                "not-found",
            )
        elif ports[0].protocol is not PortProtocol.HTTP:
            raise _refused(f"app {app!r} is {ports[0].protocol.value}: only http apps are proxied")
        elif ports[0].state is not PortState.OPEN:
            raise _refused(f"app {app!r} is {ports[0].state.value}: it never opened its port")
        now = time.time()
        expires = int(now + ctx.settings.appproxy_token_ttl_s)
        admin = principal.is_superadmin or (
            principal.role is Role.ADMIN and owner is not None and owner.domain == principal.domain
        )
        claims = AppClaims(
            session=record.id, app=app, user=principal.user_id, admin=admin,
            grant=new_grant(), iat=now, exp=expires,
        )  # fmt: skip
        token = issue(key.get_secret_value().encode(), claims)
        base = ctx.settings.appproxy_url.rstrip("/")
        return AppAccess(
            url=f"{base}/apps/{record.id}/{app}/?token={token}",
            expires_at=datetime.fromtimestamp(expires, UTC),
        )

    @strawberry.mutation(
        description="Void every URL and cookie issued so far for one app of a session (or for "
        "all its apps when app is left out): whoever holds one must open the app again "
        "(startApp). For the session's owner or an admin of its domain. True once recorded."
    )
    async def revoke_app_access(
        self, info: Info[Context, Any], session_id: strawberry.ID, app: str | None = None
    ) -> bool:
        ctx = ctx_of(info)
        view = await visible_session(info, check_token(str(session_id), "session id"))
        owner = owner_of(view.record) if view is not None else None
        if view is None or not can_act_on_session(who(info), owner):
            raise _refused(f"there is no session {session_id}", "not-found")
        if app is not None and app != TERMINAL and not re.fullmatch(NAME_PATTERN, app):
            raise _refused(f"{app!r} is not an app name", "invalid")
        kv = await ctx.bus.js.key_value(GRANTS_BUCKET)
        await kv.put(revoked_key(view.record.id, app), repr(time.time()).encode())
        return True
