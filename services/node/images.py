"""The agent's images: whether a kernel's image is ready to run, pulls it when the allocation
says where from (``schemas.images.ImageSource``), and reports each pull as facts on
``ev.agent.<node id>`` (``ImagePullStarted``/``Progressed``/``Finished``/``Failed``, through
``AgentRecord``). Keeps the machine's images within an optional disk budget.

One pull per reference however many kernels wait for it (``services.node.pulls``). A kernel
that joins a pull already under way is named by an ``ImagePullStarted`` of its own, so its
session goes PULLING too. A pull that ends wakes a reconcile pass: its kernels start, or fail
to start with the pull's cause in their reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Set
from datetime import datetime

from commands.node.rules import Allocation
from schemas.images import PULL_CAUSE_WORDS, PullCause, PulledLayer, PullPolicy
from services.node.backend import Backend
from services.node.image_budget import ImageInUseError, evict
from services.node.pulls import Credentials, ImagePuller, PullProgress
from services.node.record import (
    AgentRecord,
    Fact,
    FailedToStart,
    ImagesNow,
    PullFailed,
    PullFinished,
    PullProgressed,
    PullStarted,
    Purged,
)
from services.node.settings import AgentSettings

log = logging.getLogger(__name__)

Ready = str | FailedToStart | None
"""The reference to run, the failure to report, or None: wait (a pull is under way)."""


def failure_reason(reference: str, cause: PullCause, reason: str) -> str:
    return f"image pull failed ({cause}: {PULL_CAUSE_WORDS[cause]}): {reference}: {reason}"


class AgentImages:
    def __init__(
        self,
        backend: Backend,
        record: AgentRecord,
        settings: AgentSettings,
        credentials: Credentials,
        *,
        again: Callable[[], None],
        in_use: Callable[[], Set[str]],
        clock: Callable[[], datetime],
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._record = record
        self._budget = settings.image_disk_budget_bytes
        self._in_use = in_use
        self.waiting: dict[str, dict[str, str]] = {}
        """Reference -> the kernels (and their sessions) waiting for its pull."""
        self._announced: dict[str, set[str]] = {}
        """Reference -> the kernels an ``ImagePullStarted`` named."""
        self._pulled_for: set[str] = set()
        """Kernels whose ``always`` pull finished (they run what it fetched)."""
        self._failed: dict[str, str] = {}
        """Kernel -> why its pull failed (reported with its failure to start)."""
        self.puller = ImagePuller(
            backend, self, credentials=credentials, done=again,
            concurrency=settings.pull_concurrency, timeout_s=settings.pull_timeout_s,
            throttle_s=settings.pull_progress_interval_s,
        )  # fmt: skip

    async def ready(self, kernel_id: str, allocation: Allocation) -> Ready:
        source = allocation.source
        if source is None:
            return allocation.image  # the node must hold it: a start without it fails
        reason = self._failed.pop(kernel_id, None)
        if reason is not None:
            return FailedToStart(kernel_id, allocation.session_id, reason)
        ref = source.reference
        if source.policy is PullPolicy.ALWAYS:
            if kernel_id in self._pulled_for:
                return ref
        elif await self._backend.has_image(ref):
            return ref
        self.waiting.setdefault(ref, {})[kernel_id] = allocation.session_id
        state = self.puller.request(ref, source.registry)
        if state.status == "done":  # ended since the last pass, with this kernel waiting
            self._pulled_for.add(kernel_id)
            return ref
        if state.status == "failed":
            cause = state.cause or "other"
            return FailedToStart(
                kernel_id, allocation.session_id, failure_reason(ref, cause, state.reason)
            )
        announced = self._announced.get(ref)
        if announced is not None and kernel_id not in announced:
            # Joins a pull already under way: say so, so its session goes PULLING too.
            announced.add(kernel_id)
            await self._report(PullStarted(ref, {kernel_id: allocation.session_id}))
        return None

    def started(self, kernel_id: str) -> None:
        self._pulled_for.discard(kernel_id)

    def settle(self) -> None:
        """After a pass: a pull that ended has been acted on by every kernel that waited."""
        for ref in list(self.waiting):
            state = self.puller.state(ref)
            if state is not None and state.status != "pulling":
                self.puller.forget(ref)
                self.waiting.pop(ref, None)
                self._announced.pop(ref, None)

    async def interrupted(self, wanted: Set[str]) -> None:
        """At start: pulls the last incarnation began and never ended. Those a kernel here
        still waits for begin again with the first pass (layers on disk are kept); the
        others are failed now, so nothing stays PULLING."""
        agent = self._record.agent
        if agent is None:
            return
        for ref in sorted(set(agent.pulling) - set(wanted)):
            await self._report(
                PullFailed(ref, "other", "interrupted: the agent restarted, no kernel waits for it")
            )

    async def purge(self, requests: list[tuple[int, str]]) -> None:
        """Answer operators' purge requests newer than the last answered (on the log): remove
        each image unless a kernel here uses it or waits for its pull."""
        agent = self._record.agent
        answered = agent.purged_seq if agent is not None else 0
        if not requests or requests[-1][0] <= answered:
            return  # the usual pass: nothing new asked (requests are in log order)
        fresh = [(seq, ref) for seq, ref in requests if seq > answered]
        in_use = self._in_use()
        for seq, ref in fresh:
            freed, refused = 0, ""
            if ref in in_use or ref in self.waiting:
                refused = "a kernel on this node uses it"
            else:
                try:
                    freed = await self._backend.remove_image(ref)
                except ImageInUseError as exc:
                    refused = str(exc)
            await self._report(Purged(ref, seq, freed, refused))
        await self._report(ImagesNow(tuple(await self._backend.images())))

    async def close(self) -> None:
        await self.puller.close()

    # ---- the puller's listener: facts on the log --------------------------------------------

    async def pull_started(self, ref: str) -> None:
        kernels = dict(self.waiting.get(ref, {}))
        self._announced[ref] = set(kernels)
        await self._report(PullStarted(ref, kernels))

    async def pull_progressed(self, ref: str, progress: PullProgress) -> None:
        layers = tuple(
            PulledLayer(layer=x.layer, done_bytes=x.done_bytes, total_bytes=x.total_bytes)
            for x in progress.layers
        )
        await self._report(PullProgressed(ref, progress.done_bytes, progress.total_bytes, layers))

    async def pull_finished(self, ref: str, digest: str) -> None:
        self._pulled_for.update(self.waiting.get(ref, {}))
        await self._report(PullFinished(ref, digest))
        await self._keep_to_budget()
        await self._report(ImagesNow(tuple(await self._backend.images())))

    async def pull_failed(self, ref: str, cause: PullCause, reason: str) -> None:
        for kernel_id in self.waiting.get(ref, {}):
            self._failed[kernel_id] = failure_reason(ref, cause, reason)
        await self._report(PullFailed(ref, cause, reason))

    async def _report(self, fact: Fact) -> None:
        await self._record.report([fact], self._clock())

    async def _keep_to_budget(self) -> None:
        if self._budget is None:
            return
        images = await self._backend.local_images()
        keep = set(self._in_use()) | set(self.waiting)
        for ref in evict(images, keep, self._budget):
            try:
                freed = await self._backend.remove_image(ref)
            except ImageInUseError:
                continue  # a kernel started from it meanwhile
            log.info("image %s removed to keep within the disk budget (%d bytes freed)", ref, freed)
