"""Outcomes stored in bulk on a real nats-server: a run's outcomes go as one atomic batch, and
when one of them is already stored the batch is refused whole and each outcome is stored on
its own, so that the one stored first is kept and the others are written."""

from __future__ import annotations

from datetime import UTC, datetime

from commands.outcome import Accepted, Outcome
from commands.outcome_log import BATCH_MAX, OutcomeLog
from events.bus import Bus
from events.store import EXPECTED_HEADER
from schemas.ids import new_id
from schemas.subjects import OUTCOMES_STREAM, outcome_subject


def outcomes(count: int, message: str = "accepted") -> list[Outcome]:
    now = datetime.now(UTC)
    return [Outcome.of(new_id(), Accepted(message=message), now) for _ in range(count)]


async def stored(bus: Bus, outcome: Outcome) -> Outcome:
    msg = await bus.js.get_last_msg(OUTCOMES_STREAM, outcome_subject(outcome.command_id))
    assert msg.data is not None
    return Outcome.model_validate_json(msg.data)


async def test_a_run_of_outcomes_is_one_atomic_batch(bus: Bus) -> None:
    log = OutcomeLog(bus, timeout=5.0)
    run = outcomes(30)

    assert await log.store(run) == [True] * 30
    assert (log.batches, log.one_by_one) == (1, 0)
    assert await log.decided([o.command_id for o in run]) == {o.command_id for o in run}
    assert [await stored(bus, o) for o in run] == run


async def test_more_than_a_batch_holds_goes_in_several(bus: Bus) -> None:
    log = OutcomeLog(bus, timeout=10.0)
    run = outcomes(BATCH_MAX + 3)

    assert await log.store(run) == [True] * len(run)
    assert (log.batches, log.one_by_one) == (2, 0)
    assert await log.decided([o.command_id for o in run]) == {o.command_id for o in run}


async def test_an_outcome_stored_already_is_kept_and_the_others_are_written(bus: Bus) -> None:
    log = OutcomeLog(bus, timeout=5.0)
    run = outcomes(5)
    first = Outcome.of(run[2].command_id, Accepted(message="first"), datetime.now(UTC))
    await bus.js.publish(
        outcome_subject(first.command_id), first.model_dump_json().encode(),
        headers={EXPECTED_HEADER: "0"},
    )  # fmt: skip

    assert await log.store(run) == [True, True, False, True, True]
    assert (log.batches, log.one_by_one) == (0, 5)
    assert await stored(bus, run[2]) == first
    assert [await stored(bus, run[i]) for i in (0, 1, 3, 4)] == [run[i] for i in (0, 1, 3, 4)]


async def test_a_single_outcome_is_stored_on_its_own(bus: Bus) -> None:
    log = OutcomeLog(bus, timeout=5.0)
    (one,) = outcomes(1)

    assert await log.store([one]) == [True]
    assert await log.store([one]) == [False]
    assert (log.batches, log.one_by_one) == (0, 2)
    assert await stored(bus, one) == one
