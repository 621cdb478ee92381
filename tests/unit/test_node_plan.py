"""The agent's reconcile decisions (pure): ledger x containers x reported facts -> actions."""

from __future__ import annotations

from commands.agent import RunningKernel
from commands.node.rules import Allocation
from schemas.resources import ResourceSlots
from services.node.backend import Container, ContainerStatus
from services.node.plan import STOPPED_BEFORE_START, VANISHED, Ended, Report, plan

WANTED = Allocation(session_id="s1", slots=ResourceSlots(cpu_milli=500), image="img")
STOPPING = WANTED.model_copy(update={"stopping": True})
REPORTED = {"k1": RunningKernel(session_id="s1", container_id="c1")}


def box(status: ContainerStatus, exit_code: int | None = None, oom: bool = False) -> Container:
    return Container("k1", "s1", "c1", status, exit_code, oom)


def test_a_wanted_kernel_without_a_container_is_started() -> None:
    assert plan({"k1": WANTED}, [], {}, set()).start == [("k1", WANTED)]


def test_a_running_reported_wanted_kernel_is_left_alone() -> None:
    assert plan({"k1": WANTED}, [box("running")], REPORTED, set()).empty


def test_a_running_kernel_whose_start_was_never_reported_is_attached_not_restarted() -> None:
    todo = plan({"k1": WANTED}, [box("running")], {}, set())

    assert (todo.attach, todo.start) == ([box("running")], [])


def test_running_kernels_whose_allocation_is_stopping_or_released_are_stopped() -> None:
    assert plan({"k1": STOPPING}, [box("running")], REPORTED, set()).stop == [box("running")]
    assert plan({}, [box("running")], REPORTED, set()).stop == [box("running")]


def test_an_exit_is_reported_with_its_code_logs_kept_then_removed() -> None:
    todo = plan({"k1": WANTED}, [box("exited", 3)], REPORTED, set())

    assert todo.ended == [Ended("k1", "s1", 3, "exited", Report.EXIT, box("exited", 3), True)]


def test_an_exit_while_the_start_was_never_reported_reports_both() -> None:
    (ended,) = plan({"k1": WANTED}, [box("exited", 0)], {}, set()).ended

    assert ended.report is Report.START_AND_EXIT


def test_reasons_say_why_it_ended() -> None:
    reasons = [
        plan(wanted, [box("exited", code, oom)], REPORTED, set()).ended[0].reason
        for wanted, code, oom in [
            ({"k1": WANTED}, 137, True),
            ({"k1": STOPPING}, 143, False),
            ({}, 143, False),
        ]
    ]

    assert reasons == [
        "out of memory",
        "stopped on request",
        "stopped: its allocation was released",
    ]


def test_a_finished_kernel_is_never_started_again_nor_reported_again() -> None:
    assert plan({"k1": WANTED}, [], {}, {"k1"}).empty
    (leftover,) = plan({"k1": WANTED}, [box("exited", 0)], {}, {"k1"}).ended
    assert (leftover.report, leftover.keep_logs) == (Report.NOTHING, False)


def test_stopping_before_it_started_ends_with_no_exit_code() -> None:
    (ended,) = plan({"k1": STOPPING}, [], {}, set()).ended

    assert (ended.exit_code, ended.reason, ended.report) == (
        -1,
        STOPPED_BEFORE_START,
        Report.NEVER_RAN,
    )


def test_a_reported_kernel_whose_container_vanished_ends_with_no_exit_code() -> None:
    (ended,) = plan({"k1": WANTED}, [], REPORTED, set()).ended

    assert (ended.exit_code, ended.reason, ended.container) == (-1, VANISHED, None)


def test_a_created_container_is_started_if_wanted_else_removed() -> None:
    assert plan({"k1": WANTED}, [box("created")], {}, set()).start == [("k1", WANTED)]
    assert plan({"k1": STOPPING}, [box("created")], {}, set()).remove == [box("created")]


def test_finished_kernels_off_the_ledger_and_the_machine_are_forgotten() -> None:
    assert plan({}, [], {}, {"k1", "k2"}).forget == {"k1", "k2"}
    assert plan({"k1": WANTED}, [], {}, {"k1"}).forget == set()
