"""Which errors say "the log is out of reach" (held and tried again) rather than anything
about the work (counted against it): ``events.bus.is_leaderless`` and ``is_unavailable``."""

from __future__ import annotations

import nats.errors
import nats.js.errors
import pytest

from events.bus import is_leaderless, is_unavailable
from events.writes import ConcurrencyConflict, OutcomeUnknownError, UnavailableError

LEADERLESS = [
    nats.errors.NoRespondersError(),
    nats.js.errors.NoStreamResponseError(),
    nats.js.errors.ServiceUnavailableError(code=503, err_code=10008, description="temporarily"),
    nats.js.errors.APIError(code=500, err_code=10118, description="stream offline"),
]
UNKNOWN_OR_GONE = [
    TimeoutError(),
    nats.errors.TimeoutError(),
    nats.errors.ConnectionClosedError(),
    OutcomeUnknownError("no answer"),
    UnavailableError("no leader"),
]
THE_WORK = [
    ValueError("bad input"),
    ConcurrencyConflict({}),
    nats.js.errors.BadRequestError(code=400, err_code=10071, description="wrong last sequence"),
    nats.js.errors.NotFoundError(code=404, err_code=10059, description="stream not found"),
    RuntimeError("disk on fire"),
]


@pytest.mark.parametrize("exc", LEADERLESS, ids=repr)
def test_no_leader_is_leaderless_and_unavailable(exc: Exception) -> None:
    assert is_leaderless(exc) and is_unavailable(exc)


@pytest.mark.parametrize("exc", UNKNOWN_OR_GONE, ids=repr)
def test_no_answer_is_unavailable_but_not_certainly_unstored(exc: Exception) -> None:
    assert is_unavailable(exc)
    assert not is_leaderless(exc)  # a timed-out write may still be stored


@pytest.mark.parametrize("exc", THE_WORK, ids=repr)
def test_errors_about_the_work_are_neither(exc: Exception) -> None:
    assert not is_leaderless(exc) and not is_unavailable(exc)
