"""For the app proxy's endpoint tests: model replicas as real HTTP servers on 127.0.0.1 (an
echo, a delay, a server-sent event stream the test steps through), a proxy of the test's own
(its own id, so its load reports are its own), and the log written as the serving controller,
the scheduler and an agent would write it: an endpoint's events, each replica's inference
session running and its ``inference`` app reported (``preopen``, not probed)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from events.bus import Bus
from events.catalogue import Event
from events.domain.agent import KernelServicePortsReported
from events.domain.serving import (
    EndpointCreated,
    EndpointTokenIssued,
    ReplicaHealthChanged,
    ReplicaRequested,
)
from events.domain.session import SessionRequested, SessionStarted
from events.store import EventStore
from events.writes import AggregateRef, Write
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.service_ports import PortProtocol, PortState, ReportedPort
from schemas.serving import (
    INFERENCE_APP,
    ReplicaHealth,
    Revision,
    Scaling,
    endpoint_id_for,
    token_text,
)
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from services.appproxy import http
from services.appproxy.service import AppProxyService
from services.appproxy.settings import AppProxySettings
from tests.integration.appproxy_support import KEY, FakeSession, serving
from tests.support import envelope

OWNER = SessionOwner(access_key="AK", user_id="user-alice", project_id="p", domain="default")
SPEC = Revision(image="srv:1", port=8000, resources=ResourceSlots.of(cpu="1"))
SESSION_SPEC = SessionSpec(
    image="srv:1", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="0.5")),)
)


@dataclass
class ModelReplica:
    """One replica's server: what it was asked, and how it answers."""

    name: str
    delay_s: float = 0.0
    """How long ``/v1/work`` takes."""
    seen: list[dict[str, str | None]] = field(default_factory=list)
    steps: asyncio.Queue[None] = field(default_factory=asyncio.Queue)
    """``/v1/stream`` sends its next event each time the test puts one here."""

    def app(self) -> Starlette:
        async def echo(request: Request) -> JSONResponse:
            seen = {
                "path": request.url.path, "query": request.url.query,
                "authorization": request.headers.get("authorization"),
                "prefix": request.headers.get("x-forwarded-prefix"),
                "body": (await request.body()).decode(),
            }  # fmt: skip
            self.seen.append(seen)
            return JSONResponse({"replica": self.name, **seen})

        async def work(request: Request) -> JSONResponse:
            self.seen.append({"path": request.url.path})
            await asyncio.sleep(self.delay_s)
            return JSONResponse({"replica": self.name})

        async def stream(request: Request) -> Response:
            async def events() -> AsyncIterator[bytes]:
                for n in range(3):
                    await self.steps.get()
                    yield f"data: {self.name} {n}\n\n".encode()

            return StreamingResponse(events(), media_type="text/event-stream")

        return Starlette(routes=[
            Route("/v1/work", work, methods=["GET"]),
            Route("/v1/stream", stream, methods=["GET"]),
            Route("/{path:path}", echo, methods=["GET", "POST"]),
        ])  # fmt: skip


@contextlib.asynccontextmanager
async def replica_server(replica: ModelReplica) -> AsyncIterator[int]:
    config = uvicorn.Config(replica.app(), host="127.0.0.1", port=0, log_level="warning",
                            lifespan="off")  # fmt: skip
    async with serving(uvicorn.Server(config)) as port:
        yield port


@contextlib.asynccontextmanager
async def endpoint_proxy(bus: Bus) -> AsyncIterator[tuple[AppProxyService, str]]:
    """A proxy with a fold of its own, its own id, and otherwise the default settings (its
    log polls as in production), and its base URL."""
    settings = AppProxySettings(port=0, token_key=KEY, proxy_id=f"test-{uuid.uuid4().hex[:12]}")
    service = AppProxyService(bus, settings)
    await service.start()
    try:
        async with serving(http.server(service)) as port:
            yield service, f"http://127.0.0.1:{port}"
    finally:
        await service.stop()


def unique_name() -> str:
    return f"ep-{uuid.uuid4().hex[:12]}"


class EndpointLog:
    """One endpoint's aggregate, written as the serving controller writes it, and its
    replicas' sessions as the scheduler and the agents write them."""

    def __init__(self, store: EventStore, name: str | None = None) -> None:
        self.store = store
        self.name = name or unique_name()
        self.id = endpoint_id_for(self.name)
        self.version = 0
        self.guard = 0
        self.sessions: dict[int, str] = {}

    async def write(self, *events: Event) -> None:
        ref = AggregateRef(AggregateType.ENDPOINT, self.id)
        envs = []
        for e in events:
            self.version += 1
            envs.append(envelope(ref, self.version, name=e.event_name,
                                 payload=e.model_dump(mode="json")))  # fmt: skip
        committed = await self.store.append(Write(ref, self.guard, tuple(envs)))
        self.guard = committed.seqs[-1]

    async def create(
        self, replicas: int = 1, *, public: bool = False, cold_start_s: float = 30.0
    ) -> None:
        scaling = Scaling(min_replicas=0, max_replicas=4, cold_start_timeout_s=cold_start_s)
        await self.write(EndpointCreated(name=self.name, owner=OWNER, spec=SPEC,
                                         replicas=replicas, scaling=scaling,
                                         open_to_public=public))  # fmt: skip

    async def token(self, *, expires_in: timedelta = timedelta(hours=1)) -> tuple[str, str]:
        """A token issued as ``createEndpointToken`` has it written: (token id, its text)."""
        token_id, secret = new_id(), uuid.uuid4().hex
        digest = EndpointTokenIssued(
            token_id=token_id, secret_sha256=_sha256(secret),
            expires_at=datetime.now(UTC) + expires_in,
        )  # fmt: skip
        await self.write(digest)
        return token_id, token_text(token_id, secret)

    async def request_replica(self, number: int, port: int | None) -> None:
        """Replica ``number`` asked for, its session running and its inference app reported
        at 127.0.0.1:``port`` (no report when None); not probed yet."""
        session = FakeSession(self.store)
        self.sessions[number] = session.id
        await self.write(ReplicaRequested(replica=number, revision=1, session_id=session.id))
        await session.write(
            SessionRequested(spec=SESSION_SPEC, kernel_ids=(session.kernel,), owner=OWNER),
            SessionStarted(reason="started"),
        )
        if port is not None:
            app = ReportedPort(name=INFERENCE_APP, protocol=PortProtocol.PREOPEN, port=port,
                               address=f"127.0.0.1:{port}", state=PortState.NOT_PROBED)  # fmt: skip
            report = KernelServicePortsReported(
                kernel_id=session.kernel, session_id=session.id, ports=(app,)
            )
            node = AggregateRef(AggregateType.AGENT, new_id())
            env = envelope(node, 1, name=report.event_name,
                           payload=report.model_dump(mode="json"))  # fmt: skip
            await self.store.append(Write.create(node, env))

    async def healthy(self, number: int) -> None:
        await self.write(ReplicaHealthChanged(replica=number, health=ReplicaHealth.HEALTHY,
                                              reason="GET /health: 200"))  # fmt: skip

    async def serving_replica(self, number: int, port: int | None) -> None:
        await self.request_replica(number, port)
        await self.healthy(number)


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
