"""The gateway's read-only copy of the tenancy directory, for authentication and
authorisation: a fold of ``ev.domain.*``, ``ev.project.*``, ``ev.user.*``, ``ev.keypair.*``,
``ev.resource_policy.*``, ``ev.resource_group.*`` and ``ev.image.*`` kept current by a
follower. Reads only; the tenancy service is the writer.
"""

from __future__ import annotations

import logging

from commands.directory import TENANCY_SUBJECTS, Directory
from events.bus import Bus
from events.fold import Fold, Follower
from events.store import EventStore

log = logging.getLogger(__name__)


class DirectoryFeed:
    def __init__(self, bus: Bus, *, poll_timeout_s: float = 1.0) -> None:
        self.directory = Directory()
        self.fold = Fold(
            bus, self.directory, subjects=TENANCY_SUBJECTS, consumer="gateway-directory"
        )
        self._poll_timeout_s = poll_timeout_s
        self._follower = Follower(
            self.fold, EventStore(bus), poll_timeout_s=poll_timeout_s, retry_after_s=1.0
        )

    async def start(self) -> None:
        """Catch up with the log as it is now, then follow it."""
        target = await self.fold.catch_up(timeout=self._poll_timeout_s)
        d = self.directory
        log.info(
            "directory caught up at seq %d: %d domains, %d users, %d keypairs",
            target, len(d.domains), len(d.users), len(d.keypairs),
        )  # fmt: skip
        self._follower.start("gateway:directory")

    async def stop(self) -> None:
        await self._follower.stop()
        await self.fold.close()
