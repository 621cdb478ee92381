"""The decision pass: everything ready is decided in memory and stored in one group commit.

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

from commands.errors import DomainError
from commands.node import Node
from commands.session import Session
from events.domain.agent import KernelExited, KernelFailedToStart, KernelStarted
from events.envelope import Cause
from events.fold import Fold
from events.store import EventStore
from events.writes import AggregateRef, ConcurrencyConflict
from schemas.resources import ZERO, ResourceSlots
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
from services.scheduler.admitting import SCHEDULER, admit_sessions, still_pending
from services.scheduler.placement import (
    KernelRequest,
    NodeOffer,
    Placed,
    SessionRequest,
    place,
)
from services.scheduler.state import Fact, SchedulerState, TrackedSession, Work
from services.scheduler.workspace import Workspace, refresh

log = logging.getLogger(__name__)


class PassFailedError(RuntimeError):
    """A pass met a conflict on every attempt: someone else keeps writing our aggregates."""


async def run_pass(
    state: SchedulerState,
    fold: Fold[SchedulerState],
    store: EventStore,
    now: Callable[[], datetime],
    *,
    max_events: int,
    attempts: int,
    may_admit: Callable[[str], bool] = lambda domain: True,
    writing: asyncio.Lock | None = None,
) -> int:
    """Decide and store everything ready; returns the number of events written. On a
    conflict, fold what the other writer stored and decide again. ``writing`` is held from
    deciding to stored (shared with the command handlers)."""
    writing = writing or asyncio.Lock()
    for _ in range(attempts):
        async with writing:
            work = state.take_work()
            space = Workspace(state, max_events=max_events)
            try:
                decide(state, work, space, now(), may_admit)
                if space.events == 0:
                    return 0
                log.debug("pass: %d events in %d batch(es)", space.events, len(space.batches))
                await space.commit(store, fold, quiet=True)
                return space.events
            except ConcurrencyConflict as conflict:
                state.give_back(work)
                stale = list(conflict.stale)
            except BaseException:
                state.give_back(work)
                raise
        await refresh(store, state, stale)
    raise PassFailedError(f"the decision pass conflicted {attempts} times in a row")


def decide(
    state: SchedulerState,
    work: Work,
    space: Workspace,
    now: datetime,
    may_admit: Callable[[str], bool] = lambda domain: True,
) -> None:
    """Node ledgers for agents first, then kernel facts (which free capacity and end
    sessions), then admission (which releases what ended), then placement, so each step sees
    what the steps before it decided in this very pass."""
    for agent_id in work.agents:
        register_node(state, agent_id, space, now)
    for fact in work.facts:
        apply_fact(state, fact, space, now)
    admitted = admit_sessions(state, space, now, may_admit)
    for group in dict.fromkeys([*state.waiting, *admitted]):
        queue = [*state.waiting.get(group, {}), *admitted.get(group, [])]
        # A session this pass ended (deactivated keypair) is not placed.
        queue = [sid for sid in queue if still_pending(space, sid)]
        if queue:
            place_group(state, group, queue, space, now)


def register_node(state: SchedulerState, agent_id: str, space: Workspace, now: datetime) -> None:
    """An agent's first registration opens its node ledger (same id); a later one with other
    hardware changes the ledger's capacity."""
    agent = state.agents.get(agent_id)
    if agent is None or state.is_broken(AggregateRef(AggregateType.NODE, agent_id)):
        return
    source = agent.source
    cause = Cause(
        causation_id=source.event_id,
        correlation_id=source.correlation_id,
        actor=SCHEDULER,
        tenant=source.tenant,
    )
    node = space.node(agent_id)
    if node is None:
        node = space.add(
            Node.register(agent_id, agent.hostname, agent.resource_group, agent.capacity, now)
        )
    else:
        node.change_capacity(agent.capacity, now)
    space.unit(cause, node)


def apply_fact(state: SchedulerState, fact: Fact, space: Workspace, now: datetime) -> None:
    """A kernel started, exited or failed: the session follows, and an ended kernel's slots go
    back to its node. Late or repeated facts change nothing."""
    event, envelope = fact.event, fact.envelope
    tracked = state.sessions.get(event.session_id)
    session = space.session(event.session_id)
    node_id = fact.agent_id
    if session is not None:
        node_id = session.placements.get(event.kernel_id, fact.agent_id)
    ledger = AggregateRef(AggregateType.NODE, node_id)
    node = None if state.is_broken(ledger) else space.node(node_id)
    try:
        if session is not None:
            if isinstance(event, KernelStarted):
                session.kernel_started(event.kernel_id, now)
            elif isinstance(event, KernelExited):
                session.kernel_exited(event.kernel_id, event.exit_code, _exit_reason(event), now)
            elif (
                session.status is SessionStatus.TERMINATING
                and event.kernel_id in session.kernel_ids
            ):
                # Stopped before it started: the user asked for the end, so it is not an error.
                session.mark_terminated(f"stopped before it started ({event.reason})", now)
            else:
                session.kernel_failed(
                    event.kernel_id, f"kernel failed to start: {event.reason}", now
                )
    except DomainError as exc:
        # A fact about a kernel the session does not have, or one before it was placed:
        # nothing to decide (the rule checks before it records anything).
        log.info("fact %s from agent %s ignored: %s", envelope.name, fact.agent_id, exc)
    if node is not None and isinstance(event, KernelExited | KernelFailedToStart):
        ended = "kernel exited" if isinstance(event, KernelExited) else "kernel failed to start"
        node.release(event.kernel_id, ended, now)
    cause = Cause(
        causation_id=envelope.event_id,
        correlation_id=tracked.correlation_id if tracked else envelope.correlation_id,
        actor=SCHEDULER,
        tenant=tracked.tenant if tracked else envelope.tenant,
    )
    space.unit(cause, *[a for a in (session, node) if a is not None])


def _exit_reason(event: KernelExited) -> str:
    # A process exit code is 0..255; an agent reports a negative one when no process ran
    # (stopped before it started, vanished), and then only its reason means anything.
    if event.exit_code < 0:
        return event.reason or "kernel ended"
    detail = f" ({event.reason})" if event.reason else ""
    return f"kernel exited with code {event.exit_code}{detail}"


def place_group(
    state: SchedulerState, group: str, waiting: list[str], space: Workspace, now: datetime
) -> None:
    offers: list[NodeOffer] = []
    for node_id in [*state.nodes, *space.new_nodes]:
        known = space.peek_node(node_id)
        if known is not None and known.resource_group == group:
            offers.append(_offer(state, known))
    requests = [_request(state.sessions[sid]) for sid in waiting]
    for decision in place(requests, offers):
        tracked = state.sessions[decision.session_id]
        cause = Cause(
            causation_id=tracked.last_event_id,
            correlation_id=tracked.correlation_id,
            actor=SCHEDULER,
            tenant=tracked.tenant,
        )
        session = space.session(decision.session_id)
        assert session is not None
        if not isinstance(decision, Placed):
            session.note_pending_reason(decision.reason, now)
            space.unit(cause, session)
            continue
        ledgers = {node_id: space.node(node_id) for node_id in decision.placements.values()}
        if not _still_fits(session, decision.placements, ledgers):
            log.error("placement of %s does not match the ledgers; left waiting", session.id)
            continue
        spec = session.spec
        for kernel_id, kernel in zip(session.kernel_ids, spec.kernels, strict=True):
            node = ledgers[decision.placements[kernel_id]]
            assert node is not None
            node.allocate(
                kernel_id, session.id, kernel.resources, now,
                image=spec.image, command=spec.command, env=dict(spec.env),
            )  # fmt: skip
        nodes = [node for node in ledgers.values() if node is not None]
        hosts = ", ".join(sorted(node.hostname or node.id for node in nodes))
        session.schedule(decision.placements, f"placed on {hosts}", now)
        space.unit(cause, session, *nodes)


def _still_fits(
    session: Session, placements: dict[str, str], ledgers: dict[str, Node | None]
) -> bool:
    """The ledgers' own rule, checked before deciding anything, so that a refused allocation
    (which would mean a placement bug) cannot leave half a decision on the working copies."""
    need: dict[str, ResourceSlots] = {}
    for kernel_id, kernel in zip(session.kernel_ids, session.spec.kernels, strict=True):
        node_id = placements[kernel_id]
        need[node_id] = need.get(node_id, ZERO) + kernel.resources
    for node_id, slots in need.items():
        node = ledgers[node_id]
        if node is None or not node.schedulable or not slots.fits_in(node.free):
            return False
    return True


def _offer(state: SchedulerState, node: Node) -> NodeOffer:
    agent = state.agents.get(node.id)
    return NodeOffer(
        node_id=node.id,
        hostname=node.hostname,
        capacity=node.capacity,
        free=node.free,
        images=agent.images if agent is not None else frozenset(),
        available=node.schedulable,
    )


def _request(tracked: TrackedSession) -> SessionRequest:
    session = tracked.session
    kernels = tuple(
        KernelRequest(kernel_id, kernel.resources)
        for kernel_id, kernel in zip(session.kernel_ids, session.spec.kernels, strict=True)
    )
    return SessionRequest(session.id, session.spec.image, kernels)
