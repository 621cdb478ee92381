"""Readiness of a PENDING session (dependencies, start time) and the timeout timer, as tables."""

from __future__ import annotations

from datetime import timedelta

import pytest

from commands.session.aggregate import Session
from schemas.ids import kernel_id_for
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionStatus, SessionType
from services.scheduler.rules.readiness import (
    Blocked,
    Doomed,
    Outcome,
    Readiness,
    Ready,
    next_timeout,
    readiness,
    timed_out,
)
from tests.unit.scenario import T0, at

S = SessionStatus
DONE = "aaaaaaaa-0000-done"
FAILED = "bbbbbbbb-0000-failed"
ERRORED = "cccccccc-0000-error"
CANCELLED = "dddddddd-0000-cancel"
RUNNING = "eeeeeeee-0000-running"
PENDING = "ffffffff-0000-pending"
STOPPED = "99999999-0000-stopped"
SELF = "11111111-0000-self"

SESSIONS = {
    DONE: Outcome(S.TERMINATED, 0),
    FAILED: Outcome(S.TERMINATED, 3),
    ERRORED: Outcome(S.ERROR),
    CANCELLED: Outcome(S.CANCELLED),
    RUNNING: Outcome(S.RUNNING),
    PENDING: Outcome(S.PENDING),
    STOPPED: Outcome(S.TERMINATED, None),
    SELF: Outcome(S.PENDING),
}
LATER = T0 + timedelta(hours=1)


def pending(*depends_on: str, starts_at: object = None) -> Session:
    spec = SessionSpec.model_validate(
        {
            "image": "python:3.12",
            "type": "batch",
            "kernels": [{"resources": {"cpu_milli": 1000}}],
            "depends_on": depends_on,
            "starts_at": starts_at,
        }
    )
    return Session.request(SELF, spec, T0)


CASES: list[tuple[str, Session, Readiness]] = [
    ("nothing to wait for", pending(), Ready()),
    ("its dependency succeeded", pending(DONE), Ready()),
    ("its start time has come", pending(starts_at=T0), Ready()),
    (
        "a dependency still runs",
        pending(DONE, RUNNING),
        Blocked("waiting for session eeeeeeee to succeed"),
    ),
    ("a dependency waits", pending(PENDING), Blocked("waiting for session ffffffff to succeed")),
    (
        "the first of two waiting dependencies is named",
        pending(PENDING, RUNNING),
        Blocked("waiting for session ffffffff to succeed"),
    ),
    (
        "a start time in the future",
        pending(DONE, starts_at=LATER),
        Blocked(f"starts at {LATER.isoformat()}", wake_at=LATER),
    ),
    (
        "dependencies first, then the start time",
        pending(RUNNING, starts_at=LATER),
        Blocked("waiting for session eeeeeeee to succeed"),
    ),
    ("a dependency ended in ERROR", pending(ERRORED), Doomed("dependency cccccccc ended ERROR")),
    (
        "a dependency failed",
        pending(DONE, FAILED),
        Doomed("dependency bbbbbbbb failed with exit code 3"),
    ),
    ("a dependency was cancelled", pending(CANCELLED), Doomed("dependency dddddddd was cancelled")),
    (
        "a dependency ended with no exit code",
        pending(STOPPED),
        Doomed("dependency 99999999 ended without an exit code"),
    ),
    (
        "an unknown dependency",
        pending("nobody-knows"),
        Doomed("dependency nobody-knows is not a known session"),
    ),
    (
        "a doomed dependency dooms even behind a waiting one",
        pending(RUNNING, FAILED, starts_at=LATER),
        Doomed("dependency bbbbbbbb failed with exit code 3"),
    ),
    ("itself", pending(SELF), Doomed("a session cannot depend on itself")),
]


@pytest.mark.parametrize(("case", "session", "expected"), CASES, ids=[c[0] for c in CASES])
def test_readiness(case: str, session: Session, expected: Readiness) -> None:
    assert readiness(session, SESSIONS.get, T0) == expected


def test_a_blocked_session_becomes_ready_when_its_dependency_succeeds() -> None:
    session = pending(RUNNING)
    outcomes = dict(SESSIONS)
    assert isinstance(readiness(session, outcomes.get, T0), Blocked)

    outcomes[RUNNING] = Outcome(S.TERMINATED, 0)

    assert readiness(session, outcomes.get, T0) == Ready()


def test_a_start_time_wakes_the_session_then() -> None:
    blocked = readiness(pending(starts_at=LATER), SESSIONS.get, T0)
    assert isinstance(blocked, Blocked)
    assert blocked.wake_at == LATER
    assert readiness(pending(starts_at=LATER), SESSIONS.get, LATER) == Ready()


# ---- timeouts -------------------------------------------------------------------------------


def running(session_id: str, timeout_s: int | None, started: int) -> Session:
    spec = SessionSpec(
        image="python:3.12",
        type=SessionType.BATCH,
        kernels=(KernelSpec(resources=ResourceSlots.of(cpu=1)),),
        timeout_s=timeout_s,
    )
    session = Session.request(session_id, spec, T0)
    kid = kernel_id_for(session_id, 0)
    session.schedule({kid: "n1"}, "placed", at(started))
    session.kernel_started(kid, at(started))
    return session


def test_the_next_timeout_is_the_earliest_among_running_sessions() -> None:
    early, late, none = running("a", 30, 10), running("b", 10, 100), running("c", None, 0)
    ending = running("d", 1, 0)
    ending.terminate("user request", at(1))

    assert next_timeout([early, late, none, ending]) == at(40)
    assert next_timeout([none, ending]) is None
    assert next_timeout([]) is None


def test_timed_out_names_the_sessions_due() -> None:
    early, late = running("a", 30, 10), running("b", 10, 100)

    assert timed_out([early, late], at(39)) == []
    assert timed_out([early, late], at(40)) == [early]
    assert timed_out([early, late], at(110)) == [early, late]
