"""Why a session waits for quota: a new cause is written at once, a reason whose numbers
moved (the scope's use changes with every admission) at most every ``REASON_REFRESH_S``."""

from __future__ import annotations

from commands.session.aggregate import Session
from events.envelope import StoredEvent
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.tenancy import SessionOwner
from services.scheduler.rules.admission import Wait
from services.scheduler.state import SchedulerState
from services.scheduler.steps.admit import REASON_REFRESH_S, _note_wait
from services.scheduler.workspace import Workspace
from tests.unit.scenario import CAUSE, T0, at

OWNER = SessionOwner(access_key="AK1", user_id="u1", project_id="p1", domain="d1")


def waiting_session() -> SchedulerState:
    state = SchedulerState()
    spec = SessionSpec(image="img", kernels=(KernelSpec(resources=ResourceSlots.of(gpu=1)),))
    session = Session.request("s1", spec, T0, owner=OWNER)
    session.note_pending_reason("project lab: gpu 7/8 in use, asks for 2", T0)
    for seq, envelope in enumerate(session.collect(CAUSE), start=1):
        state.apply(StoredEvent(seq=seq, envelope=envelope))
    return state


def written(state: SchedulerState, reason: str, seconds: float) -> list[str]:
    space = Workspace(state)
    _note_wait(state, space, Wait("s1", reason), at(int(seconds)))
    return [e.name for batch in space.batches for envs in batch.values() for e in envs]


def test_a_reason_that_only_moved_in_its_numbers_waits_for_the_refresh() -> None:
    state = waiting_session()
    moved = "project lab: gpu 6/8 in use, asks for 4"

    assert written(state, moved, 1) == []
    assert written(state, moved, REASON_REFRESH_S + 1) == ["SessionPendingReasonChanged"]


def test_a_new_cause_is_written_at_once_and_the_same_reason_never() -> None:
    state = waiting_session()

    assert written(state, "keypair AK1: 5/5 concurrent sessions", 1) == [
        "SessionPendingReasonChanged"
    ]
    assert written(state, "project lab: gpu 7/8 in use, asks for 2", 1000) == []
