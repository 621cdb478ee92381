"""What every resolver gets: the read side, the command bus, the credential stores and the
principal this request authenticated as (None: nobody; only ``login`` answers them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import Principal
from commands.bus import CommandBus
from events.bus import Bus
from events.quarantine import Quarantine
from schemas.bounds import DEFAULT_LIMITS, InputLimits
from services.gateway.core.serving_traffic import ServingTraffic
from services.gateway.core.views import Views
from services.gateway.settings import GatewaySettings

if TYPE_CHECKING:
    from commands.directory import Directory
    from events.queues import QueueBoard
    from services.gateway.auth.authenticate import Authenticator
    from services.gateway.auth.ratelimit_shared import SharedRateLimiter
    from services.gateway.auth.registry_secrets import RegistrySecrets
    from services.gateway.auth.vault import PasswordStore, PeopleVault, SecretVault
    from services.gateway.core.access_log import AccessLog
    from services.gateway.core.folds import QuotaUse
    from services.gateway.core.history import Histories


@dataclass
class Services:
    """Built once at start-up and shared by every request."""

    views: Views
    commands: CommandBus
    bus: Bus
    settings: GatewaySettings
    directory: Directory
    vault: SecretVault
    people: PeopleVault
    passwords: PasswordStore
    authenticator: Authenticator
    access: AccessLog
    quotas: QuotaUse
    email_key: bytes
    """Key of the email digests (derived from the secrets key)."""
    queues: QueueBoard
    """Every group's waiting sessions in order, watched from ``jy-queues``."""
    registry_secrets: RegistrySecrets
    """Registry passwords and tokens, sealed (``jy-registry-secrets``)."""
    quarantine: Quarantine | None = None
    """Events consumers could not fold (``jy-quarantine``): ``quarantine``, ``/healthz``."""
    limits: InputLimits = DEFAULT_LIMITS
    """The input maximums (``JETYARD_LIMIT_*``), the same the scheduler and tenancy check."""
    limiter: SharedRateLimiter | None = None
    """Request-rate buckets shared with the other gateway replicas (``jy-ratelimits``)."""
    traffic: ServingTraffic | None = None
    """The app proxies' load reports of endpoints, heard live (``jy.serving.load.*``)."""
    histories: Histories | None = None
    """The past's views and directories, built as ``asOf`` asks (None: asOf is refused)."""

    def rate_key(self, principal: Principal | None, source: str) -> str:
        if principal is None:
            return f"anon:{source.split(':')[0]}"
        return principal.access_key or principal.user_id

    def rate_limit_of(self, principal: Principal | None) -> int:
        """Requests a minute: a keypair's own limit, else the gateway's (less when anonymous)."""
        if principal is None:
            return self.settings.anonymous_rate_limit
        if principal.access_key is not None:
            keypair = self.directory.keypairs.get(principal.access_key)
            if keypair is not None and keypair.rate_limit is not None:
                return int(keypair.rate_limit)
        return self.settings.rate_limit


@dataclass
class Context:
    services: Services
    principal: Principal | None
    bearer: str | None = None
    """The login token the request carried, if it was not signed with a keypair."""
    source: str = "-"
    """The client's address, for the access log."""
    over_websocket: bool = False
    """The request is a graphql-transport-ws connection: each operation is rate limited."""
    operations: list[str] = field(default_factory=list)
    """Root fields this request resolved (the access log's operation)."""
    denied: list[str] = field(default_factory=list)
    """Why parts of this request were refused (the access log's outcome)."""
    past: set[int] = field(default_factory=set)
    """Log positions this request reads the past at (``asOf``; a few at most)."""
    connection_params: dict[str, Any] | None = None
    """A WebSocket's ``connection_init`` payload (strawberry sets it)."""

    # Shortcuts, so resolvers read ``ctx.views`` rather than ``ctx.services.views``.
    @property
    def views(self) -> Views:
        return self.services.views

    @property
    def commands(self) -> CommandBus:
        return self.services.commands

    @property
    def bus(self) -> Bus:
        return self.services.bus

    @property
    def settings(self) -> GatewaySettings:
        return self.services.settings

    @property
    def directory(self) -> Directory:
        return self.services.directory


def ctx_of(info: Info[Context, Any]) -> Context:
    return info.context


def who(info: Info[Context, Any]) -> Principal:
    """The authenticated principal, or the GraphQL error every unauthenticated call gets."""
    ctx = ctx_of(info)
    if ctx.principal is None:
        raise GraphQLError(
            "authentication required: sign the request with a keypair or log in",
            extensions={"code": "unauthenticated"},
        )
    return ctx.principal


def forbidden(info: Info[Context, Any], message: str) -> GraphQLError:
    """A refusal for something the caller may know exists (admin operations)."""
    ctx_of(info).denied.append(message)
    return GraphQLError(message, extensions={"code": "forbidden"})


def invalid(message: str) -> GraphQLError:
    """A refusal of what the request asked: the message says what was wrong."""
    return GraphQLError(message, extensions={"code": "invalid"})
