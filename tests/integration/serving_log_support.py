"""An endpoint's events written straight to the real log, as the serving controller would
(its rules are not what these tests are about): one guarded append per call, in order; and
``MinimalDecider``, which decides ``cmd.endpoint.*`` by writing those events, for the
gateway's tests while they test the gateway."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

import nats.errors
from nats.js.errors import NotFoundError

from commands.messages import Command, parse_command
from commands.outcome import Outcome, OutcomeStatus
from commands.outcome_log import OutcomeLog
from commands.serving.messages import (
    CreateEndpoint,
    CreateEndpointToken,
    DestroyEndpoint,
    ModifyEndpoint,
    RevokeEndpointToken,
    ScaleEndpoint,
    UpdateEndpoint,
)
from events.bus import Bus
from events.catalogue import Event
from events.domain import serving as ev
from events.envelope import Envelope
from events.store import EventStore
from events.writes import AggregateRef, Write
from schemas.ids import event_id_for, new_id, session_id_for
from schemas.principal import Actor, Tenant
from schemas.resources import ResourceSlots
from schemas.serving import (
    Revision,
    Rollout,
    ScaleSource,
    Scaling,
    endpoint_id_for,
    replica_command_id,
)
from schemas.subjects import COMMANDS_STREAM, AggregateType
from schemas.tenancy import SessionOwner
from tests.support import NOW

SERVING = Actor.service("serving")


def revision(image: str = "jetyard-echo:1", **more: Any) -> Revision:
    return Revision(
        image=image, port=8000, resources=ResourceSlots.of(cpu="0.5", memory=256 << 20), **more
    )


class EndpointLog:
    """One endpoint's events, appended one guarded write at a time."""

    def __init__(self, store: EventStore, owner: SessionOwner, name: str | None = None) -> None:
        self.store = store
        self.owner = owner
        self.name = name or f"ep-{new_id()[:8].lower()}"
        self.id = endpoint_id_for(self.name)
        self.ref = AggregateRef(AggregateType.ENDPOINT, self.id)
        self.version = 0
        self.guard = 0
        self.clock = NOW
        self.revision = 1
        self.desired = 1

    def now(self) -> Any:
        self.clock += timedelta(seconds=1)
        return self.clock

    async def write(self, *events: Event) -> int:
        """Append ``events`` in one write; returns the seq of the last."""
        cause = new_id()
        envelopes = []
        for event in events:
            self.version += 1
            envelopes.append(
                Envelope(
                    event_id=event_id_for(cause, "endpoint", self.id, self.version),
                    name=event.event_name,
                    schema_version=event.schema_version,
                    aggregate_type=AggregateType.ENDPOINT,
                    aggregate_id=self.id,
                    aggregate_version=self.version,
                    occurred_at=self.now(),
                    causation_id=cause,
                    correlation_id=cause,
                    actor=SERVING,
                    tenant=Tenant(domain=self.owner.domain, project=self.owner.project_id),
                    payload=event.model_dump(mode="json"),
                )
            )
        committed = await self.store.append(Write(self.ref, self.guard, tuple(envelopes)))
        self.guard = committed.last_seqs[self.ref]
        return committed.seqs[-1]

    async def create(self, replicas: int = 2, **more: Any) -> int:
        scaling = more.pop("scaling", Scaling(min_replicas=0, max_replicas=4))
        return await self.write(
            ev.EndpointCreated(
                name=self.name, owner=self.owner, spec=revision(), replicas=replicas,
                scaling=scaling, **more,
            )
        )  # fmt: skip

    def session_of(self, replica: int) -> str:
        return session_id_for(replica_command_id(self.id, "", replica))

    async def request(self, replica: int, revision_number: int = 1) -> int:
        return await self.write(
            ev.ReplicaRequested(
                replica=replica, revision=revision_number, session_id=self.session_of(replica),
                reason="scaled out",
            )
        )  # fmt: skip


class MinimalDecider:
    """Decides ``cmd.endpoint.*`` (except ``wake``) by writing the events the serving
    controller would, without its rules: no replicas, no probes. Owns one durable consumer,
    removed on ``stop``; keeps every command it took (``taken``)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.durable = f"serving-test-{new_id()[:8]}"
        self.taken: list[Command] = []
        self.logs: dict[str, EndpointLog] = {}
        self._outcomes = OutcomeLog(bus, timeout=2.0)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        sub = await self.bus.js.pull_subscribe(
            "cmd.endpoint.>", durable=self.durable, stream=COMMANDS_STREAM
        )
        self._task = asyncio.create_task(self._run(sub))

    async def stop(self) -> None:
        try:
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
        finally:
            # Whatever its task did, its consumer goes: a work queue takes one consumer per
            # filter, and the next test's decider (or controller) needs that filter.
            with contextlib.suppress(NotFoundError):
                await self.bus.js.delete_consumer(COMMANDS_STREAM, self.durable)

    async def _run(self, sub: Any) -> None:
        while True:
            try:
                messages = await sub.fetch(16, timeout=0.2)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            for message in messages:
                command = parse_command(message.subject, message.data)
                endpoint_id = getattr(command, "endpoint_id", None)
                if endpoint_id is not None and endpoint_id not in self.logs:
                    # Another test's command left in the work queue: not this decider's.
                    await message.ack()
                    continue
                self.taken.append(command)
                seq = await self._decide(command)
                outcome = Outcome(
                    command_id=command.command_id, status=OutcomeStatus.ACCEPTED,
                    message="accepted", event_seqs=(seq,), decided_at=NOW,
                )  # fmt: skip
                await self._outcomes.store([outcome])
                await message.ack()

    async def _decide(self, command: Command) -> int:
        if isinstance(command, CreateEndpoint):
            log = EndpointLog(EventStore(self.bus), command.owner, command.name)
            self.logs[log.id] = log
            log.desired = command.replicas
            return await log.write(
                ev.EndpointCreated(
                    name=command.name, owner=command.owner, spec=command.spec,
                    replicas=command.replicas, scaling=command.scaling, rollout=command.rollout,
                    open_to_public=command.open_to_public,
                )
            )  # fmt: skip
        log = self.logs[getattr(command, "endpoint_id")]  # noqa: B009 (each other one has it)
        match command:
            case ScaleEndpoint(replicas=replicas):
                previous, log.desired = log.desired, replicas
                scaled = ev.EndpointScaled(
                    replicas=replicas, previous=previous, source=ScaleSource.MANUAL,
                    reason=f"set to {replicas} by {command.actor.id}",
                )  # fmt: skip
                return await log.write(scaled)
            case UpdateEndpoint(spec=spec, reason=reason):
                log.revision += 1
                added = ev.EndpointRevisionAdded(revision=log.revision, spec=spec, reason=reason)
                return await log.write(added)
            case ModifyEndpoint(scaling=scaling, rollout=rollout, open_to_public=public):
                modified = ev.EndpointModified(
                    scaling=scaling or Scaling(), rollout=rollout or Rollout(),
                    open_to_public=bool(public),
                )  # fmt: skip
                return await log.write(modified)
            case CreateEndpointToken():
                issued = ev.EndpointTokenIssued(
                    token_id=command.token_id, secret_sha256=command.secret_sha256,
                    expires_at=NOW + timedelta(seconds=command.expires_in_s), note=command.note,
                )  # fmt: skip
                return await log.write(issued)
            case RevokeEndpointToken(token_id=token_id, reason=reason):
                return await log.write(ev.EndpointTokenRevoked(token_id=token_id, reason=reason))
            case DestroyEndpoint(reason=reason):
                return await log.write(
                    ev.EndpointDestroyRequested(reason=reason), ev.EndpointDestroyed()
                )
        raise AssertionError(f"no decision for {command!r}")
