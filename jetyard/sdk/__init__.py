"""Python SDK: typed clients of the gateway's GraphQL API. Talks HTTP and WebSocket only;
reads and writes no subject.

    from jetyard.sdk import AsyncClient, Client

    with Client.from_config() as jy:                      # blocking
        created = jy.sessions.create("jetyard-busybox:latest", type="batch",
                                     command=["sh", "-c", "echo hi; exit 3"])
        print(jy.sessions.wait(created.session_id).exit_code)       # 3

    async with AsyncClient(endpoint, access_key, secret_key) as jy:    # asyncio
        async for chunk in jy.sessions.output(session_id):          # a subscription
            print(*chunk.lines, sep="\\n")

Both clients have ``sessions`` and ``apps`` (``jetyard.sdk.sessions``), ``folders``
(``jetyard.sdk.folders``; the bytes in ``jetyard.sdk.files``), ``admin`` and ``usage``
(``jetyard.sdk.admin``), ``registries`` (``jetyard.sdk.images``), ``endpoints``
(``jetyard.sdk.endpoints``: model serving) and ``graphql`` for anything else; they return
the models of ``jetyard.sdk.models``. ``from_config`` finds the endpoint and credentials as
the ``jetyard`` command does (``jetyard.sdk.config``). Requests are signed with a keypair
(``JetyardAuth``) or carry a login token (``BearerAuth``); every refusal is a
``JetyardError``. Examples: ``examples/sdk_quickstart.py``.
"""

from __future__ import annotations

from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.auth import BearerAuth, JetyardAuth
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models import (
    AppAccess,
    FairShareFactors,
    ImagePull,
    KernelOutput,
    Mount,
    Outcome,
    RegistryInfo,
    RescanProgress,
    RescanResult,
    ServicePort,
    Session,
    SessionSummary,
    StatusChange,
    UsageRow,
)
from jetyard.sdk.models.endpoints import (
    Endpoint,
    EndpointDetail,
    EndpointReplica,
    EndpointToken,
    IssuedToken,
)
from jetyard.sdk.sync_client import Client

__all__ = [
    "AppAccess",
    "AsyncClient",
    "BearerAuth",
    "Client",
    "Endpoint",
    "EndpointDetail",
    "EndpointReplica",
    "EndpointToken",
    "FairShareFactors",
    "ImagePull",
    "IssuedToken",
    "JetyardAuth",
    "JetyardError",
    "KernelOutput",
    "Mount",
    "Outcome",
    "RegistryInfo",
    "RescanProgress",
    "RescanResult",
    "ServicePort",
    "Session",
    "SessionSummary",
    "StatusChange",
    "UsageRow",
]
