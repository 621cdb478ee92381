"""Folds ``ev.vfolder.*`` into the scheduler's folders (``commands.folders.index.Folders``): what a
create resolves a session's mounts against. Asks for no pass: folders change no placement.
"""

from __future__ import annotations

from events.envelope import StoredEvent
from services.scheduler.state.model import StateModel


def evolve(state: StateModel, event: StoredEvent) -> None:
    state.folders.evolve(event)
