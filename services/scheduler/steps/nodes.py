"""Node loss (writes ``ev.node.<id>``, ``ev.session.<id>``): a node whose agent's heartbeat is
gone is declared lost, every kernel on it released, and every session with a kernel there
ends TERMINATED with a ``node-lost`` reason and what was last known of its kernels (its other
kernels, on other nodes, are asked to stop). What they held of quota is given back in
the same decision (``Workspace``). A batch session that asked for it (``requeue_on_node_loss``) is
requeued instead: PENDING again with new kernels, its slots still reserved, its old kernels
elsewhere asked to stop, placed by the next pass. A lost node takes
no placement until its agent registers again (``steps.register`` records it recovered).
"""

from __future__ import annotations

import logging
from datetime import datetime

from commands.errors import DomainError
from commands.session.aggregate import Session
from events.envelope import Cause
from events.writes import AggregateRef
from schemas.ids import derived_id
from schemas.principal import SYSTEM_TENANT
from schemas.session import MAX_REQUEUES, cluster_host
from schemas.subjects import AggregateType
from services.scheduler.state import SchedulerState
from services.scheduler.steps.common import SCHEDULER, cause_of
from services.scheduler.steps.lifecycle import stop_the_rest
from services.scheduler.workspace import Workspace

log = logging.getLogger(__name__)


def declare_lost(state: SchedulerState, space: Workspace, now: datetime) -> None:
    for agent_id in list(state.gone):
        folded = state.nodes.get(agent_id)
        if folded is None or folded.lost:
            del state.gone[agent_id]  # no ledger (never registered), or declared already
            continue
        if state.is_broken(AggregateRef(AggregateType.NODE, agent_id)):
            continue
        node = space.node(agent_id)
        if node is None:
            continue
        name = node.hostname or agent_id
        reason = f"node-lost: node {name} stopped answering (heartbeat expired)"
        node.mark_lost(reason, now)
        ended: list[Session] = []
        requeued: list[Session] = []
        elsewhere: list[tuple[str, str]] = []  # requeued sessions' old kernels on other nodes
        seen: set[str] = set()
        for kernel_id, held in sorted(node.allocations.items()):
            node.release(kernel_id, "node-lost", now)
            session = space.session(held.session_id)
            if session is None or session.id in seen:
                continue  # a second kernel of a session decided already
            seen.add(session.id)
            text = last_known(session, reason)
            old = [
                (k, n)
                for k, n in session.placements.items()
                if n != agent_id and not session.kernel(k).status.has_ended
            ]
            try:
                if session.requeue(f"{text}; placed again ({_attempt(session)})", now):
                    requeued.append(session)
                    elsewhere += old
                elif session.mark_terminated(text, now):  # nothing for an ended session
                    ended.append(session)
            except DomainError as exc:
                # Slots held for a session that was never placed (another writer's ledger):
                # they go with the node, the session stays as it is. Raising here would fail
                # every pass from now on.
                log.error("node %s lost: session %s left as it is (%s)", name, session.id, exc)
        stops = [n for s in ended for n in stop_the_rest(s, space, now, skip=node)]
        for kernel_id, node_id in elsewhere:
            other = space.node(node_id)
            if other is not None and other.request_stop(kernel_id, reason, now):
                stops.append(other)
        if requeued:
            state.wake_at(now)  # they wait again: the next pass places them
        log.warning(
            "node %s lost: %d session(s) ended, %d requeued", name, len(ended), len(requeued)
        )
        # One decision: the ledger and the sessions it ends are stored together or not at all.
        cause = _cause(agent_id, folded.version)
        space.joint(
            [
                (cause, node),
                *((cause_of(state.sessions[s.id]), s) for s in [*ended, *requeued]),
                *((cause, n) for n in {n.id: n for n in stops}.values()),
            ]
        )


def last_known(session: Session, reason: str) -> str:
    """The loss, with what was last known of each kernel of the session (its history keeps
    it: nothing more will ever be reported about them)."""
    kernels = ", ".join(
        f"{cluster_host(i)} {session.kernel(k).status.value.lower()}"
        if k in session.placements
        else f"{cluster_host(i)} not placed"
        for i, k in enumerate(session.kernel_ids)
    )
    return f"{reason}; last known: {session.status.value.lower()}, kernels {kernels}"


def _attempt(session: Session) -> str:
    return f"requeue {session.attempt + 1} of {MAX_REQUEUES}"


def _cause(agent_id: str, version: int) -> Cause:
    """Deciding the same loss again (after a conflict) derives the same event ids."""
    decision = derived_id("node-lost", agent_id, str(version))
    return Cause(
        causation_id=decision, correlation_id=decision, actor=SCHEDULER, tenant=SYSTEM_TENANT
    )


def stop_at_drain_deadlines(state: SchedulerState, space: Workspace, now: datetime) -> None:
    """A draining node whose deadline has come: every session still on it starts
    terminating (its kernels asked to stop) with the drain as its reason. A deadline still
    ahead becomes the scheduler's timer."""
    for node_id, folded in state.nodes.items():
        deadline = folded.drain_deadline
        if not folded.draining or deadline is None or not folded.allocations or folded.lost:
            continue
        if deadline > now:
            state.wake_at(deadline)
            continue
        name = folded.hostname or node_id
        reason = f"node {name} was drained and its drain deadline came"
        for held in list(folded.allocations.values()):
            tracked = state.sessions.get(held.session_id)
            session = space.session(held.session_id)
            if tracked is None or session is None or not session.terminate(reason, now):
                continue
            stops = stop_the_rest(session, space, now)
            space.unit(cause_of(tracked), session, *stops)
