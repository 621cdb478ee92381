"""Session commands (``cmd.session.create``, ``cmd.session.terminate``) decided on the folded
state. Writes ``ev.session.<id>`` (``SessionRequested``, ``SessionCancelled``,
``SessionTerminating``) and ``ev.node.<id>`` (``KernelStopRequested``).

Each handler decides in memory, writes one guarded commit and applies it from the ack; on a
conflict it folds what the other writer stored and decides again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from commands.messages import CreateSession, TerminateSession
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.runner import HandlerContext
from commands.session import Session
from events.fold import Fold
from events.writes import AggregateRef, ConcurrencyConflict
from schemas.ids import session_id_for
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
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

    async def create_session(self, cmd: CreateSession, ctx: HandlerContext) -> Decision:
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
            space = Workspace(self.state)
            session = space.add(Session.request(session_id, cmd.spec, ctx.now()))
            space.unit(cmd.cause(), session)
            try:
                done = await space.commit(ctx.store, self.fold, quiet=False)
            except ConcurrencyConflict as conflict:
                await refresh(ctx.store, self.state, list(conflict.stale))
                continue
            return Accepted.of(merged(done), f"session {session_id} requested")
        raise TooManyConflictsError(f"creating session {session_id} kept conflicting")

    async def terminate_session(self, cmd: TerminateSession, ctx: HandlerContext) -> Decision:
        """PENDING: cancelled at once. Placed: TERMINATING, and each kernel's node ledger asks
        its agent to stop it, in one group commit; the session ends when the agent reports
        the exit."""
        if cmd.session_id not in self.state.sessions:
            await self.sync()
        for _ in range(self.attempts):
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
            except ConcurrencyConflict as conflict:
                await refresh(ctx.store, self.state, list(conflict.stale))
                continue
            return Accepted.of(merged(done), f"session {session.id} is {session.status.value}")
        raise TooManyConflictsError(f"terminating session {cmd.session_id} kept conflicting")
