"""Runs of commands on a real nats-server: a batch handler decides consecutive commands of its
type together, their outcomes are stored together, and every guarantee of one-at-a-time
handling still holds (one outcome each, redelivered or decided commands skipped, failures
retried and parked alone, commands kept in order). Also the scheduler's create runs: one
group commit and one queue event per keypair, and a conflict decides the rest again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from nats.js.errors import NotFoundError

from commands.bus import CommandBus
from commands.messages import CreateSession, TerminateSession
from commands.outcome import Accepted, Code, Decision, Outcome
from commands.parking import Retry
from commands.repository import pending_write
from commands.runner import BatchHandler, CommandRunner, Handler, HandlerContext
from commands.session.aggregate import Session
from events.bus import Bus
from events.store import EXPECTED_HEADER, EventStore
from schemas.ids import new_id, session_id_for
from schemas.subjects import COMMANDS_STREAM, AggregateType, outcome_subject
from tests.integration.test_commands import create_cmd, session_of, terminate_session

FAST = Retry(max_deliver=3, backoff=(0.1, 0.1))
StartRunner = Callable[..., Awaitable[CommandRunner]]


@pytest.fixture
async def start_runner(bus: Bus) -> AsyncIterator[StartRunner]:
    """Runners of one fresh durable consumer, removed afterwards."""
    durable = f"test-{new_id()[:8]}"
    started: list[CommandRunner] = []
    # These tests count what a runner of ``cmd.session.*`` decides and writes: a command some
    # earlier test sent to the shared server and left unconsumed would be counted too (the
    # stream is a work queue: the first consumer to come takes it).
    await bus.js.purge_stream(COMMANDS_STREAM, subject="cmd.session.>")

    async def start(
        batch_handlers: Mapping[type[Any], BatchHandler],
        handlers: Mapping[type[Any], Handler] | None = None,
    ) -> CommandRunner:
        runner = CommandRunner(
            bus, handlers or {}, durable=durable, aggregate_type=AggregateType.SESSION,
            retry=FAST, fetch_timeout=0.2, batch_handlers=batch_handlers,
        )  # fmt: skip
        await runner.start()
        started.append(runner)
        return runner

    try:
        yield start
    finally:
        for runner in started:
            await runner.stop()
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_consumer(COMMANDS_STREAM, durable)


class Creates:
    """A batch handler for creates that stores every session of a run in one group commit."""

    def __init__(self, poison: str = "poison", *, fail_runs_with_poison: bool = False) -> None:
        self.runs: list[list[str]] = []
        self.poison = poison
        self.fail_runs_with_poison = fail_runs_with_poison

    async def __call__(
        self, cmds: list[CreateSession], ctx: HandlerContext
    ) -> list[Decision | Exception]:
        self.runs.append([c.command_id for c in cmds])
        if self.fail_runs_with_poison and any(c.spec.image == self.poison for c in cmds):
            raise RuntimeError("the whole run failed")
        answers: list[Decision | Exception] = []
        writes = []
        for cmd in cmds:
            if cmd.spec.image == self.poison:
                answers.append(RuntimeError("disk on fire"))
                continue
            session = Session.request(session_id_for(cmd.command_id), cmd.spec, ctx.now())
            write = pending_write((session, 0), cmd.cause())
            assert write is not None
            writes.append(write)
            answers.append(Accepted((session.id,)))
        if writes:
            committed = await ctx.store.commit(writes)
            seqs = iter(committed.seqs)
            answers = [
                Accepted(a.aggregate_ids, (next(seqs),)) if isinstance(a, Accepted) else a
                for a in answers
            ]
        return answers


async def send_all(bus: Bus, cmds: list[Any]) -> None:
    """Sent before the runner starts: its first fetch takes them all."""
    commands = CommandBus(bus)
    for cmd in cmds:
        await commands.send(cmd)


async def outcomes_of(bus: Bus, cmds: list[Any], timeout: float = 10) -> list[Outcome]:
    commands = CommandBus(bus)
    found = await asyncio.gather(*(commands.wait_outcome(c.command_id, timeout) for c in cmds))
    assert all(o is not None for o in found)
    return [o for o in found if o is not None]


async def test_a_run_is_decided_in_one_call_and_each_command_gets_its_own_outcome(
    bus: Bus, start_runner: StartRunner
) -> None:
    # The server is shared: commands other tests left unconsumed on cmd.session.* are taken
    # by this fresh consumer too (and answered apart from this test's run).
    left = (await bus.js.stream_info(COMMANDS_STREAM, subjects_filter="cmd.session.>")).state
    stale = sum((left.subjects or {}).values())
    cmds = [create_cmd() for _ in range(20)]
    await send_all(bus, cmds)
    creates = Creates()
    runner = await start_runner({CreateSession: creates})
    outcomes = await outcomes_of(bus, cmds)
    await runner.wait_idle()  # every command acked

    assert [c.command_id for c in cmds] in creates.runs
    store = EventStore(bus)
    for cmd, outcome in zip(cmds, outcomes, strict=True):
        history = await store.read(session_of(cmd.command_id))
        assert outcome.accepted
        assert outcome.event_seqs == tuple(e.seq for e in history.events)
    assert (runner.stats.handled, runner.stats.outcomes_written) == (20 + stale, 20 + stale)


async def test_commands_already_decided_are_skipped_and_not_decided_again(
    bus: Bus, start_runner: StartRunner
) -> None:
    cmds = [create_cmd() for _ in range(5)]
    earlier = {}
    for cmd in cmds[:2]:  # decided before (a redelivery, or a re-send after the window)
        earlier[cmd.command_id] = Outcome.of(cmd.command_id, Accepted(), datetime.now(UTC))
        data = earlier[cmd.command_id].model_dump_json().encode()
        await bus.js.publish(outcome_subject(cmd.command_id), data)
    await send_all(bus, cmds)
    creates = Creates()
    runner = await start_runner({CreateSession: creates})
    outcomes = await outcomes_of(bus, cmds)
    await runner.wait_idle()

    assert creates.runs == [[c.command_id for c in cmds[2:]]]
    assert outcomes[:2] == [earlier[c.command_id] for c in cmds[:2]]
    assert runner.stats.skipped == 2


async def test_a_command_that_fails_in_a_run_is_retried_and_parked_alone(
    bus: Bus, start_runner: StartRunner
) -> None:
    cmds = [create_cmd(), create_cmd("poison"), create_cmd()]
    await send_all(bus, cmds)
    creates = Creates()
    runner = await start_runner({CreateSession: creates})
    good, parked, other = await outcomes_of(bus, cmds)
    await runner.wait_idle()

    assert good.accepted and other.accepted
    assert parked.code == Code.PARKED and "disk on fire" in parked.message
    poison_runs = [run for run in creates.runs if cmds[1].command_id in run]
    assert len(poison_runs) == FAST.max_deliver  # tried on each delivery, then parked
    assert runner.stats.parked == 1


async def test_a_run_whose_handler_fails_is_decided_one_by_one(
    bus: Bus, start_runner: StartRunner
) -> None:
    cmds = [create_cmd(), create_cmd(), create_cmd("poison"), create_cmd()]
    await send_all(bus, cmds)
    creates = Creates(fail_runs_with_poison=True)
    runner = await start_runner({CreateSession: creates})
    outcomes = await outcomes_of(bus, cmds)
    await runner.wait_idle()

    assert [o.accepted for o in outcomes] == [True, True, False, True]
    assert outcomes[2].code == Code.PARKED and "the whole run failed" in outcomes[2].message
    # The first delivery: the run, then each command alone; later deliveries: the poison one.
    ids = [c.command_id for c in cmds]
    assert creates.runs[: 1 + len(cmds)] == [ids] + [[i] for i in ids]
    assert runner.stats.parked == 1


async def test_commands_keep_their_order_around_a_run(bus: Bus, start_runner: StartRunner) -> None:
    first, second, third = create_cmd(), create_cmd(), create_cmd()
    stop = TerminateSession(
        actor=first.actor, tenant=first.tenant, session_id=session_id_for(first.command_id)
    )
    await send_all(bus, [first, second, stop, third])
    creates = Creates()
    runner = await start_runner({CreateSession: creates}, {TerminateSession: terminate_session})
    outcomes = await outcomes_of(bus, [first, second, stop, third])
    await runner.wait_idle()

    assert all(o.accepted for o in outcomes), outcomes
    assert creates.runs == [[first.command_id, second.command_id], [third.command_id]]
    history = await EventStore(bus).read(session_of(first.command_id))
    assert [e.name for e in history.events] == ["SessionRequested", "SessionCancelled"]


async def test_an_outcome_stored_meanwhile_by_another_runner_is_kept(
    bus: Bus, start_runner: StartRunner
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    creates = Creates()

    async def slow(cmds: list[CreateSession], ctx: HandlerContext) -> list[Decision | Exception]:
        entered.set()
        await release.wait()
        return await creates(cmds, ctx)

    cmds = [create_cmd(), create_cmd()]
    await send_all(bus, cmds)
    runner = await start_runner({CreateSession: slow})
    await asyncio.wait_for(entered.wait(), 5)
    other = Outcome.of(cmds[0].command_id, Accepted(message="first"), datetime.now(UTC))
    await bus.js.publish(
        outcome_subject(cmds[0].command_id), other.model_dump_json().encode(),
        headers={EXPECTED_HEADER: "0"},
    )  # fmt: skip
    release.set()
    kept, written = await outcomes_of(bus, cmds)
    await runner.wait_idle()

    assert kept == other
    assert written.accepted and written.message == "accepted"
    assert (runner.stats.outcomes_found, runner.stats.outcomes_written) == (1, 1)
