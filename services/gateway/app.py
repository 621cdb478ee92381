"""Gateway entry point: connect, fold the tenancy directory and quota use (read only), watch
the queue board, open the views, and serve GraphQL on uvicorn until stopped. Tenancy commands
go to the tenancy service (``services.tenancy``) like every other command."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import uvicorn

from commands.bus import CommandBus
from events.bus import Bus, connect, ensure_streams
from events.quarantine import Quarantine
from events.queues import QueueBoard
from httpserver.server import serve_until
from projections.settings import ProjectionSettings
from schemas.settings import NatsSettings, input_limits
from services.gateway.auth.authenticate import Authenticator
from services.gateway.auth.logins import LoginStore
from services.gateway.auth.nonces import NonceStore
from services.gateway.auth.ratelimit_shared import SharedRateLimiter
from services.gateway.auth.registry_secrets import RegistrySecrets
from services.gateway.auth.vault import PasswordStore, PeopleVault, SecretVault, email_key_of
from services.gateway.context import Services
from services.gateway.core.access_log import AccessLog
from services.gateway.core.folds import DirectoryFeed, QuotaUse
from services.gateway.core.history import Histories
from services.gateway.core.serving_traffic import ServingTraffic
from services.gateway.core.views import SqlViews, Views
from services.gateway.http import build_app
from services.gateway.images.credentials import CredentialsDesk
from services.gateway.settings import GatewaySettings

log = logging.getLogger(__name__)

WEBSOCKETS = "websockets-sansio"
"""uvicorn's WebSocket implementation, as the app proxy's and the terminals': the legacy
"websockets" one is deprecated and logs a client that vanished mid-transfer as an ERROR with
a traceback."""


class MissingSecretsKeyError(RuntimeError):
    pass


def secrets_key_of(settings: GatewaySettings) -> bytes:
    if not settings.secrets_key:
        raise MissingSecretsKeyError(
            "JETYARD_GATEWAY_SECRETS_KEY is not set: it seals secret keys and personal data. "
            "Make one with `python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'` and keep it safe (`jetyard up` does this)"
        )
    return settings.secrets_key.encode()


@contextlib.asynccontextmanager
async def open_services(
    bus: Bus, settings: GatewaySettings, views: Views
) -> AsyncIterator[Services]:
    """Everything a request needs, started, and stopped on leaving (the views stay the
    caller's). Each part is stopped as soon as it exists, so a start that fails half-way
    leaves nothing running."""
    key = secrets_key_of(settings)
    async with contextlib.AsyncExitStack() as stack:
        queues = QueueBoard.on(bus)
        stack.push_async_callback(queues.close)
        await queues.start_watching()
        directory = DirectoryFeed(bus)
        stack.push_async_callback(directory.stop)
        await directory.start()
        quotas = QuotaUse(bus)
        stack.push_async_callback(quotas.stop)
        await quotas.start()
        vault = SecretVault(bus, key)
        passwords = PasswordStore(bus)
        authenticator = Authenticator(
            vault,
            NonceStore(bus),
            LoginStore(bus, bus.settings.login_ttl_s),
            passwords,
            directory.directory,
            bus.settings.signature_window_s,
        )
        registry_secrets = RegistrySecrets(bus, key)
        desk = CredentialsDesk(bus, registry_secrets, directory.directory)
        stack.push_async_callback(desk.stop)
        await desk.start()
        traffic = ServingTraffic(bus)
        stack.push_async_callback(traffic.stop)
        await traffic.start()
        histories = Histories(bus, settings)
        stack.push_async_callback(histories.close)
        yield Services(
            views=views,
            commands=CommandBus(bus),
            bus=bus,
            settings=settings,
            directory=directory.directory,
            vault=vault,
            people=PeopleVault(bus, key),
            passwords=passwords,
            authenticator=authenticator,
            access=AccessLog(bus),
            quotas=quotas,
            email_key=email_key_of(key),
            limits=input_limits(),
            quarantine=await Quarantine.open(bus),
            limiter=await SharedRateLimiter.open(bus),
            queues=queues,
            registry_secrets=registry_secrets,
            traffic=traffic,
            histories=histories,
        )


async def run(settings: GatewaySettings, nats: NatsSettings, stop: asyncio.Event) -> None:
    secrets_key_of(settings)  # fail before connecting to anything
    bus = await connect(nats, name="gateway")
    try:
        await ensure_streams(bus)
        views = await SqlViews.open(ProjectionSettings(), bus)
        try:
            async with open_services(bus, settings, views) as services:
                await _serve(services, settings, stop)
        finally:
            await views.close()
    finally:
        await bus.close()


async def _serve(services: Services, settings: GatewaySettings, stop: asyncio.Event) -> None:
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(services),
            host=settings.host,
            port=settings.port,
            lifespan="off",
            log_level="warning",
            ws=WEBSOCKETS,
        )
    )
    await serve_until(server, stop, "the gateway")
