"""``POST /join``: a new machine exchanges a join token for what its agent needs to run (the
NATS address and credential, the cluster id, its node id and resource group). Unauthenticated
(the token is the credential), rate limited per address like every anonymous request, and
recorded in the access log.

The token is checked by the tenancy service, which records the join (``cmd.join_token.join``
→ ``NodeJoined`` on ``ev.join_token.<id>``) or refuses it with the reason; a node id the
machine kept from an earlier join is refused here when its ledger (``ev.node.<id>``, read, not
written) says it was removed. Only the secret's SHA-256 leaves this process.

What is handed out beyond the gateway's own NATS connection comes from ``JoinSettings``
(``JETYARD_GATEWAY_JOIN_*``; the cluster id and terminal key fall back to the agent's
variables, which ``jetyard up`` gives every service)."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse

from commands.admin import JoinNode
from commands.join_token import JoinRefusedError, JoinToken, digest, parse
from commands.messages import explain
from commands.outcome import Code
from events.domain.node import NodeRemoved
from events.store import EventStore
from events.writes import AggregateRef
from schemas.ids import check_token, new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.subjects import AggregateType
from services.gateway.auth.ratelimit import Limiter
from services.gateway.context import Services
from services.gateway.core.outcomes import directory_reaches
from services.gateway.edge import record_access

log = logging.getLogger(__name__)

GATEWAY = Actor.service("gateway")
MAX_BODY = 4096
OPERATION = "POST /join"


class JoinSettings(BaseSettings):
    """What ``POST /join`` hands a new machine besides the gateway's own NATS credential."""

    model_config = SettingsConfigDict(env_prefix="JETYARD_GATEWAY_JOIN_", extra="ignore")

    nats_url: str | None = Field(
        default=None,
        description="the NATS URL(s) other machines reach (comma-separated); unset: the "
        "gateway's own (JETYARD_NATS_URL), which is no use to them if it is 127.0.0.1",
    )
    cluster_id: str = Field(
        default="",
        validation_alias=AliasChoices(
            "JETYARD_GATEWAY_JOIN_CLUSTER_ID", "JETYARD_AGENT_CLUSTER_ID"
        ),
        description="the installation's cluster id (the joined agents' container labels)",
    )
    terminal_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "JETYARD_GATEWAY_JOIN_TERMINAL_KEY", "JETYARD_AGENT_TERMINAL_KEY"
        ),
        description="the app proxy's terminal key, for the joined agents' terminal endpoints",
    )


class JoinRefused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _asked(body: bytes) -> tuple[str, str, str | None]:
    """(token, hostname, kept node id) from the request's JSON."""
    try:
        asked: Any = json.loads(body)
    except ValueError as exc:
        raise JoinRefused(400, "invalid", f"the body is not JSON ({exc})") from exc
    if not isinstance(asked, dict):
        raise JoinRefused(400, "invalid", "the body must be a JSON object")
    token, hostname, node_id = asked.get("token"), asked.get("hostname"), asked.get("node_id")
    if not isinstance(token, str) or not isinstance(hostname, str):
        raise JoinRefused(400, "invalid", "token and hostname (strings) are required")
    if node_id is not None:
        try:
            check_token(str(node_id), "node id")
        except ValueError as exc:
            raise JoinRefused(400, "invalid", str(exc)) from exc
    return token, hostname, None if node_id is None else str(node_id)


async def removed_at(store: EventStore, node_id: str) -> datetime | None:
    """When the node was removed from the cluster (its ledger says), or None."""
    history = await store.read(AggregateRef(AggregateType.NODE, node_id))
    for stored in history.events:
        if stored.envelope.name == NodeRemoved.event_name:
            return stored.envelope.occurred_at
    return None


class JoinDesk:
    """Answers ``POST /join`` (``answer`` is the Starlette endpoint)."""

    def __init__(self, services: Services, limiter: Limiter, settings: JoinSettings) -> None:
        self.services, self.limiter, self.settings = services, limiter, settings
        self.store = EventStore(services.bus)

    async def answer(self, request: Request) -> JSONResponse:
        client = request.client
        address = client.host if client is not None else ""
        source = f"{address}:{client.port}" if client is not None else "-"
        verdict = await self.limiter.take(
            f"join:{address}", self.services.settings.anonymous_rate_limit
        )
        if not verdict.allowed:
            said = f"more than {verdict.limit} joins a minute: try again in {verdict.reset_s}s"
            return await self._refused(JoinRefused(429, "rate-limited", said), source)
        try:
            body = await request.body()
            if len(body) > MAX_BODY:
                raise JoinRefused(413, "invalid", f"the body is over {MAX_BODY} bytes")
            answer = await self._join(body, address)
        except JoinRefused as refused:
            return await self._refused(refused, source)
        await record_access(
            self.services, None, source, OPERATION, f"joined: node {answer['node_id']}"
        )
        log.info("node %s (%s) joined from %s", answer["node_id"], answer["hostname"], source)
        return JSONResponse(answer, headers={"cache-control": "no-store"})

    async def _token(self, token_id: str, seq: int) -> JoinToken | None:
        """The token as the gateway's directory folds it. Its group never changes, so one the
        directory holds already is the answer; one made a moment ago on another gateway is
        waited for (bounded: the join is stored either way)."""
        directory = self.services.directory
        if token_id not in directory.join_tokens:
            await directory_reaches(directory, seq, self.services.settings.read_your_writes_s)
        return directory.join_tokens.get(token_id)

    async def _refused(self, refused: JoinRefused, source: str) -> JSONResponse:
        await record_access(self.services, None, source, OPERATION, f"refused: {refused.message}")
        body = {"error": refused.message, "code": refused.code}
        return JSONResponse(body, status_code=refused.status, headers={"cache-control": "no-store"})

    async def _join(self, body: bytes, address: str) -> dict[str, Any]:
        token, hostname, kept = _asked(body)
        try:
            token_id, secret = parse(token)
        except JoinRefusedError as exc:
            raise JoinRefused(401, "unknown-token", str(exc)) from exc
        if kept is not None and (when := await removed_at(self.store, kept)) is not None:
            raise JoinRefused(
                403, "node-removed",
                f"node {kept} was removed from the cluster on "
                f"{when.isoformat(timespec='seconds')}; it cannot join again",
            )  # fmt: skip
        node_id = kept or new_id()
        try:
            cmd = JoinNode(
                actor=GATEWAY, tenant=SYSTEM_TENANT, token_id=token_id,
                secret_sha256=digest(secret), node_id=node_id, hostname=hostname,
                address=address[:255],
            )  # fmt: skip
        except ValidationError as exc:
            if any(e["loc"] == ("token_id",) for e in exc.errors()):
                raise JoinRefused(401, "unknown-token", "unknown join token") from exc
            raise JoinRefused(400, "invalid", explain(exc)) from exc
        services = self.services
        outcome = await services.commands.execute(cmd, timeout=services.settings.command_timeout_s)
        if outcome is None:
            raise JoinRefused(503, "pending", "the join was not decided in time: try again")
        if not outcome.accepted:
            unknown = outcome.message == "unknown join token"
            status = 401 if unknown else 403 if outcome.code == Code.FORBIDDEN else 400
            code = "unknown-token" if unknown else outcome.code or "refused"
            raise JoinRefused(status, code, outcome.message)
        made = await self._token(token_id, max(outcome.event_seqs, default=0))
        nats = services.bus.settings
        urls = self.settings.nats_url or nats.url
        return {
            "node_id": node_id,
            "hostname": hostname,
            "cluster_id": self.settings.cluster_id,
            "resource_group": made.resource_group if made is not None else "default",
            "nats_urls": [u.strip() for u in urls.split(",") if u.strip()],
            "nats_token": nats.token or "",
            "terminal_key": (
                self.settings.terminal_key.get_secret_value() if self.settings.terminal_key else ""
            ),
        }
