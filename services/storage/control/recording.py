"""The storage service's own writes about a folder (not answers to commands): a clone
finished or failed, usage measured. Each is decided on a working copy of the folder as
folded and stored through the unit of work; a change that is already true writes nothing.
Writes ``ev.vfolder.<id>``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from commands.dispatch import utc_now
from commands.folders.aggregate import VFolder
from commands.unit_of_work import Changes, UnitOfWork, working_copy
from events.envelope import Cause
from schemas.ids import new_id
from schemas.principal import Actor, Tenant
from schemas.vfolder import OwnerKind
from services.storage.control.state import StorageState

STORAGE = Actor.service("storage")


def tenant_of(folder: VFolder) -> Tenant:
    project = folder.owner_id if folder.owner_kind is OwnerKind.PROJECT else None
    return Tenant(domain=folder.domain, project=project)


class Recorder:
    def __init__(
        self,
        work: UnitOfWork[Changes],
        state: StorageState,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.work, self.state, self.clock = work, state, clock

    async def record(self, folder_id: str, act: Callable[[VFolder, datetime], bool]) -> bool:
        """Apply ``act`` to the folder and store what it changed; whether anything was."""
        cause_id = new_id()  # the same on every attempt: a retried write keeps its event ids

        def decide(changes: Changes) -> bool:
            folder = self.state.folders.get(folder_id)
            if folder is None:
                return False
            copy = working_copy(folder)
            if not act(copy, self.clock()):
                return False
            cause = Cause(
                causation_id=cause_id, correlation_id=cause_id, actor=STORAGE,
                tenant=tenant_of(folder),
            )  # fmt: skip
            changes.unit(cause, copy)
            return True

        changed, _ = await self.work.run(decide, what=f"folder {folder_id}")
        return changed
