"""The gateway's admin module: the one writer of the tenancy aggregates.

Folds ``ev.domain.*``, ``ev.project.*``, ``ev.user.*``, ``ev.keypair.*``,
``ev.resource_policy.*``, ``ev.resource_group.*`` and ``ev.image.*`` into a ``Directory``, and
runs every admin command (``cmd.<those aggregates>.*``, one durable consumer "admin"): checks
who asks, decides on the directory, writes one guarded commit to those subjects, applies it
from the ack, and decides again after a conflict. Writes ``out.<command id>`` via the runner.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from commands import admin as a
from commands.directory import TENANCY_SUBJECTS, Directory
from commands.messages import Command
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.runner import CommandRunner, Handler, HandlerContext, utc_now
from commands.tenancy import InvalidSettingsError, User
from events.bus import Bus
from events.fold import Fold, Follower
from events.store import EventStore
from events.writes import AggregateRef, ConcurrencyConflict, Write
from schemas.principal import ActorKind
from schemas.tenancy import email_digest
from services.gateway import admin_handlers as h
from services.gateway import admin_people as people
from services.gateway import admin_resources as res

log = logging.getLogger(__name__)

DECIDERS: Mapping[type[Command], h.Decide] = {
    a.CreateDomain: h.create_domain,
    a.ModifyDomain: h.modify_domain,
    a.DeactivateDomain: h.deactivate_domain,
    a.ReactivateDomain: h.reactivate_domain,
    a.CreateProject: h.create_project,
    a.ModifyProject: h.modify_project,
    a.DeactivateProject: h.deactivate_project,
    a.ReactivateProject: h.reactivate_project,
    a.CreateUser: people.create_user,
    a.ModifyUser: people.modify_user,
    a.AddUserToProject: people.add_user_to_project,
    a.RemoveUserFromProject: people.remove_user_from_project,
    a.DeactivateUser: people.deactivate_user,
    a.ReactivateUser: people.reactivate_user,
    a.CreateKeypair: people.create_keypair,
    a.ModifyKeypair: people.modify_keypair,
    a.SetDefaultKeypair: people.set_default_keypair,
    a.DeactivateKeypair: people.deactivate_keypair,
    a.ReactivateKeypair: people.reactivate_keypair,
    a.CreateResourcePolicy: h.create_resource_policy,
    a.ModifyResourcePolicy: h.modify_resource_policy,
    a.CreateResourceGroup: res.create_resource_group,
    a.ModifyResourceGroup: res.modify_resource_group,
    a.AssociateResourceGroup: res.associate_resource_group,
    a.DisassociateResourceGroup: res.disassociate_resource_group,
    a.DeactivateResourceGroup: res.deactivate_resource_group,
    a.ReactivateResourceGroup: res.reactivate_resource_group,
    a.RegisterImage: res.register_image,
    a.ModifyImage: res.modify_image,
    a.ForgetImage: res.forget_image,
}
"""Every admin command and the function that decides it."""

# A refusal that a fresher directory might turn around (a name just created, a role just
# granted): fold up to the log's end once and decide again before saying it.
MAYBE_STALE = frozenset({Code.NOT_FOUND, Code.FORBIDDEN})
SYNC_TIMEOUT_S = 10.0


class TooManyConflictsError(RuntimeError):
    """Deciding kept losing races; the runner retries the command later."""


class AdminModule:
    def __init__(
        self,
        bus: Bus,
        secrets_key: bytes | None = None,
        clock: Callable[[], datetime] = utc_now,
        *,
        durable: str = "admin",
        poll_timeout_s: float = 1.0,
        attempts: int = 5,
    ) -> None:
        self._secrets_key = secrets_key
        self._poll_timeout_s = poll_timeout_s
        self._attempts = attempts
        self._state = Directory()
        self.fold = Fold(bus, self._state, subjects=TENANCY_SUBJECTS)
        self.store = EventStore(bus)
        handlers: dict[type[Command], Handler] = dict.fromkeys(DECIDERS, self.handle)
        self.runner = CommandRunner(
            bus, handlers, durable=durable, aggregate_type=a.ADMIN_AGGREGATES,
            store=self.store, clock=clock,
        )  # fmt: skip
        self._stopping = False
        self._follower = Follower(
            self.fold, self.store, poll_timeout_s=poll_timeout_s, retry_after_s=poll_timeout_s
        )

    @property
    def directory(self) -> Directory:
        return self._state

    def user_by_email(self, email: str) -> User | None:
        """The user with this email (looked up by its keyed digest: the log has no emails)."""
        if self._secrets_key is None:
            raise RuntimeError("the admin module was started without the secrets key")
        return self._state.user_by_digest(email_digest(email, self._secrets_key))

    # ---- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Catch up with the log, then follow it and take commands."""
        target = await self.fold.catch_up(timeout=self._poll_timeout_s)
        d = self._state
        log.info(
            "admin caught up at seq %d: %d domains, %d projects, %d users, %d keypairs",
            target, len(d.domains), len(d.projects), len(d.users), len(d.keypairs),
        )  # fmt: skip
        self._follower.start("admin:follow")
        await self.runner.start()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        await self.runner.stop()
        await self._follower.stop()
        await self.fold.close()

    async def sync(self) -> None:
        """Return once everything stored before this call is folded."""
        await self._follower.sync(SYNC_TIMEOUT_S)

    # ---- deciding ------------------------------------------------------------------------

    async def handle(self, cmd: Command, ctx: HandlerContext) -> Decision:
        decide = DECIDERS[type(cmd)]
        synced = False
        for _ in range(self._attempts):
            decision = self._decide(decide, cmd, ctx.now())
            if isinstance(decision, Rejected):
                if decision.code in MAYBE_STALE and not synced:
                    await self.sync()
                    synced = True
                    continue
                return decision
            writes = self._writes(decision, cmd)
            if not writes:
                return Accepted((), (), decision.message)
            try:
                committed = await ctx.store.commit(writes)
            except ConcurrencyConflict as conflict:
                await self._refresh(list(conflict.stale))
                continue
            self.fold.record_own(writes, committed)
            return Accepted.of(committed, decision.message)
        raise TooManyConflictsError(f"{cmd.command_name()} {cmd.command_id} kept conflicting")

    def _decide(self, decide: h.Decide, cmd: Any, now: datetime) -> h.Decision:
        who = None
        if cmd.actor.kind is not ActorKind.SERVICE:
            who = self._state.principal(cmd.actor)
            if who is None:
                actor = f"{cmd.actor.kind.value} {cmd.actor.id}"
                return Rejected(Code.FORBIDDEN, f"{actor} is unknown or deactivated")
        try:
            return decide(cmd, self._state, who, now)
        except InvalidSettingsError as exc:
            return Rejected(Code.INVALID, str(exc))

    def _writes(self, change: h.Change, cmd: Command) -> list[Write]:
        writes = []
        for aggregate in change.aggregates:
            envelopes = aggregate.collect(cmd.cause())
            if envelopes:
                # The guard is the directory's, read in the same step as the decision: an
                # event folded since fails the write instead of being overwritten.
                guard = self._state.guard(aggregate.ref)
                writes.append(Write(aggregate.ref, guard, tuple(envelopes)))
        return writes

    async def _refresh(self, stale: list[AggregateRef]) -> None:
        """After a conflict: fold what others stored since our guard (the echo is skipped)."""
        for ref in stale:
            history = await self.store.read(ref, after_seq=self._state.guard(ref))
            for event in history.events:
                self._state.apply(event)
