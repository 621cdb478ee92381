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
from commands.quota import Quota
from commands.session import Session
from events.domain.agent import KernelExited, KernelFailedToStart, KernelStarted
from events.envelope import Cause
from events.fold import Fold
from events.store import EventStore
from events.writes import AggregateRef, ConcurrencyConflict
from schemas.principal import Actor
from schemas.resources import ZERO, ResourceSlots
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
from schemas.tenancy import quota_id_for
from services.scheduler.admission import Cancel, Candidate, Decision, Wait, admit, scopes_of
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

SCHEDULER = Actor.service("scheduler")


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
        queue = [sid for sid in queue if _still_pending(space, sid)]
        if queue:
            place_group(state, group, queue, space, now)


def _still_pending(space: Workspace, session_id: str) -> bool:
    session = space.peek_session(session_id)
    return session is not None and session.status is SessionStatus.PENDING


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


# ---- admission ---------------------------------------------------------------------------


def _cause(tracked: TrackedSession) -> Cause:
    return Cause(
        causation_id=tracked.last_event_id,
        correlation_id=tracked.correlation_id,
        actor=SCHEDULER,
        tenant=tracked.tenant,
    )


def admit_sessions(
    state: SchedulerState, space: Workspace, now: datetime, may_admit: Callable[[str], bool]
) -> dict[str, list[str]]:
    """Cancel what a deactivated keypair left waiting, release what ended, then admit what
    fits, in the domains this scheduler admits for. Returns the admitted sessions per resource
    group (placement takes them in this same pass)."""
    for session_id in [*_owned_pending(state)]:
        owner = state.sessions[session_id].session.owner
        assert owner is not None
        if may_admit(owner.domain) and not state.keypair_active(owner.access_key):
            _end(state, space, session_id, f"keypair {owner.access_key} was deactivated", now)
    ended = [s.id for s in space.sessions() if s.status.is_terminal]
    for session_id in dict.fromkeys([*ended, *state.releasable]):
        owner = state.sessions[session_id].session.owner
        if owner is None or may_admit(owner.domain):
            _release(state, space, session_id, now)
    admitted: dict[str, list[str]] = {}
    for domain, queue in state.unadmitted.items():
        if not queue or not may_admit(domain):
            continue
        candidates = [_candidate(state, sid) for sid in queue if _still_pending(space, sid)]
        held = {}
        for kind, scope_id in scopes_of(candidates):
            quota = space.peek_quota(quota_id_for(kind, scope_id))
            if quota is not None:
                held[quota.id] = quota
        for decision in admit(candidates, held, state.directory):
            _apply(state, space, decision, now, admitted)
    return admitted


def _owned_pending(state: SchedulerState) -> list[str]:
    found = [sid for queue in state.unadmitted.values() for sid in queue]
    for queue in state.waiting.values():
        found += [sid for sid in queue if state.sessions[sid].session.owner is not None]
    return found


def _candidate(state: SchedulerState, session_id: str) -> Candidate:
    session = state.sessions[session_id].session
    assert session.owner is not None
    return Candidate(session_id, session.owner, session.spec.total, session.spec.priority)


def _apply(
    state: SchedulerState,
    space: Workspace,
    decision: Decision,
    now: datetime,
    admitted: dict[str, list[str]],
) -> None:
    tracked = state.sessions[decision.session_id]
    session = space.session(decision.session_id)
    assert session is not None and session.owner is not None
    if isinstance(decision, Cancel):
        _end(state, space, session.id, decision.reason, now)
    elif isinstance(decision, Wait):
        session.note_pending_reason(decision.reason, now)
        space.unit(_cause(tracked), session)
    else:
        session.admit("admitted", now)
        quotas = [space.quota(kind, sid, now) for kind, sid in session.owner.scopes()]
        for quota in quotas:
            quota.reserve(session.id, session.spec.total, now)
        space.unit(_cause(tracked), session, *quotas)
        admitted.setdefault(session.spec.resource_group, []).append(session.id)


def _end(
    state: SchedulerState, space: Workspace, session_id: str, reason: str, now: datetime
) -> None:
    """Cancel a waiting session and give back what it holds, in one decision."""
    session = space.session(session_id)
    assert session is not None
    session.terminate(reason, now)
    space.unit(
        _cause(state.sessions[session_id]), session, *_releases(state, space, session_id, now)
    )


def _release(state: SchedulerState, space: Workspace, session_id: str, now: datetime) -> None:
    quotas = _releases(state, space, session_id, now)
    if quotas:
        space.unit(_cause(state.sessions[session_id]), *quotas)


def _releases(
    state: SchedulerState, space: Workspace, session_id: str, now: datetime
) -> list[Quota]:
    """Every scope holding the session, with its reservation released or queue place given
    back (already done ones change nothing)."""
    session = space.peek_session(session_id)
    reason = f"session {session.status.value}" if session is not None else "session ended"
    quotas = []
    for quota_id in sorted(state.holdings.get(session_id, ())):
        known = state.quotas.get(quota_id)
        if known is None:
            continue
        quota = space.quota(known.scope, known.scope_id, now)
        quota.release(session_id, reason, now)
        quota.dequeue(session_id, reason, now)
        quotas.append(quota)
    return quotas
