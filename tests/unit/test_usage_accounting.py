"""Usage accounting as a table: a known event history (``usage_history``: a node loss, a
requeue, late and repeated reports, a lagging agent clock) folded by the usage view's pure
``apply`` and summed by ``projections.usage.accounting``, per user, domain, resource group and
session, over the whole range and a window; a fold stopped midway and resumed from its stored
rows (a projector restart), or fed the same events again, gives the same numbers."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from events.envelope import StoredEvent
from projections.usage import view as usage
from projections.usage.accounting import UsageGroup, account, held_micros
from projections.usage.tables import (
    KernelInterval,
    SessionTags,
    kernel_from_row,
    kernel_to_row,
    session_from_row,
    session_to_row,
)
from tests.unit.usage_history import (
    END,
    EXPECTED,
    N1,
    WINDOW,
    Cast,
    as_lines,
    as_reported,
    at,
    known_history,
)


class _Row:
    """What a database hands back: the columns as attributes."""

    def __init__(self, values: dict[str, object]) -> None:
        self.__dict__.update(values)


def fold(events: list[StoredEvent]) -> tuple[dict[str, SessionTags], dict[str, KernelInterval]]:
    sessions: dict[str, SessionTags] = {}
    kernels: dict[str, KernelInterval] = {}
    usage.fold(sessions, kernels, events)
    return sessions, kernels


@pytest.mark.parametrize("group_by", sorted(EXPECTED))
def test_the_known_history_adds_up(group_by: str) -> None:
    _, kernels = fold(known_history().events)
    lines = account(kernels.values(), UsageGroup(group_by), at(0), at(END), at(END))
    assert as_lines(lines) == as_reported(EXPECTED[group_by], Cast())


def test_a_window_takes_only_what_fell_inside_it() -> None:
    _, kernels = fold(known_history().events)
    lines = account(kernels.values(), UsageGroup.USER, at(100), at(200), at(END))
    assert as_lines(lines) == as_reported(WINDOW, Cast())


def test_a_running_kernel_counts_up_to_now_and_ranges_ending_before_it_start_nothing() -> None:
    _, kernels = fold(known_history().events)
    asked_early = account(kernels.values(), UsageGroup.USER, at(0), at(END), at(300))
    bob = next(line for line in asked_early if line.key == "u-bob")
    assert bob.cpu_core_seconds == 180 + 50  # k3a, then k3b from 250 until "now" (300)
    assert account(kernels.values(), UsageGroup.USER, at(-100), at(0), at(END)) == []
    assert account(kernels.values(), UsageGroup.USER, at(2000), at(3000), at(1500)) == []


def test_node_loss_ends_the_intervals_at_the_release_and_a_late_start_changes_nothing() -> None:
    _, kernels = fold(known_history().events)
    assert (kernels["k2"].ended_at, kernels["k2"].end_reason) == (at(230), "node-lost")
    assert (kernels["k3a"].ended_at, kernels["k3a"].end_reason) == (at(230), "node-lost")
    assert kernels["k2"].started_at == at(30)  # not the fenced agent's report at 235
    assert kernels["k1"].started_at == at(10)  # not the repeated report at 60
    assert kernels["k3b"].node_id == "node-3" and kernels["k3b"].ended_at is None
    assert kernels["k5"].started_at is None  # allocated, released, never ran
    assert kernels["k6"].started_at == at(400)  # the agent's 398 is before its allocation
    assert all(k.node_id == N1 for k in (kernels["k1"], kernels["k2"], kernels["k3a"]))


def test_sessions_carry_their_names_and_owners() -> None:
    sessions, kernels = fold(known_history().events)
    lines = account(kernels.values(), UsageGroup.SESSION, at(0), at(END), at(END))
    assert {line.key: line.name for line in lines} == {
        "s1": "train", "s2": "share", "s3": None, "s4": None, "s6": None,
    }  # fmt: skip
    assert (sessions["s4"].user_id, sessions["s4"].domain) == ("u-carol", "d2")
    assert kernels["k4b"].resource_group == "gpu" and kernels["k4b"].project_id == "p-three"


@pytest.mark.parametrize("cut", [5, 17, 23, 30])
def test_a_restart_midway_resumes_from_the_stored_rows_with_the_same_numbers(cut: int) -> None:
    events = known_history().events
    whole_sessions, whole = fold(events)
    sessions, kernels = fold(events[:cut])
    # What the database kept, read back as a restarted projector reads it.
    sessions = {k: session_from_row(_Row(session_to_row(v))) for k, v in sessions.items()}
    kernels = {k: kernel_from_row(_Row(kernel_to_row(v))) for k, v in kernels.items()}
    usage.fold(sessions, kernels, events[cut:])
    assert (sessions, kernels) == (whole_sessions, whole)
    for group_by in UsageGroup:
        again = account(kernels.values(), group_by, at(0), at(END), at(END))
        assert again == account(whole.values(), group_by, at(0), at(END), at(END))


def test_events_delivered_again_change_nothing() -> None:
    events = known_history().events
    sessions, kernels = fold(events)
    before = (dict(sessions), dict(kernels))
    usage.fold(sessions, kernels, events)
    usage.fold(sessions, kernels, events[10:20])
    assert (sessions, kernels) == before


def test_clipping_is_exact_to_the_microsecond() -> None:
    _, kernels = fold(known_history().events)
    k1 = kernels["k1"]  # 10 s -> 110 s
    tiny = timedelta(microseconds=1)
    assert held_micros(k1, at(110) - tiny, at(200), at(END)) == 1
    assert held_micros(k1, at(110), at(200), at(END)) == 0
    assert held_micros(k1, at(0), at(10) + tiny, at(END)) == 1
    open_k1 = replace(k1, ended_at=None)
    assert held_micros(open_k1, at(0), at(END), at(50)) == 40 * 1_000_000
