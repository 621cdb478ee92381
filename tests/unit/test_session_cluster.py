"""Multi-kernel (cluster) sessions, batch timeouts and results, as given-events / when-command /
then-events. kernels[0] is the main kernel: the session runs once all have started, ends with
the main kernel's exit code, and goes to ERROR when any kernel fails to start."""

from __future__ import annotations

from datetime import timedelta

import pytest

from commands.errors import IllegalTransition
from commands.session.aggregate import Session
from commands.session.rules import KernelState
from events.catalogue import Event
from events.domain.session import (
    SessionFailed,
    SessionKernelExited,
    SessionKernelFailed,
    SessionKernelStarted,
    SessionRequested,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from schemas.ids import kernel_id_for
from schemas.resources import ResourceSlots
from schemas.session import (
    KernelSpec,
    KernelStatus,
    SessionResult,
    SessionSpec,
    SessionStatus,
    SessionType,
)
from tests.unit.scenario import at, given, then

S = SessionStatus
K = KernelStatus
SID = "cluster-1"
MAIN, SUB1, SUB2 = (kernel_id_for(SID, i) for i in range(3))
KERNEL = KernelSpec(resources=ResourceSlots.of(cpu=1))
SPEC = SessionSpec(image="python:3.12", type=SessionType.BATCH, kernels=(KERNEL,) * 3)
NOW = at(60)

PLACED = (
    SessionRequested(spec=SPEC, kernel_ids=(MAIN, SUB1, SUB2)),
    SessionScheduled(placements={MAIN: "n1", SUB1: "n1", SUB2: "n2"}, reason="placed"),
)
ALL_STARTED = (
    *PLACED,
    SessionKernelStarted(kernel_id=MAIN),
    SessionKernelStarted(kernel_id=SUB1),
    SessionKernelStarted(kernel_id=SUB2),
    SessionStarted(reason="all 3 kernels started"),
)


def cluster(*events: Event) -> Session:
    return given(Session, SID, *events)


def statuses(session: Session) -> list[KernelStatus]:
    return [session.kernel(k).status for k in session.kernel_ids]


# ---- starting -------------------------------------------------------------------------------


def test_the_session_runs_once_every_kernel_has_started() -> None:
    session = cluster(*PLACED)

    assert session.kernel_started(SUB2, at(10))
    assert session.kernel_started(MAIN, at(11))
    assert session.status is S.SCHEDULED
    assert session.kernel_started(SUB1, at(12))

    assert then(session) == [
        SessionKernelStarted(kernel_id=SUB2),
        SessionKernelStarted(kernel_id=MAIN),
        SessionKernelStarted(kernel_id=SUB1),
        SessionStarted(reason="all 3 kernels started"),
    ]
    assert (session.status, session.started_at) == (S.RUNNING, at(12))
    assert statuses(session) == [K.RUNNING] * 3


def test_a_repeated_start_changes_nothing() -> None:
    session = cluster(*PLACED, SessionKernelStarted(kernel_id=SUB1))

    assert not session.kernel_started(SUB1, NOW)
    assert then(session) == []


def test_the_session_starts_once() -> None:
    session = cluster(*ALL_STARTED)

    assert not session.kernel_started(MAIN, NOW)
    assert then(session) == []


# ---- exits ----------------------------------------------------------------------------------


def test_a_sub_kernel_that_exits_early_is_recorded_and_ends_nothing() -> None:
    session = cluster(*ALL_STARTED)

    assert session.kernel_exited(SUB1, 0, "kernel exited with code 0", NOW)

    assert then(session) == [
        SessionKernelExited(kernel_id=SUB1, exit_code=0, reason="kernel exited with code 0")
    ]
    assert session.status is S.RUNNING
    assert session.kernel(SUB1) == KernelState(
        status=K.TERMINATED, exit_code=0, reason="kernel exited with code 0"
    )
    assert session.kernels_to_stop() == ()  # nothing is stopped while the session runs
    assert session.result is None


def test_the_main_kernel_exit_ends_the_session_with_its_exit_code() -> None:
    session = cluster(*ALL_STARTED)

    session.kernel_exited(MAIN, 3, "kernel exited with code 3", at(100))

    assert then(session) == [
        SessionKernelExited(kernel_id=MAIN, exit_code=3, reason="kernel exited with code 3"),
        SessionTerminating(reason="main1: kernel exited with code 3"),
    ]
    assert session.status is S.TERMINATING
    # The sub-kernels still run: the scheduler asks their node ledgers to stop them.
    assert session.kernels_to_stop() == (SUB1, SUB2)

    session.kernel_exited(SUB2, 137, "kernel exited with code 137", at(101))
    assert session.status is S.TERMINATING
    assert session.kernels_to_stop() == (SUB1,)
    session.kernel_exited(SUB1, 137, "kernel exited with code 137", at(102))

    assert then(session) == [
        SessionKernelExited(kernel_id=SUB2, exit_code=137, reason="kernel exited with code 137"),
        SessionKernelExited(kernel_id=SUB1, exit_code=137, reason="kernel exited with code 137"),
        SessionTerminated(reason="main1: kernel exited with code 3", exit_code=3),
    ]
    assert (session.status, session.exit_code) == (S.TERMINATED, 3)
    assert session.result is SessionResult.FAILURE
    assert session.kernels_to_stop() == ()
    assert [session.kernel(k).exit_code for k in session.kernel_ids] == [3, 137, 137]


def test_the_main_kernel_exiting_last_ends_the_session_at_once() -> None:
    session = cluster(
        *ALL_STARTED,
        SessionKernelExited(kernel_id=SUB1, exit_code=1, reason="exited"),
        SessionKernelExited(kernel_id=SUB2, exit_code=0, reason="exited"),
    )

    session.kernel_exited(MAIN, 0, "kernel exited with code 0", NOW)

    assert then(session) == [
        SessionKernelExited(kernel_id=MAIN, exit_code=0, reason="kernel exited with code 0"),
        SessionTerminated(reason="main1: kernel exited with code 0", exit_code=0),
    ]
    # The result is the main kernel's, whatever the sub-kernels did.
    assert session.result is SessionResult.SUCCESS


def test_a_repeated_exit_changes_nothing() -> None:
    session = cluster(*ALL_STARTED, SessionKernelExited(kernel_id=SUB1, exit_code=0, reason="x"))

    assert not session.kernel_exited(SUB1, 0, "x", NOW)
    assert then(session) == []


def test_the_main_kernel_exiting_before_the_others_started_stops_them() -> None:
    session = cluster(*PLACED, SessionKernelStarted(kernel_id=MAIN))

    session.kernel_exited(MAIN, 2, "kernel exited with code 2", NOW)

    assert session.status is S.TERMINATING
    assert session.kernels_to_stop() == (SUB1, SUB2)
    # A kernel stopped before it started is not an error: the end was asked for.
    session.kernel_stopped(SUB1, "stopped before it started (stop requested)", at(61))
    session.kernel_started(SUB2, at(62))  # too late: the session is ending
    session.kernel_exited(SUB2, 143, "kernel exited with code 143", at(63))

    events = then(session)
    assert events[-1] == SessionTerminated(reason="main1: kernel exited with code 2", exit_code=2)
    assert SessionStarted(reason="all 3 kernels started") not in events
    assert session.kernel(SUB1).exit_code is None
    assert statuses(session) == [K.TERMINATED] * 3


# ---- user termination and timeouts ----------------------------------------------------------


def test_a_terminated_cluster_ends_once_every_kernel_is_gone() -> None:
    session = cluster(*ALL_STARTED)

    assert session.terminate("user request", at(70))
    assert session.kernels_to_stop() == (MAIN, SUB1, SUB2)
    session.kernel_exited(SUB1, 137, "killed", at(71))
    session.kernel_exited(MAIN, 137, "killed", at(72))
    assert session.status is S.TERMINATING  # no second SessionTerminating
    session.kernel_exited(SUB2, 137, "killed", at(73))

    assert [type(e).__name__ for e in then(session)] == [
        "SessionTerminating",
        "SessionKernelExited",
        "SessionKernelExited",
        "SessionKernelExited",
        "SessionTerminated",
    ]
    # Asked to end: the request stays its final reason, the main kernel's exit its code.
    assert (session.status, session.exit_code, session.reason) == (
        S.TERMINATED,
        137,
        "user request",
    )


def timed(timeout_s: int | None, *extra: Event) -> Session:
    spec = SPEC.model_copy(update={"timeout_s": timeout_s})
    requested = SessionRequested(spec=spec, kernel_ids=(MAIN, SUB1, SUB2))
    return cluster(requested, *ALL_STARTED[1:], *extra)


def test_timeout_at_is_the_start_plus_the_timeout() -> None:
    session = timed(30)

    started = session.started_at
    assert started is not None
    assert session.timeout_at == started + timedelta(seconds=30)
    assert timed(None).timeout_at is None
    assert cluster(*PLACED).timeout_at is None  # not started yet


def test_a_batch_session_times_out() -> None:
    session = timed(30)
    deadline = session.timeout_at
    assert deadline is not None

    assert not session.time_out(deadline - timedelta(seconds=1))
    assert session.time_out(deadline)

    assert then(session) == [SessionTerminating(reason="timed out after 30s")]
    assert session.status is S.TERMINATING
    assert session.kernels_to_stop() == (MAIN, SUB1, SUB2)
    assert not session.time_out(deadline + timedelta(seconds=5))  # once
    assert then(session) == []


def test_a_session_without_a_timeout_or_already_ending_never_times_out() -> None:
    far = at(10**6)
    assert not timed(None).time_out(far)
    assert not timed(30, SessionTerminating(reason="user request")).time_out(far)
    assert not cluster(*PLACED).time_out(far)


# ---- failures -------------------------------------------------------------------------------


def test_a_kernel_failing_to_start_puts_the_session_in_error() -> None:
    session = cluster(*PLACED, SessionKernelStarted(kernel_id=MAIN))

    session.kernel_failed(SUB2, "image not found", NOW)

    assert then(session) == [
        SessionKernelFailed(kernel_id=SUB2, reason="image not found"),
        SessionFailed(reason="sub2: image not found"),
    ]
    assert session.status is S.ERROR
    assert session.result is SessionResult.FAILURE
    # The others are placed and alive: the scheduler stops them.
    assert session.kernels_to_stop() == (MAIN, SUB1)


def test_after_an_error_the_other_kernels_ends_are_still_recorded() -> None:
    session = cluster(
        *PLACED,
        SessionKernelFailed(kernel_id=SUB2, reason="image not found"),
        SessionFailed(reason="sub2: image not found"),
    )

    assert session.kernel_exited(MAIN, 137, "killed", NOW)
    assert session.kernel_failed(SUB1, "stopped", NOW)
    assert not session.kernel_failed(SUB1, "stopped", NOW)

    assert [type(e).__name__ for e in then(session)] == [
        "SessionKernelExited",
        "SessionKernelFailed",
    ]
    assert session.status is S.ERROR  # no status change after the end
    assert session.exit_code is None
    assert session.kernels_to_stop() == ()


def test_kernel_facts_before_placement_or_for_foreign_kernels_are_refused() -> None:
    pending = cluster(PLACED[0])
    with pytest.raises(IllegalTransition):
        pending.kernel_started(SUB1, NOW)
    with pytest.raises(IllegalTransition):
        pending.kernel_stopped(SUB1, "stopped", NOW)
    assert then(pending) == []


def test_the_kernel_states_come_back_from_a_snapshot() -> None:
    session = cluster(*ALL_STARTED, SessionKernelExited(kernel_id=SUB1, exit_code=4, reason="x"))

    restored = Session.from_snapshot(session.snapshot(seq=7, now=NOW))

    assert restored.kernels == session.kernels
    assert restored.kernel(SUB1).exit_code == 4


# ---- single-kernel sessions keep their one-event behaviour ----------------------------------


def test_a_single_kernel_session_writes_no_kernel_events() -> None:
    kid = kernel_id_for("single", 0)
    spec = SPEC.model_copy(update={"kernels": (KERNEL,), "timeout_s": 5})
    session = given(
        Session,
        "single",
        SessionRequested(spec=spec, kernel_ids=(kid,)),
        SessionScheduled(placements={kid: "n1"}, reason="placed"),
    )

    session.kernel_started(kid, at(10))
    assert session.kernel(kid).status is K.RUNNING
    assert session.time_out(at(15))
    assert session.kernels_to_stop() == (kid,)
    session.kernel_exited(kid, 137, "kernel exited with code 137", at(16))

    assert then(session) == [
        SessionStarted(reason="kernel started"),
        SessionTerminating(reason="timed out after 5s"),
        # The timeout stays the end's reason (the kernel's exit is its code).
        SessionTerminated(reason="timed out after 5s", exit_code=137, asked=True),
    ]
    assert session.kernel(kid) == KernelState(
        status=K.TERMINATED, exit_code=137, reason="timed out after 5s"
    )
    assert session.kernels_to_stop() == ()
    assert session.result is SessionResult.FAILURE


def test_a_single_kernel_stopped_before_it_started_ends_the_session_without_a_result() -> None:
    kid = kernel_id_for("single", 0)
    session = given(
        Session,
        "single",
        SessionRequested(spec=SPEC.model_copy(update={"kernels": (KERNEL,)}), kernel_ids=(kid,)),
        SessionScheduled(placements={kid: "n1"}, reason="placed"),
        SessionTerminating(reason="user request"),
    )

    session.kernel_stopped(kid, "stopped before it started (stop requested)", NOW)

    assert then(session) == [SessionTerminated(reason="user request", exit_code=None, asked=True)]
    assert session.result is None
