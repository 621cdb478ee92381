"""Which folders live sessions mount, folded from ``ev.session.*``: a session's mounts come
with ``SessionRequested`` (resolved at creation, kept across requeues) and stop counting when
it reaches a terminal status (terminated, cancelled, failed). Pure: no I/O, no clock."""

from __future__ import annotations

from typing import Any

from events.envelope import StoredEvent
from schemas.vfolder import Mount

ENDED = frozenset({"SessionTerminated", "SessionCancelled", "SessionFailed"})
"""The events that put a session in a terminal status."""


class Mounts:
    def __init__(self) -> None:
        self.by_session: dict[str, tuple[Mount, ...]] = {}
        self.by_folder: dict[str, dict[str, None]] = {}
        """Folder id -> the live sessions that mount it (an ordered set)."""

    def evolve(self, event: StoredEvent) -> tuple[Mount, ...]:
        """Fold one session event; the mounts of a session it ended (else nothing)."""
        envelope = event.envelope
        if envelope.name == "SessionRequested":
            self._add(envelope.aggregate_id, _mounts_of(envelope.payload))
        elif envelope.name in ENDED:
            return self.drop(envelope.aggregate_id)
        return ()

    def drop(self, session_id: str) -> tuple[Mount, ...]:
        mounts = self.by_session.pop(session_id, ())
        for mount in mounts:
            sessions = self.by_folder.get(mount.folder_id, {})
            sessions.pop(session_id, None)
            if not sessions:
                self.by_folder.pop(mount.folder_id, None)
        return mounts

    def mounted(self, folder_id: str) -> bool:
        return bool(self.by_folder.get(folder_id))

    def sessions_of(self, folder_id: str) -> list[str]:
        return list(self.by_folder.get(folder_id, {}))

    def _add(self, session_id: str, mounts: tuple[Mount, ...]) -> None:
        self.drop(session_id)  # a SessionRequested read twice (a rebuilt aggregate)
        if not mounts:
            return
        self.by_session[session_id] = mounts
        for mount in mounts:
            self.by_folder.setdefault(mount.folder_id, {})[session_id] = None


def _mounts_of(payload: dict[str, Any]) -> tuple[Mount, ...]:
    """The payload's ``mounts`` (absent in sessions requested before folders existed)."""
    return tuple(Mount.model_validate(m) for m in payload.get("mounts") or ())
