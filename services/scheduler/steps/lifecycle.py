"""Session lifecycle step of a decision pass; writes ``ev.session.<id>`` and ``ev.node.<id>``.

Kernel facts become session transitions, the other kernels of an ending session are asked to
stop, batch sessions past their timeout are stopped, sessions past a time limit (lifetime,
idle timeout, pending timeout: ``rules.deadlines``, pure) are ended, and waiting sessions whose
dependencies or start time hold them back (``rules.readiness``, pure) are set aside (or
cancelled when a dependency can no longer succeed).

Writes (through the pass's workspace) ``ev.session.<id>`` and ``ev.node.<id>``
(``ResourcesReleased``, ``KernelStopRequested``).
"""

from __future__ import annotations

import logging
from datetime import datetime

from commands.aggregate import Aggregate
from commands.errors import DomainError
from commands.node.aggregate import Node
from commands.session.aggregate import Session
from events.domain.agent import (
    ImagePullStarted,
    KernelExited,
    KernelFailedToStart,
    KernelStarted,
)
from events.envelope import Cause
from events.writes import AggregateRef
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
from services.scheduler.rules.deadlines import any_time_limits, deadlines
from services.scheduler.rules.readiness import Blocked, Doomed, Outcome, Ready, readiness, timed_out
from services.scheduler.state import Fact, SchedulerState
from services.scheduler.steps.admit import end_waiting
from services.scheduler.steps.common import SCHEDULER, cause_of
from services.scheduler.workspace import Workspace

log = logging.getLogger(__name__)


def apply_fact(
    state: SchedulerState, fact: Fact, space: Workspace, now: datetime
) -> list[tuple[Cause, Aggregate]]:
    """A kernel started, exited or failed: the session follows, and an ended kernel's slots go
    back to its node. Late or repeated facts change nothing. Returns the decision's parts, for
    the caller to store with the pass's other facts (``Workspace.joint_runs``)."""
    event, envelope = fact.event, fact.envelope
    if isinstance(event, ImagePullStarted):
        return pulling(state, fact, event, space, now)
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
                session.kernel_stopped(
                    event.kernel_id, f"stopped before it started ({event.reason})", now
                )
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
    stops = stop_the_rest(session, space, now, skip=node) if session is not None else []
    return [(cause, a) for a in (session, node, *stops) if a is not None]


def pulling(
    state: SchedulerState, fact: Fact, event: ImagePullStarted, space: Workspace, now: datetime
) -> list[tuple[Cause, Aggregate]]:
    """A node began pulling an image: the sessions whose kernels wait for it there go
    PULLING (a session already past SCHEDULED, or ended, stays as it is)."""
    agent = state.agents.get(fact.agent_id)
    where = agent.hostname if agent is not None and agent.hostname else fact.agent_id
    parts: list[tuple[Cause, Aggregate]] = []
    for session_id in dict.fromkeys(event.kernels.values()):
        session = space.session(session_id)
        if session is None or not session.begin_pulling(
            f"pulling image {event.reference} on {where}", now
        ):
            continue
        tracked = state.sessions.get(session_id)
        cause = Cause(
            causation_id=fact.envelope.event_id,
            correlation_id=tracked.correlation_id if tracked else fact.envelope.correlation_id,
            actor=SCHEDULER,
            tenant=tracked.tenant if tracked else fact.envelope.tenant,
        )
        parts.append((cause, session))
    return parts


def stop_the_rest(
    session: Session, space: Workspace, now: datetime, *, skip: Node | None = None
) -> list[Node]:
    """An ending session's kernels that still run: each node ledger asks its agent to stop
    them (asking again changes nothing). Returns the ledgers that changed."""
    nodes: dict[str, Node] = {}
    for kernel_id in session.kernels_to_stop():
        node_id = session.placements.get(kernel_id)
        if node_id is None:
            continue
        node = skip if skip is not None and skip.id == node_id else space.node(node_id)
        changed = node is not None and node.request_stop(kernel_id, session.reason, now)
        if changed and node is not None and node is not skip:
            nodes[node.id] = node
    return list(nodes.values())


def _exit_reason(event: KernelExited) -> str:
    # A process exit code is 0..255; an agent reports a negative one when no process ran
    # (stopped before it started, vanished), and then only its reason means anything.
    if event.exit_code < 0:
        return event.reason or "kernel ended"
    detail = f" ({event.reason})" if event.reason else ""
    return f"kernel exited with code {event.exit_code}{detail}"


def stop_timed_out(state: SchedulerState, space: Workspace, now: datetime) -> None:
    """Batch sessions running past their timeout: TERMINATING, and their kernels stopped."""
    running = [state.sessions[sid].session for sid in state.timed if sid in state.sessions]
    for due in timed_out(running, now):
        session = space.session(due.id)
        if session is None or not session.time_out(now):
            continue
        stops = stop_the_rest(session, space, now)
        space.unit(cause_of(state.sessions[session.id]), session, *stops)


def end_expired(state: SchedulerState, space: Workspace, now: datetime) -> None:
    """Sessions past a time limit: a running one past its keypair's lifetime limit or idle
    timeout starts terminating (its kernels stopped), a waiting one past its group's pending
    timeout is cancelled; each with the limit as its reason. The next deadline becomes a
    timer (activity folded meanwhile only moves an idle deadline later: that pass sets the
    next one)."""
    if not any_time_limits(state.directory):
        return
    # As this pass sees them: a session it just started running has a deadline already.
    sessions = [
        (space.peek_session(sid) or t.session, t.activity) for sid, t in state.sessions.items()
    ]
    due, upcoming = deadlines(sessions, state.directory, now)
    if upcoming is not None:
        state.wake_at(upcoming)
    for deadline in due:
        session = space.session(deadline.session_id)
        if session is None:
            continue
        if session.status is SessionStatus.PENDING:
            end_waiting(state, space, session.id, deadline.reason, now)
        elif session.terminate(deadline.reason, now):
            stops = stop_the_rest(session, space, now)
            space.unit(cause_of(state.sessions[session.id]), session, *stops)


def hold_back(state: SchedulerState, space: Workspace, now: datetime) -> set[str]:
    """Waiting sessions that may not be admitted or placed yet (a dependency has not
    succeeded, the start time has not come): their reason is noted and the earliest start
    time becomes the scheduler's next timer. Sessions whose dependency can no longer succeed
    are cancelled. Returns the ids held back."""
    held: set[str] = set()
    queued = [sid for queue in state.unadmitted.values() for sid in queue]
    queued += [sid for queue in state.waiting.values() for sid in queue]
    for session_id in queued:
        tracked = state.sessions[session_id]
        spec = tracked.session.spec
        if not spec.depends_on and spec.starts_at is None:
            continue
        verdict = readiness(tracked.session, lambda sid: _outcome(space, sid), now)
        if isinstance(verdict, Ready):
            continue
        held.add(session_id)
        if isinstance(verdict, Doomed):
            end_waiting(state, space, session_id, verdict.reason, now)
            continue
        assert isinstance(verdict, Blocked)
        if verdict.wake_at is not None:
            state.wake_at(verdict.wake_at)
        session = space.session(session_id)
        if session is not None and session.note_pending_reason(verdict.reason, now):
            space.unit(cause_of(tracked), session)
    return held


def _outcome(space: Workspace, session_id: str) -> Outcome | None:
    # As this pass sees it: a dependency that ended earlier in the same pass counts.
    session = space.peek_session(session_id)
    return None if session is None else Outcome(session.status, session.exit_code)
