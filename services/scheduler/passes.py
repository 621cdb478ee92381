"""The decision pass: the order of its steps (``decide``), and the unit of work that stores
what they decided in one group commit (``run_pass``).

Reads the folded state (agents, kernel facts, quota scopes, the directory, waiting sessions).
Writes ``ev.node.<id>`` (``NodeRegistered``, ``NodeCapacityChanged``, ``ResourcesAllocated``,
``ResourcesReleased``), ``ev.session.<id>`` (``SessionAdmitted``, ``SessionScheduled``,
``SessionPendingReasonChanged``, ``SessionStarted``, ``SessionTerminated``, ``SessionFailed``,
``SessionCancelled``) and ``ev.quota.<id>`` (``QuotaScopeOpened``, ``QuotaReserved``,
``QuotaReleased``, ``QuotaSessionDequeued``).

A pass is synchronous from taking its work to having its writes ready, so nothing folds in
between; only the commit awaits. Every decision is idempotent (a registered node, an ended
session, a released kernel change nothing), so work handed back after a failed commit, or
facts folded again after a restart, are decided again safely.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from commands.unit_of_work import UnitOfWork
from events.writes import Store
from services.scheduler.state import SchedulerState, Work
from services.scheduler.steps.admit import admit_sessions
from services.scheduler.steps.common import still_pending
from services.scheduler.steps.lifecycle import (
    apply_fact,
    end_expired,
    hold_back,
    stop_timed_out,
)
from services.scheduler.steps.nodes import declare_lost, stop_at_drain_deadlines
from services.scheduler.steps.place import place_group
from services.scheduler.steps.place_writes import write_admissions
from services.scheduler.steps.preempt import preempt_for
from services.scheduler.steps.register import register_node
from services.scheduler.workspace import Workspace

log = logging.getLogger(__name__)


async def run_pass(
    state: SchedulerState,
    store: Store,
    now: Callable[[], datetime],
    *,
    max_events: int,
    attempts: int,
    may_admit: Callable[[str], bool] = lambda domain: True,
    may_place: Callable[[str], bool] = lambda group: True,
    writing: asyncio.Lock | None = None,
) -> int:
    """Decide and store everything ready; returns the number of events written. On a
    conflict, fold what the other writer stored and decide again. ``writing`` is held from
    deciding to stored (shared with the command handlers)."""
    work = UnitOfWork(
        store,
        state,
        lambda: Workspace(state, max_events=max_events, quiet=True),
        attempts=attempts,
        lock=writing,
    )

    def decide_pass(space: Workspace, *, facts_only: bool = False) -> Work:
        taken = state.take_work()
        try:
            if facts_only:
                decide_facts(state, taken, space, now())
            else:
                decide(state, taken, space, now(), may_admit, may_place)
        except BaseException:
            state.give_back(taken)
            raise
        if space.events:
            log.debug("pass: %d events in %d batch(es)", space.events, len(space.batches))
        return taken

    written = 0
    if state.has_facts() and state.has_placement_work():
        # Facts first: a kernel's end (its session's, its slots given back) is stored before
        # the queues are placed, never waiting behind a long queue's placement; the placement
        # then sees the slots given back.
        _, stored = await work.run(
            lambda space: decide_pass(space, facts_only=True),
            what="the decision pass (facts)", undo=state.give_back,
        )  # fmt: skip
        written += sum(len(c.seqs) for _, c in stored.batches)
    _, stored = await work.run(decide_pass, what="the decision pass", undo=state.give_back)
    return written + sum(len(c.seqs) for _, c in stored.batches)


def decide_facts(state: SchedulerState, work: Work, space: Workspace, now: datetime) -> None:
    """What agents and kernels reported, alone: node ledgers for new agents, then each kernel
    fact (a session follows, an ended kernel's slots go back). The facts' decisions are stored
    in runs that fit a batch, so the sessions they end give back their quota with one event
    per scope per run, not one per session and scope."""
    for agent_id in work.agents:
        register_node(state, agent_id, space, now)
    parts = []
    for fact in work.facts:
        parts += apply_fact(state, fact, space, now)
    space.joint_runs(parts)


def decide(
    state: SchedulerState,
    work: Work,
    space: Workspace,
    now: datetime,
    may_admit: Callable[[str], bool] = lambda domain: True,
    may_place: Callable[[str], bool] = lambda group: True,
) -> None:
    """Node ledgers for agents first, then kernel facts (which free capacity and end
    sessions), then admission (which releases what ended), then placement and, for what it
    left waiting, preemption, so each step sees what the steps before it decided in this
    very pass."""
    state.next_wake = None
    decide_facts(state, work, space, now)
    # Usage changes wait in the feed for the tail's position; every pass takes them in, fair-
    # share group or not, so a cluster without one keeps no backlog (and has the history when a
    # group turns to fair share).
    state.usage.until(state.position)
    declare_lost(state, space, now)
    stop_at_drain_deadlines(state, space, now)
    stop_timed_out(state, space, now)
    end_expired(state, space, now)
    held = hold_back(state, space, now)
    admitted = admit_sessions(state, space, now, may_admit, held)
    for group in dict.fromkeys([*state.waiting, *admitted]):
        fresh = admitted.pop(group, [])
        if not may_place(group):
            write_admissions(state, space, fresh, now)  # another replica places this group
            continue
        queue = [*state.waiting.get(group, {}), *fresh]
        # A session this pass ended (deactivated keypair, doomed) or held back is not placed.
        queue = [sid for sid in queue if sid not in held and still_pending(space, sid)]
        left = place_group(state, group, queue, space, now, set(fresh)) if queue else []
        preempt_for(state, group, left, space, now)
        state.queues[group] = left
