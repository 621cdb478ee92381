"""Preemption step of a decision pass; writes ``ev.session.<id>`` and ``ev.node.<id>``.

In a resource group that allows it, a session left waiting by placement, that has waited
the group's grace period and that only fits once running sessions of lower priority stop,
has them stopped (``placement.preemption`` chooses: the fewest, then the youngest, on one
node). Each victim terminates with a reason naming the session it makes room for, and its
kernels are asked to stop; the waiting session says what it waits for.

Nothing is allocated here: the victims' slots stay on the ledger until their kernels have
exited, and an ordinary pass places the waiting session afterwards, so no node is ever
over-allocated while victims stop. A session whose victims have not all ended preempts no
more, and room already on its way back (sessions terminating for any reason) is counted
before anyone else is stopped.

Writes (through the pass's workspace) ``ev.session.<id>`` (``SessionTerminating`` with
``preempted_by``, ``SessionPendingReasonChanged``) and ``ev.node.<id>``
(``KernelStopRequested``).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from commands.session.aggregate import Session
from placement import NodeOffer
from placement.preemption import (
    Holding,
    Policy,
    Preemption,
    Running,
    choose_victims,
)
from services.scheduler.state import SchedulerState
from services.scheduler.steps.common import cause_of
from services.scheduler.steps.lifecycle import stop_the_rest
from services.scheduler.steps.place import offer_of, request_of
from services.scheduler.workspace import Workspace

log = logging.getLogger(__name__)

SEARCHES_PER_PASS = 32
"""Victim searches per resource group in one pass, so that a long queue of sessions nothing
can make room for does not slow every pass down; the next pass goes on where this one
stopped."""


def preempt_for(
    state: SchedulerState, group: str, waiting: list[str], space: Workspace, now: datetime
) -> None:
    """Stop lower-priority sessions for those of ``waiting`` (in queue order) that only fit
    that way. ``waiting`` is what placement left waiting in this pass."""
    policy = state.directory.group_scheduling(group)
    if not policy.preemption or not waiting:
        return
    grace = timedelta(seconds=policy.preemption_grace_s)
    rules = Policy(
        guard=policy.fragmentation_guard,
        fill=policy.device_fill,
        across_domains=policy.preempt_across_domains,
    )
    offers: list[NodeOffer] | None = None
    running: list[Running] = []
    releasing: list[Running] = []
    lowest: int | None = None
    searches = 0
    start = state.preempt_from.pop(group, 0) % len(waiting)
    for at, session_id in enumerate([*waiting[start:], *waiting[:start]]):
        if searches >= SEARCHES_PER_PASS:
            # The next pass goes on from here, so that sessions behind a long run of ones
            # nothing can make room for are looked at too.
            state.preempt_from[group] = (start + at) % len(waiting)
            break
        if session_id in state.preempting:
            continue  # its victims are still stopping
        tracked = state.sessions[session_id]
        since = datetime.fromtimestamp(tracked.placeable_since or now.timestamp(), now.tzinfo)
        if since + grace > now:
            state.wake_at(since + grace)
            continue
        if offers is None:  # only once some session is due: most passes never get here
            offers, running, releasing = _cluster(state, group, space)
            lowest = min((r.priority for r in running), default=None)
        request = request_of(tracked, now)
        if lowest is None or request.priority <= lowest:
            continue  # nobody it may stop
        searches += 1
        owner = tracked.session.owner
        domain = owner.domain if owner is not None else ""
        choice = choose_victims(request, domain, offers, running, rules, releasing=releasing)
        if choice is None:
            continue
        _stop_victims(state, choice, space, now, group)
        chosen = set(choice.victims)
        releasing += [r for r in running if r.session_id in chosen]
        running = [r for r in running if r.session_id not in chosen]
        lowest = min((r.priority for r in running), default=None)


def _stop_victims(
    state: SchedulerState, choice: Preemption, space: Workspace, now: datetime, group: str
) -> None:
    """One decision: the victims terminate and their kernels are asked to stop, and the
    waiting session says so. Stored together, so a rival replica's different choice for the
    same session conflicts on it."""
    tracked = state.sessions[choice.session_id]
    preemptor = space.session(choice.session_id)
    assert preemptor is not None
    priority = preemptor.spec.priority
    node = space.peek_node(choice.node_id)
    host = (node.hostname if node is not None else "") or choice.node_id
    stopped: list[Session] = []
    for victim_id in choice.victims:
        victim = space.session(victim_id)
        if victim is None:
            continue
        reason = (
            f"preempted: stopped to make room for session {choice.session_id} "
            f"(priority {priority} over {victim.spec.priority}) in resource group {group}"
        )
        if victim.preempt(choice.session_id, reason, now):
            stopped.append(victim)
    if not stopped:
        return
    stops = [n for v in stopped for n in stop_the_rest(v, space, now)]
    waits = (
        f"preempting {len(stopped)} lower-priority session(s) on {host} "
        f"({', '.join(v.id for v in stopped)}); placed once they have stopped"
    )
    preemptor.note_pending_reason(waits, now)
    log.info("session %s preempts %s on %s", choice.session_id, [v.id for v in stopped], host)
    cause = cause_of(tracked)
    space.joint(
        [
            (cause, preemptor),
            *((cause_of(state.sessions[v.id]), v) for v in stopped),
            *((cause, n) for n in {n.id: n for n in stops}.values()),
        ]
    )


def _cluster(
    state: SchedulerState, group: str, space: Workspace
) -> tuple[list[NodeOffer], list[Running], list[Running]]:
    """The group's nodes as this pass sees them; the sessions placed on them before this
    pass that could be stopped; and those already on their way out (terminating)."""
    offers: list[NodeOffer] = []
    holdings: dict[str, list[Holding]] = {}
    for node_id in [*state.nodes, *space.new_nodes]:
        node = space.peek_node(node_id)
        if node is None or node.resource_group != group:
            continue
        offers.append(offer_of(state, node))
        for allocation in node.allocations.values():
            holding = Holding(node.id, allocation.slots, allocation.devices)
            holdings.setdefault(allocation.session_id, []).append(holding)
    running: list[Running] = []
    releasing: list[Running] = []
    for session_id, held in holdings.items():
        tracked = state.sessions.get(session_id)
        session = space.peek_session(session_id)
        if tracked is None or session is None:
            continue
        owner = session.owner
        started = session.started_at or session.history[-1].at
        entry = Running(
            session_id=session_id,
            priority=session.spec.priority,
            domain=owner.domain if owner is not None else "",
            started=started.timestamp(),
            holdings=tuple(held),
        )
        if not session.status.is_placed:
            # Terminating, ended, or requeued (its old kernels are being stopped): on its
            # way back.
            releasing.append(entry)
        elif tracked.session.status.is_placed and session.status.is_placed:
            running.append(entry)  # placed before this pass: a session placed now is not
    return offers, running, releasing
