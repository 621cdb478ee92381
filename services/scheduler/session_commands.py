"""Session commands (``cmd.session.create``, ``cmd.session.terminate``) decided on the folded
state. Writes ``ev.session.<id>`` (``SessionRequested``, ``SessionCancelled``,
``SessionTerminating``), ``ev.quota.<keypair scope>`` (``QuotaScopeOpened``,
``QuotaSessionQueued``) and ``ev.node.<id>`` (``KernelStopRequested``).

A create is checked against the owner's tenancy and policy, its folders are resolved into
mounts (``rules.mounts``), and it takes its place in the keypair's queue in the same guarded
group commit as the session: two creates racing for the last pending place conflict on the
keypair's quota, and the loser decides again. The runner hands creates over in runs
(``create_sessions``): a run is one group commit with one queue event per keypair, instead of
one commit per create.

Each handler is one decision run by the unit of work (``commands.unit_of_work``): decided in
memory on working copies, stored in one guarded commit, applied from the ack, and decided
again after a conflict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from commands.authorisation import Principal
from commands.messages import CreateSession, TerminateSession
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.runner import HandlerContext
from commands.session.aggregate import Session
from commands.unit_of_work import TooManyConflictsError, UnitOfWork, answer
from events.writes import AggregateRef
from schemas.bounds import DEFAULT_LIMITS, BoundsError, InputLimits
from schemas.ids import session_id_for
from schemas.principal import Actor, ActorKind
from schemas.session import SessionStatus, SessionType, check_request
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind
from services.scheduler.rules.create import (
    pending_full,
    refuse,
    refuse_image,
    refuse_registry,
)
from services.scheduler.rules.mounts import resolve_mounts, unresolved
from services.scheduler.state import SchedulerState
from services.scheduler.steps.create import QueueRun
from services.scheduler.workspace import Workspace


@dataclass
class SessionCommands:
    state: SchedulerState
    sync: Callable[[], Awaitable[None]]
    """Fold up to the log's end as of now: asked before saying "unknown" to a sender who
    may have just written what makes the answer "known"."""
    attempts: int = 5
    limits: InputLimits = DEFAULT_LIMITS
    """The input maximums (``JETYARD_LIMIT_*``), the same the gateway checks."""
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held from deciding to stored, shared with the passes: this replica's own writers never
    race each other on an aggregate (a create and a pass both write the keypair's quota)."""

    async def create_session(self, cmd: CreateSession, ctx: HandlerContext) -> Decision:
        (decision,) = await self.create_sessions([cmd], ctx)
        if isinstance(decision, Exception):
            raise decision
        return decision

    async def create_sessions(
        self, cmds: Sequence[CreateSession], ctx: HandlerContext
    ) -> list[Decision | Exception]:
        """Decide a run of creates together: one workspace, one group commit (split in
        batches of whole decisions), one queue event per keypair. On a conflict, fold what
        the other writer stored and decide again the creates not yet decided."""
        decided: dict[int, Decision | Exception] = {}
        if any(self._unknown_yet(c) for c in cmds):
            await self.sync()

        def decide(space: Workspace) -> dict[int, tuple[AggregateRef, AggregateRef]]:
            todo = [i for i in range(len(cmds)) if i not in decided]
            return self._decide_creates(cmds, todo, space, ctx.now(), decided)

        # Each round decides at least one create; a command that came twice in the run is
        # answered in the round after its first copy was stored.
        for _ in range(len(cmds)):
            if len(decided) == len(cmds):
                break
            try:
                created, stored = await self._work(ctx).run(decide, what="creating sessions")
            except TooManyConflictsError as exc:
                return [decided.get(i) or exc for i in range(len(cmds))]
            seqs = stored.seqs_by_aggregate()
            for i, (ref, queue) in created.items():
                mine = tuple(sorted([*seqs.get(ref, ()), *seqs.get(queue, ())]))
                decided[i] = Accepted((ref.id, queue.id), mine, f"session {ref.id} requested")
        left = TooManyConflictsError("a create of this run was never decided")
        return [decided.get(i) or left for i in range(len(cmds))]

    def _work(self, ctx: HandlerContext) -> UnitOfWork[Workspace]:
        return UnitOfWork(
            ctx.store,
            self.state,
            lambda: Workspace(self.state),
            attempts=self.attempts,
            lock=self.writing,
        )

    def _decide_creates(
        self,
        cmds: Sequence[CreateSession],
        todo: list[int],
        space: Workspace,
        now: datetime,
        decided: dict[int, Decision | Exception],
    ) -> dict[int, tuple[AggregateRef, AggregateRef]]:
        """Decide ``todo`` on the workspace: refusals go to ``decided``; the sessions to write
        are returned (index -> session and keypair quota refs). Each keypair's creates and its
        one queue event are a unit: a session is never stored without its queue place."""
        created: dict[int, tuple[AggregateRef, AggregateRef]] = {}
        runs: dict[str, QueueRun] = {}
        writing: set[str] = set()
        for i in todo:
            cmd = cmds[i]
            session_id = session_id_for(cmd.command_id)
            ref = AggregateRef(AggregateType.SESSION, session_id)
            if session_id in writing:
                continue  # the same command twice in one run: decided once written
            refused = self._refuse_create(cmd, ref)
            if refused is not None:
                decided[i] = refused
                continue
            owner = cmd.owner
            assert owner is not None
            who = self._principal(cmd)
            if who is None:
                decided[i] = Rejected(Code.FORBIDDEN, f"keypair {owner.access_key} is unknown")
                continue
            mounts = resolve_mounts(self.state.folders, who, owner.project_id, cmd.spec.mounts)
            if isinstance(mounts, Rejected):
                decided[i] = mounts
                continue
            run = runs.get(owner.access_key)
            if run is None:
                queue = space.quota(ScopeKind.KEYPAIR, owner.access_key, now)
                run = runs[owner.access_key] = QueueRun(queue)
            need = cmd.spec.total
            full = pending_full(self.state.directory, owner.access_key, run.queue, need, run.added)
            if full is not None:
                decided[i] = Rejected(Code.QUOTA, full)
                continue
            if len(run.parts) + 2 >= space.max_events:
                run.flush(space, now)
            session = space.add(
                Session.request(session_id, cmd.spec, now, owner=owner, mounts=mounts)
            )
            run.add(cmd.cause(), session, need)
            created[i] = (ref, run.queue.ref)
            writing.add(session_id)
        for run in runs.values():
            run.flush(space, now)
        return created

    def _principal(self, cmd: CreateSession) -> Principal | None:
        """The person the session is for, as the folders' access rules see them."""
        if cmd.owner is None:
            return None
        keypair = Actor(kind=ActorKind.KEYPAIR, id=cmd.owner.access_key)
        return self.state.directory.principal(keypair)

    def _unknown_yet(self, cmd: CreateSession) -> bool:
        """Whether the create names something the fold has not seen (yet): its image, a part
        of its owner, its resource group's opening to them, or a folder to mount (or its
        share, or its coming back from the trash), perhaps written just before the command
        was sent."""
        if session_id_for(cmd.command_id) in self.state.sessions:
            return False
        directory, owner = self.state.directory, cmd.owner
        deps_unseen = any(d not in self.state.sessions for d in cmd.spec.depends_on)
        if owner is not None and cmd.spec.mounts:
            who, folders = self._principal(cmd), self.state.folders
            if any(unresolved(folders, who, owner.project_id, m.folder) for m in cmd.spec.mounts):
                return True
        return (
            deps_unseen
            or not self.state.image_known(cmd.spec.image)
            or (
                owner is not None
                and not (
                    owner.access_key in directory.keypairs
                    and owner.user_id in directory.users
                    and owner.project_id in directory.projects
                    and owner.domain in directory.domains
                    and cmd.spec.resource_group
                    in directory.allowed_groups(owner.domain, owner.project_id, owner.access_key)
                )
            )
        )

    def _refuse_create(self, cmd: CreateSession, ref: AggregateRef) -> Decision | None:
        """The answer to a create that writes nothing, or None when it may be written."""
        if cmd.owner is None:
            return Rejected(Code.INVALID, "a session needs an owner")
        if cmd.spec.type is SessionType.INFERENCE and cmd.actor.kind is not ActorKind.SERVICE:
            return Rejected(
                Code.INVALID,
                "inference sessions are started by model-serving endpoints: create an "
                "endpoint (jetyard endpoint create) instead",
            )
        if ref.id in self.state.sessions:
            # The same command again (after its outcome expired): the same session.
            return Accepted((ref.id,), (), f"session {ref.id} already exists")
        if self.state.is_broken(ref):
            return Rejected(Code.CONFLICT, f"session {ref.id} exists but is unreadable")
        try:
            check_request(cmd.spec, self.limits)
        except BoundsError as exc:
            return Rejected(Code.INVALID, str(exc))
        image = cmd.spec.image
        directory = self.state.directory
        if (refused := refuse_registry(directory, image, cmd.owner.project_id)) is not None:
            return refused
        pullable = directory.image_source(image, cmd.owner.project_id, cmd.spec.resource_group)
        if not self.state.image_known(image) and pullable is None:
            return Rejected(
                Code.INVALID,
                f"no registered agent has image {image}, and no registry your project may "
                "use has it: choose an image an agent reports (jetyard images), or ask an "
                "administrator to add its registry and rescan it",
            )
        for dependency in cmd.spec.depends_on:
            tracked = self.state.sessions.get(dependency)
            owner = None if tracked is None else tracked.session.owner
            if owner is None or owner.domain != cmd.owner.domain:
                return Rejected(Code.NOT_FOUND, f"dependency {dependency} is not a known session")
        return refuse_image(self.state.directory, cmd.spec) or refuse(
            self.state.directory, cmd.owner, cmd.spec
        )

    async def terminate_session(self, cmd: TerminateSession, ctx: HandlerContext) -> Decision:
        """PENDING: cancelled at once. Placed: TERMINATING, and each kernel's node ledger asks
        its agent to stop it, in one group commit; the session ends when the agent reports
        the exit."""
        if cmd.session_id not in self.state.sessions:
            await self.sync()

        def decide(space: Workspace) -> Decision:
            session = space.session(cmd.session_id)
            if session is None:
                return Rejected(Code.NOT_FOUND, f"there is no session {cmd.session_id}")
            if not session.terminate(ended_by(cmd, session), ctx.now()):
                status = session.status.value
                return Accepted((session.id,), (), f"session {session.id} is already {status}")
            nodes = []
            if session.status is SessionStatus.TERMINATING:
                for kernel_id, node_id in session.placements.items():
                    node = space.node(node_id)
                    if node is not None:
                        node.request_stop(kernel_id, session.reason, ctx.now())
                        nodes.append(node)
            space.unit(cmd.cause(), session, *nodes)
            return Accepted((), (), f"session {session.id} is {session.status.value}")

        return answer(
            *await self._work(ctx).run(decide, what=f"terminating session {cmd.session_id}")
        )


ASKED = TerminateSession.model_fields["reason"].default
"""The reason a terminate carries when its sender gave none."""


def ended_by(cmd: TerminateSession, session: Session) -> str:
    """A session's end by request, as its final reason: who asked (by id: names never enter
    the log; its owner said so), and why when the sender said: ``terminated by keypair
    AK… (its owner)``, ``cancelled by user … : over budget``."""
    verb = "cancelled" if session.status is SessionStatus.PENDING else "terminated"
    actor, owner = cmd.actor, session.owner
    own = owner is not None and (
        (actor.kind is ActorKind.KEYPAIR and actor.id == owner.access_key)
        or (actor.kind is ActorKind.USER and actor.id == owner.user_id)
    )
    who = f"{actor.kind.value} {actor.id}" + (" (its owner)" if own else "")
    why = "" if cmd.reason == ASKED else f": {cmd.reason}"
    return f"{verb} by {who}{why}"
