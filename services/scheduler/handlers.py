"""Session commands (``cmd.session.create``, ``cmd.session.terminate``) decided on the folded
state. Writes ``ev.session.<id>`` (``SessionRequested``, ``SessionCancelled``,
``SessionTerminating``), ``ev.quota.<keypair scope>`` (``QuotaScopeOpened``,
``QuotaSessionQueued``) and ``ev.node.<id>`` (``KernelStopRequested``).

A create is checked against the owner's tenancy and policy, and takes its place in the
keypair's queue in the same guarded group commit as the session: two creates racing for the
last pending place conflict on the keypair's quota, and the loser decides again.

Each handler decides in memory, writes one guarded commit and applies it from the ack; on a
conflict it folds what the other writer stored and decides again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from commands.directory import Directory
from commands.messages import CreateSession, TerminateSession
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.quota import Quota
from commands.runner import HandlerContext
from commands.session import Session
from events.fold import Fold
from events.writes import AggregateRef, ConcurrencyConflict
from schemas.ids import session_id_for
from schemas.resources import ResourceSlots
from schemas.session import SessionSpec, SessionStatus
from schemas.subjects import AggregateType
from schemas.tenancy import DefaultForUnspecified, ScopeKind, SessionOwner
from services.scheduler.admission import amount_text, hard_limit_exceeded
from services.scheduler.state import SchedulerState
from services.scheduler.workspace import Workspace, merged, refresh


class TooManyConflictsError(RuntimeError):
    """Deciding kept losing races; the runner retries the command later."""


@dataclass
class SessionCommands:
    state: SchedulerState
    fold: Fold[SchedulerState]
    sync: Callable[[], Awaitable[None]]
    """Fold up to the log's end as of now: asked before saying "unknown" to a sender who
    may have just written what makes the answer "known"."""
    attempts: int = 5
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held from deciding to stored, shared with the passes: this replica's own writers never
    race each other on an aggregate (a create and a pass both write the keypair's quota)."""

    async def create_session(self, cmd: CreateSession, ctx: HandlerContext) -> Decision:
        owner = cmd.owner
        if owner is None:
            return Rejected(Code.INVALID, "a session needs an owner")
        session_id = session_id_for(cmd.command_id)
        ref = AggregateRef(AggregateType.SESSION, session_id)
        image = cmd.spec.image
        if session_id not in self.state.sessions and not self.state.image_known(image):
            await self.sync()
        for _ in range(self.attempts):
            if session_id in self.state.sessions:
                # The same command again (after its outcome expired): the same session.
                return Accepted((session_id,), (), f"session {session_id} already exists")
            if self.state.is_broken(ref):
                return Rejected(Code.CONFLICT, f"session {session_id} exists but is unreadable")
            if not self.state.image_known(image):
                return Rejected(
                    Code.INVALID,
                    f"no registered agent has image {image}: "
                    "choose an image an agent reports, or add it to an agent first",
                )
            refused = refuse(self.state.directory, owner, cmd.spec)
            if refused is not None:
                return refused
            async with self.writing:
                space = Workspace(self.state)
                session = space.add(Session.request(session_id, cmd.spec, ctx.now(), owner=owner))
                queue = space.quota(ScopeKind.KEYPAIR, owner.access_key, ctx.now())
                full = pending_full(self.state.directory, owner.access_key, queue, cmd.spec.total)
                if full is not None:
                    return Rejected(Code.QUOTA, full)
                queue.queue(session_id, cmd.spec.total, ctx.now())
                space.unit(cmd.cause(), session, queue)
                try:
                    done = await space.commit(ctx.store, self.fold, quiet=False)
                    return Accepted.of(merged(done), f"session {session_id} requested")
                except ConcurrencyConflict as conflict:
                    stale = list(conflict.stale)
            await refresh(ctx.store, self.state, stale)
        raise TooManyConflictsError(f"creating session {session_id} kept conflicting")

    async def terminate_session(self, cmd: TerminateSession, ctx: HandlerContext) -> Decision:
        """PENDING: cancelled at once. Placed: TERMINATING, and each kernel's node ledger asks
        its agent to stop it, in one group commit; the session ends when the agent reports
        the exit."""
        if cmd.session_id not in self.state.sessions:
            await self.sync()
        for _ in range(self.attempts):
            async with self.writing:
                space = Workspace(self.state)
                session = space.session(cmd.session_id)
                if session is None:
                    return Rejected(Code.NOT_FOUND, f"there is no session {cmd.session_id}")
                if not session.terminate(cmd.reason, ctx.now()):
                    status = session.status.value
                    return Accepted((session.id,), (), f"session {session.id} is already {status}")
                nodes = []
                if session.status is SessionStatus.TERMINATING:
                    for kernel_id, node_id in session.placements.items():
                        node = space.node(node_id)
                        if node is not None:
                            node.request_stop(kernel_id, cmd.reason, ctx.now())
                            nodes.append(node)
                space.unit(cmd.cause(), session, *nodes)
                try:
                    done = await space.commit(ctx.store, self.fold, quiet=False)
                    return Accepted.of(
                        merged(done), f"session {session.id} is {session.status.value}"
                    )
                except ConcurrencyConflict as conflict:
                    stale = list(conflict.stale)
            await refresh(ctx.store, self.state, stale)
        raise TooManyConflictsError(f"terminating session {cmd.session_id} kept conflicting")


def refuse(directory: Directory, owner: SessionOwner, spec: SessionSpec) -> Rejected | None:
    """Why the owner may not create this session at all, or None. (The gateway resolved
    the owner from the authenticated principal; this checks it is still in good standing.)"""
    ak, name = owner.access_key, f"keypair {owner.access_key}"
    keypair = directory.keypairs.get(ak)
    if keypair is None or not keypair.active:
        return Rejected(Code.FORBIDDEN, f"{name} is unknown or deactivated")
    if keypair.user_id != owner.user_id or keypair.domain != owner.domain:
        return Rejected(Code.FORBIDDEN, f"{name} does not belong to the session's owner")
    user = directory.users.get(owner.user_id)
    if user is None or not user.active or user.domain != owner.domain:
        return Rejected(Code.FORBIDDEN, f"user {owner.user_id[:8]} is unknown or deactivated")
    project = directory.projects.get(owner.project_id)
    if project is None or not project.active or project.domain != owner.domain:
        return Rejected(Code.FORBIDDEN, f"project {owner.project_id[:8]} is unknown or inactive")
    if owner.project_id not in user.projects:
        return Rejected(
            Code.FORBIDDEN, f"user {owner.user_id[:8]} is not in project {project.name}"
        )
    domain = directory.domains.get(owner.domain)
    if domain is None or not domain.active:
        return Rejected(Code.FORBIDDEN, f"domain {owner.domain} is unknown or deactivated")
    group = spec.resource_group
    if group not in directory.allowed_groups(owner.domain, owner.project_id, ak):
        return Rejected(
            Code.FORBIDDEN, f"resource group {group} is not allowed for project {project.name}"
        )
    if spec.type not in directory.groups[group].allowed_session_types:
        return Rejected(
            Code.FORBIDDEN, f"resource group {group} does not allow {spec.type.value} sessions"
        )
    limits = directory.keypair_limits(ak)
    if limits is None:
        return Rejected(Code.FORBIDDEN, f"{name} has no resource policy")
    if spec.priority > limits.max_priority:
        return Rejected(
            Code.FORBIDDEN,
            f"priority {spec.priority} is above the most {name} may ask for "
            f"({limits.max_priority})",
        )
    if len(spec.kernels) > limits.max_containers_per_session:
        return Rejected(
            Code.QUOTA,
            f"{len(spec.kernels)} kernels is more than {name} allows per session "
            f"({limits.max_containers_per_session})",
        )
    over = hard_limit_exceeded(owner, spec.total, directory)
    if over is not None:
        return Rejected(Code.QUOTA, f"the session {over}")
    return None


def pending_full(
    directory: Directory, access_key: str, queue: Quota, need: ResourceSlots
) -> str | None:
    """Why the keypair's queue has no room for one more session, or None."""
    limits = directory.keypair_limits(access_key)
    if limits is None:
        return None
    waiting = len(queue.queued)
    if limits.max_pending_sessions is not None and waiting >= limits.max_pending_sessions:
        return (
            f"keypair {access_key}: {waiting}/{limits.max_pending_sessions} sessions waiting "
            "(max pending sessions)"
        )
    over = limits.max_pending_resource_slots.over(
        queue.queued_total + need, DefaultForUnspecified.UNLIMITED
    )
    if over:
        slot, amount, limit = over[0]
        waiting_slots = f"{amount_text(slot, amount)}/{amount_text(slot, limit)}"
        return f"keypair {access_key}: {slot} {waiting_slots} would be waiting (max pending slots)"
    return None
