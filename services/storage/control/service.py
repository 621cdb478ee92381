"""The storage service's control part: the one writer of ``ev.vfolder.*``.

Folds the tenancy directory, the folders and the sessions' mounts (``state``), answers
``cmd.vfolder.*`` (one durable consumer) with the pure rules of ``rules``, each decision
stored through the unit of work (a refusal a fresher fold might turn around is decided once
more after folding to the log's end; a trash or purge, which only an unseen mount could
refuse, is decided after it), and keeps the disk as the log says: folders made with
their quota, purged ones removed, clones copied (``clones``), usage measured after the data
plane or a read-write session changed a folder (``usage``). Writes ``ev.vfolder.*`` and
``out.<command id>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime

from anyio import to_thread

from commands.folders.aggregate import VFolder
from commands.folders.messages import CreateVFolder, PurgeVFolder, TrashVFolder
from commands.messages import Command
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.runner import CommandRunner, Handler, HandlerContext, utc_now
from commands.unit_of_work import Changes, UnitOfWork, answer
from events.bus import Bus
from events.fold import Fold
from events.follower import Follower
from events.store import EventStore
from schemas.subjects import AggregateType
from schemas.vfolder import FolderStatus
from services.storage.access import OwnerRoom, PlaneHooks
from services.storage.control import disk
from services.storage.control.clones import Cloner
from services.storage.control.landed import Landed
from services.storage.control.recording import Recorder
from services.storage.control.room import owner_room
from services.storage.control.rules import DECIDERS, World, decide
from services.storage.control.state import SUBJECTS, StorageState
from services.storage.control.usage import UsageMeter
from services.storage.settings import StorageSettings
from services.storage.volumes import FolderNotFound, Volume, open_volumes

log = logging.getLogger(__name__)

MAYBE_STALE = frozenset({Code.NOT_FOUND, Code.FORBIDDEN})
FOLD_FIRST: frozenset[type[Command]] = frozenset({TrashVFolder, PurgeVFolder})
"""Commands accepted only while nothing mounts the folder: a fold behind the log may not yet
know of a session that does, and would accept them wrongly, so they are decided after folding
to the log's end (a session requested just before the command is seen)."""
SYNC_TIMEOUT_S = 10.0


class StorageService:
    def __init__(
        self,
        bus: Bus,
        settings: StorageSettings,
        clock: Callable[[], datetime] = utc_now,
        volumes: Mapping[str, Volume] | None = None,
    ) -> None:
        self.settings = settings
        self.volumes = dict(open_volumes(settings) if volumes is None else volumes)
        self.state = state = StorageState()
        self.fold = Fold(bus, state, subjects=SUBJECTS, consumer="storage")
        self.store = EventStore(bus)
        self.work = UnitOfWork(
            self.store, state, lambda: Changes(state), attempts=settings.attempts
        )
        self.recorder = Recorder(self.work, state, clock)
        self.cloner = Cloner(state, self.volumes, self.recorder)
        self.landed = Landed()
        self.meter = UsageMeter(self._measure_and_settle, settings.usage_interval_s)
        handlers: dict[type[Command], Handler] = dict.fromkeys(DECIDERS, self.handle)
        self.runner = CommandRunner(
            bus, handlers, durable=settings.durable, aggregate_type=AggregateType.VFOLDER,
            store=self.store, clock=clock, fetch_timeout=settings.command_fetch_timeout_s,
        )  # fmt: skip
        self._follower = Follower(
            self.fold, self.store,
            poll_timeout_s=settings.poll_timeout_s, retry_after_s=settings.poll_timeout_s,
        )  # fmt: skip
        self._changed = asyncio.Event()
        state.wake = self._changed.set
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = False
        self._missing_volumes: set[str] = set()

    # ---- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Catch up with the log, bring the disk in line with it, then follow the log and
        take commands. A start that fails half-way stops what it started."""
        try:
            target = await self.fold.catch_up(timeout=self.settings.poll_timeout_s)
            log.info(
                "storage caught up at seq %d: %d folders, %d sessions mounting folders",
                target, len(self.state.folders.by_id), len(self.state.mounts.by_session),
            )  # fmt: skip
            await self.apply_changes()  # every folder folded so far: made, removed, cloned
            self._tasks = [
                asyncio.create_task(self._keep_disk(), name="storage:disk"),
                asyncio.create_task(self.meter.run(), name="storage:usage"),
            ]
            self._follower.start("storage:follow")
            await self.runner.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self.runner.stop()
        await self._follower.stop()
        await self.cloner.stop()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.fold.close()

    async def sync(self) -> None:
        """Return once everything stored before this call is folded."""
        await self._follower.sync(SYNC_TIMEOUT_S)

    def hooks(self) -> PlaneHooks:
        """What the data plane in this process asks and tells this part."""
        return PlaneHooks(
            owner_room=self.owner_room, changed=self.folder_changed, landed=self.folder_landed
        )

    # ---- deciding ------------------------------------------------------------------------

    def world(self) -> World:
        return World(
            self.state.folders, self.state.directory, self.volumes.keys(),
            self.settings.default_volume or "", self.state.mounts.mounted,
        )  # fmt: skip

    async def handle(self, cmd: Command, ctx: HandlerContext) -> Decision:
        if type(cmd) in FOLD_FIRST:
            await self.sync()
        decision = await self._decide(cmd, ctx)
        if isinstance(decision, Rejected) and decision.code in MAYBE_STALE:
            await self.sync()
            decision = await self._decide(cmd, ctx)
        if isinstance(cmd, CreateVFolder) and not isinstance(decision, Rejected):
            await self._made(cmd.folder_id)
        return decision

    async def _made(self, folder_id: str) -> None:
        """Make a new folder on disk before its create is answered, so a client that uploads
        right after finds it (the background pass does it again, harmlessly)."""
        folder = self.state.folders.get(folder_id)
        if folder is not None and self._here(folder.volume, folder.id):
            await to_thread.run_sync(_materialise_all, [(self.volumes[folder.volume], folder)])

    async def _decide(self, cmd: Command, ctx: HandlerContext) -> Decision:
        def decided(changes: Changes) -> Decision:
            made = decide(cmd, self.world(), ctx.now())
            if isinstance(made, Rejected):
                return made
            changes.unit(cmd.cause(), made.folder)
            return Accepted((), (), made.message)

        what = f"{cmd.command_name()} {cmd.command_id}"
        return answer(*await self.work.run(decided, what=what))

    # ---- the disk ------------------------------------------------------------------------

    async def _keep_disk(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            await self.apply_changes()

    async def apply_changes(self) -> None:
        """Make the disk match the folders that changed since the last call, start the
        clones they need, and measure the folders read-write sessions have left."""
        changed, self.state.changed = list(self.state.changed), {}
        measure, self.state.to_measure = list(self.state.to_measure), {}
        folders = [f for f in map(self.state.folders.get, changed) if f is not None]
        here = [(self.volumes[f.volume], f) for f in folders if self._here(f.volume, f.id)]
        if here:
            await to_thread.run_sync(_materialise_all, here)
        for _, folder in here:
            if folder.cloned_from is not None and folder.status is FolderStatus.CLONING:
                self.cloner.ensure(folder.id)
        for folder_id in measure:
            self.meter.touch(folder_id, recount=True)

    def _here(self, volume: str, folder_id: str) -> bool:
        if volume in self.volumes:
            return True
        if volume not in self._missing_volumes:
            self._missing_volumes.add(volume)
            log.warning(
                "storage: folder %s is on volume %s, which this service does not have: "
                "skipped (and every other folder there)", folder_id, volume,
            )  # fmt: skip
        return False

    # ---- usage ---------------------------------------------------------------------------

    def folder_changed(self, volume: str, folder_id: str) -> None:
        self.meter.touch(folder_id)

    def owner_room(self, folder_id: str) -> OwnerRoom | None:
        return owner_room(self.state, folder_id, self.landed)

    def folder_landed(self, folder_id: str, added: int) -> None:
        self.landed.add(folder_id, added, time.monotonic())

    async def _measure_and_settle(self, folder_id: str, recount: bool) -> None:
        """Measure, and once the measurement is folded, stop counting what landed before it
        apart (the folded usage holds it now)."""
        started = time.monotonic()
        await self.measure(folder_id, recount)
        await self.sync()
        self.landed.settle(folder_id, started)

    async def measure(self, folder_id: str, recount: bool) -> None:
        folder = self.state.folders.get(folder_id)
        if folder is None or folder.status in (FolderStatus.PURGED, FolderStatus.CLONING):
            return
        volume = self.volumes.get(folder.volume)
        if volume is None:
            return
        try:
            used = await to_thread.run_sync(volume.recount if recount else volume.usage, folder_id)
        except FolderNotFound:
            return
        await self.recorder.record(
            folder_id,
            lambda f, now: f.measured(
                used.bytes, used.files, now, links=used.links, others=used.others
            ),
        )


def _materialise_all(folders: list[tuple[Volume, VFolder]]) -> None:
    for volume, folder in folders:
        try:
            disk.materialise(volume, folder)
        except OSError:
            log.exception("storage: folder %s could not be made on disk as the log says", folder.id)
