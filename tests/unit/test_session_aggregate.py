"""Session lifecycle rules, as given-events / when-command / then-events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from itertools import product

import pytest

from commands.errors import IllegalTransition
from commands.session.aggregate import Session
from commands.session.rules import (
    TRANSITIONS,
    InvalidPlacementError,
    StatusChange,
    UnknownKernelError,
)
from events.catalogue import Event
from events.domain.session import (
    SessionCancelled,
    SessionCreating,
    SessionFailed,
    SessionPendingReasonChanged,
    SessionPreparing,
    SessionPulling,
    SessionRequested,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from schemas.ids import kernel_id_for
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionResult, SessionSpec, SessionStatus
from tests.unit.scenario import CAUSE, T0, at, given, then

S = SessionStatus
SID = "session-1"
KID = kernel_id_for(SID, 0)
NODE = "node-1"
SPEC = SessionSpec(
    image="python:3.12", kernels=(KernelSpec(resources=ResourceSlots.of(cpu=1, gpu="0.5")),)
)

REQUESTED = SessionRequested(spec=SPEC, kernel_ids=(KID,))
SCHEDULED = (REQUESTED, SessionScheduled(placements={KID: NODE}, reason="placed"))
RUNNING = (*SCHEDULED, SessionStarted(reason="kernel started"))

# The events that bring a session into each status.
PATHS: dict[SessionStatus, tuple[Event, ...]] = {
    S.PENDING: (REQUESTED,),
    S.SCHEDULED: SCHEDULED,
    S.PULLING: (*SCHEDULED, SessionPulling(reason="pulling image x on node-1")),
    S.PREPARING: (*SCHEDULED, SessionPreparing(reason="pulling image")),
    S.CREATING: (*SCHEDULED, SessionCreating(reason="creating container")),
    S.RUNNING: RUNNING,
    S.TERMINATING: (*RUNNING, SessionTerminating(reason="user request")),
    S.TERMINATED: (*RUNNING, SessionTerminated(reason="exited", exit_code=0)),
    S.CANCELLED: (REQUESTED, SessionCancelled(reason="user request")),
    S.ERROR: (*SCHEDULED, SessionFailed(reason="kernel failed")),
}


def session_in(status: SessionStatus) -> Session:
    session = given(Session, SID, *PATHS[status])
    assert session.status is status
    return session


NOW = at(60)


def test_request_derives_the_kernel_ids_and_waits() -> None:
    session = Session.request(SID, SPEC, T0)

    assert then(session) == [REQUESTED]
    assert session.status is S.PENDING
    assert session.kernel_ids == (KID,)


def test_schedule_places_every_kernel() -> None:
    session = session_in(S.PENDING)

    session.schedule({KID: NODE}, "placed on node-1", NOW)

    assert then(session) == [SessionScheduled(placements={KID: NODE}, reason="placed on node-1")]
    assert session.placements == {KID: NODE}


@pytest.mark.parametrize("placements", [{}, {"other-kernel": NODE}, {KID: NODE, "extra": NODE}])
def test_schedule_refuses_a_placement_that_does_not_name_exactly_the_kernels(
    placements: dict[str, str],
) -> None:
    session = session_in(S.PENDING)

    with pytest.raises(InvalidPlacementError, match=SID):
        session.schedule(placements, "placed", NOW)
    assert then(session) == []


def test_a_pending_reason_is_written_only_when_it_changes() -> None:
    session = session_in(S.PENDING)

    assert session.note_pending_reason("fits nowhere: gpu", NOW)
    assert not session.note_pending_reason("fits nowhere: gpu", at(61))

    assert then(session) == [SessionPendingReasonChanged(reason="fits nowhere: gpu")]
    assert session.status is S.PENDING
    assert session.reason == "fits nowhere: gpu"


@pytest.mark.parametrize("status", [S.SCHEDULED, S.PREPARING, S.CREATING])
def test_a_started_kernel_makes_the_session_run(status: SessionStatus) -> None:
    session = session_in(status)

    session.kernel_started(KID, NOW)

    assert then(session) == [SessionStarted(reason="kernel started")]
    assert session.status is S.RUNNING


@pytest.mark.parametrize("status", [S.RUNNING, S.TERMINATING, S.TERMINATED, S.CANCELLED, S.ERROR])
def test_a_started_kernel_changes_nothing_once_running_or_ending(status: SessionStatus) -> None:
    session = session_in(status)

    assert not session.kernel_started(KID, NOW)
    assert then(session) == []
    assert session.status is status


@pytest.mark.parametrize("status", [S.RUNNING, S.TERMINATING, S.SCHEDULED])
def test_an_exited_kernel_ends_the_session_with_its_exit_code(status: SessionStatus) -> None:
    session = session_in(status)

    session.kernel_exited(KID, 3, "exited", NOW)

    # A session asked to end keeps why as its final reason; by itself, the kernel's says.
    asked = status is S.TERMINATING
    reason = session_in(status).reason if asked else "exited"
    assert then(session) == [SessionTerminated(reason=reason, exit_code=3, asked=asked)]
    assert session.result is SessionResult.FAILURE  # what a dependent asks: it did not exit 0
    assert session.status is S.TERMINATED
    assert session.exit_code == 3


def test_a_kernel_that_failed_to_start_puts_the_session_in_error() -> None:
    session = session_in(S.CREATING)

    session.kernel_failed(KID, "image not found", NOW)

    assert then(session) == [SessionFailed(reason="image not found")]
    assert session.status is S.ERROR


@pytest.mark.parametrize(
    "fact",
    [
        lambda s: s.kernel_started(KID, NOW),
        lambda s: s.kernel_exited(KID, 0, "exited", NOW),
        lambda s: s.kernel_failed(KID, "no image", NOW),
    ],
    ids=["started", "exited", "failed"],
)
def test_kernel_facts_are_refused_for_an_unplaced_session(
    fact: Callable[[Session], bool],
) -> None:
    session = session_in(S.PENDING)

    with pytest.raises(IllegalTransition, match="from PENDING"):
        fact(session)
    assert then(session) == []


def test_kernel_facts_for_a_foreign_kernel_are_refused() -> None:
    session = session_in(S.RUNNING)

    with pytest.raises(UnknownKernelError, match="other-kernel"):
        session.kernel_exited("other-kernel", 0, "exited", NOW)
    assert then(session) == []


# ---- terminate ------------------------------------------------------------------------------

TERMINATE_OUTCOMES: dict[SessionStatus, Event | None] = {
    S.PENDING: SessionCancelled(reason="user request"),
    S.SCHEDULED: SessionTerminating(reason="user request"),
    S.PREPARING: SessionTerminating(reason="user request"),
    S.CREATING: SessionTerminating(reason="user request"),
    S.RUNNING: SessionTerminating(reason="user request"),
    S.TERMINATING: None,
    S.TERMINATED: None,
    S.CANCELLED: None,
    S.ERROR: None,
}


@pytest.mark.parametrize(("status", "expected"), TERMINATE_OUTCOMES.items())
def test_terminate(status: SessionStatus, expected: Event | None) -> None:
    """PENDING is cancelled at once, a placed session starts terminating, and asking again
    (or after the end) changes nothing."""
    session = session_in(status)

    changed = session.terminate("user request", NOW)

    assert changed is (expected is not None)
    assert then(session) == ([expected] if expected else [])


# ---- the transition table, every pair ----------------------------------------------------

# Each status a strict command leads to; CANCELLED and TERMINATING are reached only through
# ``terminate``, which never fails (see test_terminate).
COMMANDS: dict[SessionStatus, Callable[[Session, datetime], bool]] = {
    S.PENDING: lambda s, now: s.note_pending_reason("fits nowhere: gpu", now),
    S.SCHEDULED: lambda s, now: s.schedule({KID: NODE}, "placed", now),
    S.PREPARING: lambda s, now: s.begin_preparing("pulling image", now),
    S.CREATING: lambda s, now: s.begin_creating("creating container", now),
    S.RUNNING: lambda s, now: s.kernel_started(KID, now),
    S.TERMINATED: lambda s, now: s.mark_terminated("gone", now),
    S.ERROR: lambda s, now: s.fail("broken", now),
}
# Facts that arrive late or twice: they change nothing instead of failing.
NO_OPS = {(S.RUNNING, S.RUNNING), (S.TERMINATING, S.RUNNING)} | {
    (end, target)
    for end in (S.TERMINATED, S.CANCELLED, S.ERROR)
    for target in (S.RUNNING, S.TERMINATED, S.ERROR)
}


@pytest.mark.parametrize(("current", "target"), list(product(S, COMMANDS)))
def test_every_transition_follows_the_table(current: SessionStatus, target: SessionStatus) -> None:
    session = session_in(current)
    command = COMMANDS[target]

    if (current, target) in NO_OPS:
        assert not command(session, NOW)
        assert then(session) == []
        assert session.status is current
    elif target in TRANSITIONS[current]:
        assert command(session, NOW)
        assert len(then(session)) == 1
        assert session.status is target
    else:
        with pytest.raises(IllegalTransition) as raised:
            command(session, NOW)
        assert (raised.value.current, raised.value.target) == (current, target)
        assert f"from {current} to {target}" in str(raised.value)
        assert then(session) == []
        assert session.status is current


def test_the_table_ends_in_terminal_statuses_only() -> None:
    for status in S:
        assert (not TRANSITIONS[status]) is status.is_terminal


@pytest.mark.parametrize("status", list(S))
def test_a_pull_moves_only_a_scheduled_session_to_pulling(status: SessionStatus) -> None:
    """A pull fact is level-triggered: repeated (an agent restarted mid-pull), for a second
    kernel, or after the session moved on, it changes nothing."""
    session = session_in(status)

    changed = session.begin_pulling("pulling image x on node-1", NOW)

    assert changed is (status is S.SCHEDULED)
    expected = [SessionPulling(reason="pulling image x on node-1")] if changed else []
    assert then(session) == expected
    assert session.status is (S.PULLING if changed else status)


# ---- history and time -----------------------------------------------------------------------


def test_the_status_history_keeps_each_status_with_its_reason_and_time() -> None:
    session = Session.request(SID, SPEC, at(0))
    session.note_pending_reason("fits nowhere: gpu", at(5))
    session.schedule({KID: NODE}, "placed", at(9))
    session.kernel_started(KID, at(12))
    session.terminate("user request", at(20))
    session.kernel_exited(KID, 0, "exited", at(21))

    assert session.history == [
        StatusChange(status=S.PENDING, reason="requested", at=at(0)),
        StatusChange(status=S.PENDING, reason="fits nowhere: gpu", at=at(5)),
        StatusChange(status=S.SCHEDULED, reason="placed", at=at(9)),
        StatusChange(status=S.RUNNING, reason="kernel started", at=at(12)),
        StatusChange(status=S.TERMINATING, reason="user request", at=at(20)),
        # The end keeps its cause; the kernel's exit (0) is the exit code.
        StatusChange(status=S.TERMINATED, reason="user request", at=at(21)),
    ]
    assert (session.created_on, session.modified_on) == (at(0), at(21))


def test_the_time_passed_in_is_the_time_recorded() -> None:
    session = Session.request(SID, SPEC, at(0))
    session.schedule({KID: NODE}, "placed", at(42))

    occurred = [e.occurred_at for e in session.collect(CAUSE)]

    assert occurred == [at(0), at(42)]
