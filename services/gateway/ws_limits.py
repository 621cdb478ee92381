"""Operations sent over a WebSocket count against the caller's rate limit like HTTP requests
(the HTTP middleware never sees them: one connection carries many operations). Reads and
writes ``jy-ratelimits`` through the shared limiter."""

from __future__ import annotations

from collections.abc import AsyncIterator

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension

from services.gateway.context import Context


class WebSocketRateLimit(SchemaExtension):
    async def on_execute(self) -> AsyncIterator[None]:
        context = self.execution_context.context
        if isinstance(context, Context) and context.over_websocket:
            services = context.services
            limiter = services.limiter
            if limiter is not None:
                key = services.rate_key(context.principal, context.source)
                verdict = await limiter.take(key, services.rate_limit_of(context.principal))
                if not verdict.allowed:
                    raise GraphQLError(
                        f"more than {verdict.limit} requests a minute: try again in "
                        f"{verdict.retry_after_s}s",
                        extensions={"code": "rate-limited"},
                    )
        yield
