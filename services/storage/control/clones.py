"""Clones in the background: a folder made as a clone (CLONING) gets its source's bytes
copied by a thread, then ``VFolderCloned`` (what was copied) or ``VFolderCloneFailed``
(reason). A clone interrupted by a stop or a crash is copied again from scratch at the next
start (the folder is still CLONING in the log)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Mapping

from anyio import to_thread

from services.storage.control import disk
from services.storage.control.recording import Recorder
from services.storage.control.state import StorageState
from services.storage.volumes import FolderNotFound, Volume

log = logging.getLogger(__name__)


class Cloner:
    def __init__(
        self, state: StorageState, volumes: Mapping[str, Volume], recorder: Recorder
    ) -> None:
        self.state, self.volumes, self.recorder = state, volumes, recorder
        self.running: dict[str, asyncio.Task[None]] = {}
        self._stop = threading.Event()

    def ensure(self, folder_id: str) -> None:
        """Start copying ``folder_id`` unless that is under way."""
        if folder_id not in self.running and not self._stop.is_set():
            task = asyncio.create_task(self._clone(folder_id), name=f"storage-clone:{folder_id}")
            self.running[folder_id] = task
            task.add_done_callback(lambda _: self.running.pop(folder_id, None))

    async def stop(self) -> None:
        self._stop.set()
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _clone(self, folder_id: str) -> None:
        folder = self.state.folders.get(folder_id)
        if folder is None or folder.cloned_from is None:
            return
        source = self.state.folders.get(folder.cloned_from)
        target_volume = self.volumes.get(folder.volume)
        if target_volume is None:
            log.warning("storage: folder %s is on volume %s, not here", folder_id, folder.volume)
            return
        source_volume = None if source is None else self.volumes.get(source.volume)
        if source is None or source_volume is None:
            await self._failed(folder_id, f"the source folder {folder.cloned_from} is not here")
            return
        log.info("storage: cloning folder %s into %s", source.id, folder_id)
        try:
            copied = await to_thread.run_sync(
                disk.clone, source_volume, source.id, target_volume, folder_id, self._stop,
                abandon_on_cancel=True,
            )  # fmt: skip
        except disk.CopyStopped:
            return
        except (OSError, FolderNotFound) as exc:
            log.warning("storage: cloning into %s failed: %s", folder_id, exc)
            await self._failed(folder_id, f"copying failed: {exc}")
            return
        await self.recorder.record(
            folder_id,
            lambda f, now: f.cloned(
                copied.bytes, copied.files, now, links=copied.links, others=copied.others
            ),
        )
        log.info(
            "storage: folder %s cloned (%d bytes, %d files, %d symlinks)",
            folder_id, copied.bytes, copied.files, copied.links,
        )  # fmt: skip

    async def _failed(self, folder_id: str, reason: str) -> None:
        await self.recorder.record(folder_id, lambda f, now: f.clone_failed(reason, now))
