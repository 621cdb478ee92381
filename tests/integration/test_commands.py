"""Commands on a real nats-server: dedupe, one outcome each, replicas, poison parking, waiting."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats.errors
import pytest
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from commands.bus import CommandBus
from commands.errors import IllegalTransition
from commands.messages import CreateSession, TerminateSession
from commands.outcome import Accepted, Code, Decision, Outcome, OutcomeStatus, Rejected
from commands.parking import PARK_DELIVERIES_HEADER, PARK_ERROR_HEADER, PARK_REASON_HEADER, Retry
from commands.repository import load, pending_write
from commands.runner import CommandRunner, Handler, HandlerContext
from commands.session.aggregate import Session
from events.bus import Bus, connect, ensure_streams
from events.store import EXPECTED_HEADER, EventStore
from events.writes import AggregateRef, ConcurrencyConflict, UnavailableError
from jetyard.runtime.natsserver import NatsServer
from schemas.ids import new_id, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import KernelSpec, SessionSpec
from schemas.settings import NatsSettings
from schemas.subjects import (
    COMMANDS_STREAM,
    OUTCOMES_STREAM,
    PARKED_STREAM,
    AggregateType,
    outcome_subject,
    parked_subject,
)
from tests.integration.leftovers import running_tasks, subscriptions, tasks_left

FAST = Retry(max_deliver=3, backoff=(0.1, 0.1))
StartRunner = Callable[..., Awaitable[CommandRunner]]


def create_cmd(image: str = "python:3.12") -> CreateSession:
    need = {"cpu_milli": 500, "memory_bytes": 64 << 20}
    spec = SessionSpec(image=image, kernels=(KernelSpec(resources=need),))
    return CreateSession(actor=Actor.service("tests"), tenant=SYSTEM_TENANT, spec=spec)


def session_of(command_id: str) -> AggregateRef:
    return AggregateRef(AggregateType.SESSION, session_id_for(command_id))


def create_session_handler(calls: list[str]) -> Handler:
    """The create handler as the scheduler writes it: decide on the Session aggregate, then a
    create-once append (expected sequence 0)."""

    async def create_session(cmd: CreateSession, ctx: HandlerContext) -> Decision:
        calls.append(cmd.command_id)
        session = Session.request(session_id_for(cmd.command_id), cmd.spec, ctx.now())
        write = pending_write((session, 0), cmd.cause())
        assert write is not None
        try:
            # A second create of the same session cannot be stored; the store recognises a
            # retry of its own write by the event ids and reports it stored.
            return Accepted.of(await ctx.store.append(write))
        except ConcurrencyConflict:
            return Rejected(Code.CONFLICT, f"session {session.id} already exists")

    return create_session


async def terminate_session(cmd: TerminateSession, ctx: HandlerContext) -> Decision:
    """Load, decide, append; a lost race reloads and decides again."""
    while True:
        loaded = await load(ctx.store, Session, cmd.session_id)
        if loaded.aggregate is None:
            return Rejected(Code.NOT_FOUND, f"no session {cmd.session_id}")
        loaded.aggregate.terminate(cmd.reason, ctx.now())  # IllegalTransition -> refused
        write = pending_write(loaded, cmd.cause())
        if write is None:
            return Accepted((cmd.session_id,), (), "already terminating or ended")
        try:
            return Accepted.of(await ctx.store.append(write))
        except ConcurrencyConflict:
            continue


@pytest.fixture
async def start_runner(bus: Bus) -> AsyncIterator[StartRunner]:
    """Runners of one fresh durable consumer, removed afterwards: on a work-queue stream only
    one consumer may hold ``cmd.session.*`` at a time."""
    durable = f"test-{new_id()[:8]}"
    started: list[CommandRunner] = []

    async def start(
        handlers: Mapping[type[Any], Handler], *, on: Bus = bus, retry: Retry = FAST
    ) -> CommandRunner:
        runner = CommandRunner(
            on, handlers, durable=durable, aggregate_type=AggregateType.SESSION,
            retry=retry, fetch_timeout=0.2,
        )  # fmt: skip
        await runner.start()
        started.append(runner)
        return runner

    try:
        yield start
    finally:
        for runner in started:
            await runner.stop()
        with contextlib.suppress(NotFoundError):  # a test on another server made its own
            await bus.js.delete_consumer(COMMANDS_STREAM, durable)


async def count_events(bus: Bus, command_id: str) -> list[int]:
    history = await EventStore(bus).read(session_of(command_id))
    return [e.seq for e in history.events]


async def test_sent_twice_is_stored_once_and_decided_once(
    bus: Bus, start_runner: StartRunner
) -> None:
    commands, calls = CommandBus(bus), list[str]()
    cmd = create_cmd()
    first, second = await commands.send(cmd), await commands.send(cmd)
    assert (first.duplicate, second.duplicate, second.seq) == (None, True, first.seq)

    runner = await start_runner({CreateSession: create_session_handler(calls)})
    outcome = await commands.wait_outcome(cmd.command_id, timeout=5)
    await runner.wait_idle()
    assert outcome is not None
    assert outcome.accepted
    assert calls == [cmd.command_id]
    seqs = await count_events(bus, cmd.command_id)
    assert len(seqs) == 1
    assert (outcome.aggregate_ids, outcome.event_seqs) == (
        (session_id_for(cmd.command_id),),
        (seqs[0],),
    )


@pytest.fixture
async def short_window_bus(tmp_path: Path) -> AsyncIterator[Bus]:
    server = NatsServer(data_dir=tmp_path / "nats").start()
    connected = await connect(NatsSettings(url=server.url, duplicate_window_s=1), name="tests")
    await ensure_streams(connected)
    yield connected
    await connected.close()
    server.stop()


async def test_resent_after_the_duplicate_window_finds_its_outcome(
    short_window_bus: Bus, start_runner: StartRunner
) -> None:
    commands, calls = CommandBus(short_window_bus), list[str]()
    runner = await start_runner({CreateSession: create_session_handler(calls)}, on=short_window_bus)
    cmd = create_cmd()
    first = await commands.execute(cmd, timeout=5)
    await asyncio.sleep(1.5)  # past the 1 s window: the server stores the command again
    assert (await commands.send(cmd)).duplicate is None
    await runner.wait_idle()
    assert (await commands.outcome(cmd.command_id)) == first
    assert (calls, runner.stats.skipped) == ([cmd.command_id], 1)
    assert len(await count_events(short_window_bus, cmd.command_id)) == 1
    await runner.stop()


async def test_create_handler_called_twice_creates_once(bus: Bus) -> None:
    """Even without the outcome check, create-once (expected sequence 0) holds."""
    calls: list[str] = []
    handler, ctx, cmd = create_session_handler(calls), HandlerContext(EventStore(bus)), create_cmd()
    first, second = await handler(cmd, ctx), await handler(cmd, ctx)
    assert first == second
    assert isinstance(first, Accepted)
    assert list(first.event_seqs) == await count_events(bus, cmd.command_id)


async def test_two_replicas_on_one_consumer_give_each_command_one_outcome(
    bus: Bus, start_runner: StartRunner
) -> None:
    commands, calls = CommandBus(bus), list[str]()
    handlers: dict[type[Any], Handler] = {CreateSession: create_session_handler(calls)}
    replicas = [await start_runner(handlers), await start_runner(handlers)]
    cmds = [create_cmd() for _ in range(40)]
    for cmd in cmds:
        await commands.send(cmd)
    outcomes = await asyncio.gather(*(commands.wait_outcome(c.command_id, 10) for c in cmds))
    for cmd, outcome in zip(cmds, outcomes, strict=True):
        assert outcome is not None
        assert outcome.accepted
        assert list(outcome.event_seqs) == await count_events(bus, cmd.command_id)
    for replica in replicas:
        await replica.wait_idle()
    assert sum(r.stats.outcomes_written for r in replicas) == len(cmds)


async def test_a_second_outcome_is_refused_and_the_first_one_kept(
    bus: Bus, start_runner: StartRunner
) -> None:
    commands, entered, release = CommandBus(bus), asyncio.Event(), asyncio.Event()

    async def slow(cmd: CreateSession, ctx: HandlerContext) -> Decision:
        entered.set()
        await release.wait()
        return Accepted(message="late")

    runner = await start_runner({CreateSession: slow})
    cmd = create_cmd()
    await commands.send(cmd)
    await asyncio.wait_for(entered.wait(), 5)
    # Another replica decides first (e.g. after a redelivery) and stores its outcome.
    other = Outcome.of(cmd.command_id, Accepted(message="first"), datetime.now(UTC))
    await bus.js.publish(
        outcome_subject(cmd.command_id), other.model_dump_json().encode(),
        headers={EXPECTED_HEADER: "0"},
    )  # fmt: skip
    release.set()
    await runner.wait_idle()
    assert await commands.outcome(cmd.command_id) == other
    assert (runner.stats.outcomes_found, runner.stats.outcomes_written) == (1, 0)


async def test_poison_command_is_parked_after_max_deliver_and_the_next_one_runs(
    bus: Bus, start_runner: StartRunner
) -> None:
    commands, attempts, calls = CommandBus(bus), list[int](), list[str]()
    create = create_session_handler(calls)

    async def flaky(cmd: CreateSession, ctx: HandlerContext) -> Decision:
        if cmd.spec.image == "poison":
            attempts.append(1)
            raise RuntimeError("disk on fire")
        return await create(cmd, ctx)

    runner = await start_runner({CreateSession: flaky})
    poison, good = create_cmd("poison"), create_cmd()
    sent = await commands.send(poison)
    await commands.send(good)
    good_outcome = await commands.wait_outcome(good.command_id, 5)
    parked_outcome = await commands.wait_outcome(poison.command_id, 5)
    await runner.wait_idle()

    assert good_outcome is not None
    assert good_outcome.accepted
    assert parked_outcome is not None
    assert (parked_outcome.status, parked_outcome.code) == (OutcomeStatus.REJECTED, Code.PARKED)
    assert "RuntimeError: disk on fire" in parked_outcome.message
    assert len(attempts) == FAST.max_deliver
    parked = await bus.js.get_last_msg(
        PARKED_STREAM, parked_subject(poison.command_id), direct=True
    )
    headers = parked.headers or {}
    assert headers[PARK_REASON_HEADER] == "RuntimeError: disk on fire"
    assert (headers[PARK_ERROR_HEADER], headers[PARK_DELIVERIES_HEADER]) == ("RuntimeError", "3")
    assert CreateSession.model_validate_json(parked.data or b"") == poison
    assert runner.stats.parked == 1
    with pytest.raises(NotFoundError):  # terminated, so gone from the work queue
        await bus.js.get_msg(COMMANDS_STREAM, sent.seq)


async def test_invalid_commands_are_rejected_with_a_readable_reason(
    bus: Bus, start_runner: StartRunner
) -> None:
    commands = CommandBus(bus)
    await start_runner({})
    typo = json.loads(create_cmd().model_dump_json()) | {"colour": "blue"}
    await bus.js.publish(CreateSession.subject(), json.dumps(typo).encode())
    unknown = new_id()
    await bus.js.publish("cmd.session.fly", b"{}", headers={"Nats-Msg-Id": unknown})

    rejected = await commands.wait_outcome(typo["command_id"], 5)
    assert rejected is not None
    assert rejected.code == Code.INVALID
    assert rejected.message == "CreateSession is not valid: unknown field 'colour'"
    rejected = await commands.wait_outcome(unknown, 5)
    assert rejected is not None
    assert rejected.code == Code.INVALID
    assert "cmd.session.fly" in rejected.message


async def test_wait_outcome_gives_none_after_its_deadline(bus: Bus) -> None:
    commands, cmd = CommandBus(bus), create_cmd()
    ack = await commands.send(cmd)  # no runner: nobody decides it
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await commands.wait_outcome(cmd.command_id, timeout=0.3) is None
    assert loop.time() - started >= 0.3
    await bus.js.delete_msg(COMMANDS_STREAM, ack.seq)  # leave nothing for later tests' runners


async def test_wait_outcome_trusts_only_the_stored_outcome(bus: Bus) -> None:
    commands, command_id = CommandBus(bus), new_id()
    outcome = Outcome.of(command_id, Accepted(message="stored"), datetime.now(UTC))

    async def decide_later() -> None:
        await asyncio.sleep(0.2)
        # JetStream refuses this one (wrong stream), but a core subscriber still receives it.
        fake = outcome.model_copy(update={"message": "refused"}).model_dump_json().encode()
        await bus.nc.publish(
            outcome_subject(command_id), fake, headers={"Nats-Expected-Stream": "NO"}
        )
        await asyncio.sleep(0.2)
        await bus.js.publish(outcome_subject(command_id), outcome.model_dump_json().encode())

    later = asyncio.create_task(decide_later())
    assert await commands.wait_outcome(command_id, timeout=5) == outcome
    await later


async def test_wait_outcome_returns_an_outcome_stored_before_it_started(bus: Bus) -> None:
    commands, command_id = CommandBus(bus), new_id()
    outcome = Outcome.of(command_id, Rejected(Code.NOT_FOUND, "no such session"), datetime.now(UTC))
    await bus.js.publish(outcome_subject(command_id), outcome.model_dump_json().encode())
    assert await commands.wait_outcome(command_id, timeout=0.5) == outcome
    assert (await bus.js.stream_info(OUTCOMES_STREAM)).config.allow_direct


async def test_command_whose_runners_die_on_every_delivery_is_parked(
    bus: Bus, nats_settings: NatsSettings, start_runner: StartRunner
) -> None:
    """No answer on any delivery, and no runner alive when the last one's ack wait ends: the
    next runner to start gets it once more and parks it, before a handler sees it again."""
    retry, commands, cmd = Retry(max_deliver=2, backoff=(0.2,)), CommandBus(bus), create_cmd()
    entered, never = asyncio.Event(), asyncio.Event()

    async def hang(cmd: CreateSession, ctx: HandlerContext) -> Decision:
        entered.set()
        await never.wait()
        return Accepted()

    try:
        for delivery in range(1, retry.max_deliver + 1):
            connection = await connect(nats_settings, name="doomed")
            await start_runner({CreateSession: hang}, on=connection, retry=retry)
            if delivery == 1:
                sent = await commands.send(cmd)
            await asyncio.wait_for(entered.wait(), 5)
            entered.clear()
            await connection.close()  # the replica dies holding the command
        await asyncio.sleep(3 * retry.backoff[-1])  # every runner down past the last ack wait
        await start_runner({CreateSession: hang}, retry=retry)
        outcome = await commands.wait_outcome(cmd.command_id, 5)
    finally:
        never.set()  # lets the dead replicas' handlers return, so they can stop
    assert outcome is not None
    assert outcome.code == Code.PARKED
    assert "no answer after 2 deliveries" in outcome.message
    parked = await bus.js.get_last_msg(PARKED_STREAM, parked_subject(cmd.command_id), direct=True)
    assert (parked.headers or {})[PARK_DELIVERIES_HEADER] == "2"
    with pytest.raises(NotFoundError):  # parked, so gone from the work queue
        await bus.js.get_msg(COMMANDS_STREAM, sent.seq)


async def test_create_then_terminate_through_the_runner(
    bus: Bus, start_runner: StartRunner
) -> None:
    commands, calls = CommandBus(bus), list[str]()
    await start_runner(
        {CreateSession: create_session_handler(calls), TerminateSession: terminate_session}
    )
    create = create_cmd()
    created = await commands.execute(create, timeout=5)
    assert created is not None and created.accepted
    session_id = session_id_for(create.command_id)
    assert created.aggregate_ids == (session_id,)

    stop = TerminateSession(
        actor=create.actor, tenant=create.tenant, session_id=session_id, reason="done"
    )
    stopped = await commands.execute(stop, timeout=5)
    assert stopped is not None and stopped.accepted
    history = await EventStore(bus).read(session_of(create.command_id))
    assert [e.name for e in history.events] == ["SessionRequested", "SessionCancelled"]
    assert history.events[-1].envelope.causation_id == stop.command_id
    assert history.events[-1].envelope.actor == create.actor

    again = TerminateSession(actor=create.actor, tenant=create.tenant, session_id=session_id)
    outcome = await commands.execute(again, timeout=5)
    assert outcome is not None and outcome.accepted  # ending an ended session changes nothing
    assert len((await EventStore(bus).read(session_of(create.command_id))).events) == 2

    missing = TerminateSession(actor=create.actor, tenant=create.tenant, session_id=new_id())
    refused = await commands.execute(missing, timeout=5)
    assert refused is not None and refused.code == Code.NOT_FOUND


async def test_a_domain_rule_refusal_is_an_outcome_not_a_retry(
    bus: Bus, start_runner: StartRunner
) -> None:
    attempts: list[str] = []

    async def refuse(cmd: CreateSession, ctx: HandlerContext) -> Decision:
        attempts.append(cmd.command_id)
        raise IllegalTransition("session", "TERMINATED", "RUNNING")

    runner = await start_runner({CreateSession: refuse})
    cmd = create_cmd()
    outcome = await CommandBus(bus).execute(cmd, timeout=5)
    await runner.wait_idle()
    assert outcome is not None and outcome.code == Code.REFUSED
    assert "cannot go from TERMINATED to RUNNING" in outcome.message
    assert attempts == [cmd.command_id]  # decided once, never parked


class _BindRefused:
    """The real JetStream context, except that binding to a consumer fails."""

    def __init__(self, inner: JetStreamContext) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def pull_subscribe_bind(self, *args: Any, **kwargs: Any) -> Any:
        raise nats.errors.ConnectionReconnectingError


async def test_a_start_that_fails_after_its_consumer_leaves_no_subscription(
    nats_settings: NatsSettings,
) -> None:
    connection = await connect(nats_settings, name="half-started")
    durable = f"test-{new_id()[:8]}"
    try:
        refusing = Bus(nc=connection.nc, js=_BindRefused(connection.js), settings=nats_settings)  # type: ignore[arg-type]
        runner = CommandRunner(refusing, {}, durable=durable, aggregate_type=AggregateType.SESSION)
        await connection.js.stream_info(COMMANDS_STREAM)  # nats-py's own reply inbox, made now
        before, tasks = subscriptions(connection), running_tasks()
        with pytest.raises(nats.errors.ConnectionReconnectingError):
            await runner.start()
        assert subscriptions(connection) == before
        assert await tasks_left(tasks) == []
    finally:
        with contextlib.suppress(NotFoundError):
            await connection.js.delete_consumer(COMMANDS_STREAM, durable)
        await connection.close()


async def test_a_command_met_by_an_unavailable_log_is_held_not_parked(
    bus: Bus, start_runner: StartRunner
) -> None:
    """An election (the log answering "no leader") is not the command's fault: the runner
    keeps it in hand and tries again, more times than it would ever retry a failing command,
    without a redelivery, and the next command waits behind it (order kept)."""
    commands, calls, order = CommandBus(bus), list[str](), list[str]()
    create = create_session_handler(calls)
    tries = FAST.max_deliver + 2

    async def election(cmd: CreateSession, ctx: HandlerContext) -> Decision:
        order.append(cmd.spec.image)
        if cmd.spec.image == "during-election" and order.count("during-election") < tries:
            raise UnavailableError("the log has no leader for ev.session.x; nothing was stored")
        return await create(cmd, ctx)

    runner = await start_runner({CreateSession: election})
    held, behind = create_cmd("during-election"), create_cmd("behind")
    await commands.send(held)
    await commands.send(behind)
    outcome = await commands.wait_outcome(held.command_id, 20)
    assert outcome is not None and outcome.accepted, outcome
    assert (await commands.wait_outcome(behind.command_id, 5)) is not None
    assert order == ["during-election"] * tries + ["behind"]
    assert (runner.stats.parked, runner.stats.retried) == (0, 0)
    assert runner.stats.held == tries - 1
