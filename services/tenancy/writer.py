"""The tenancy writer: decides one tenancy command and stores the decision.

Who asks (from the folded ``Directory``), the pure decider ``routes.DECIDERS`` names, and one
guarded commit through the unit of work, decided again on the refreshed directory after a
conflict. Writes the tenancy event subjects through any ``Store`` (JetStream in the service,
in memory in tests).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from commands.directory import Directory
from commands.messages import Command
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.tenancy import InvalidSettingsError
from commands.unit_of_work import Changes, UnitOfWork, answer
from events.writes import Store
from schemas.principal import ActorKind
from services.tenancy import common
from services.tenancy.routes import DECIDERS


class TenancyDecider:
    """Decides tenancy commands on ``directory``, which it keeps folded with what it stores
    (from the acks) and what it reads back after a conflict."""

    def __init__(self, store: Store, directory: Directory, *, attempts: int = 5) -> None:
        self.directory = directory
        self.work = UnitOfWork(store, directory, lambda: Changes(directory), attempts=attempts)

    async def decide(self, cmd: Command, clock: Callable[[], datetime]) -> Decision:
        """Decide ``cmd`` and store what it changed; ``clock`` is read once per attempt."""

        def decide(changes: Changes) -> Decision:
            decided = self.rule(cmd, clock())
            if isinstance(decided, Rejected):
                return decided
            changes.unit(cmd.cause(), *decided.aggregates)
            return Accepted((), (), decided.message)

        what = f"{cmd.command_name()} {cmd.command_id}"
        return answer(*await self.work.run(decide, what=what))

    def rule(self, cmd: Any, now: datetime) -> common.Decision:
        """The pure decision on the directory as folded now (nothing stored)."""
        who = None
        if cmd.actor.kind is not ActorKind.SERVICE:
            who = self.directory.principal(cmd.actor)
            if who is None:
                actor = f"{cmd.actor.kind.value} {cmd.actor.id}"
                return Rejected(Code.FORBIDDEN, f"{actor} is unknown or deactivated")
        try:
            return DECIDERS[type(cmd)](cmd, self.directory, who, now)
        except InvalidSettingsError as exc:
            return Rejected(Code.INVALID, str(exc))
