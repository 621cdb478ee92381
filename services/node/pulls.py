"""The agent's image pulls (``ImagePuller``): one pull per image reference however many kernels
wait for it, at most ``concurrency`` at once, each bounded in time, its progress told to a
listener at most once per ``throttle_s``. Pure asyncio, no subjects: the listener (the agent's
record) writes them.

How a pull goes:

- ``request`` starts a pull for a reference that has no state, and answers the state it has
  otherwise (a second request while pulling joins the first; a finished or failed state stays
  until ``forget``, so the agent acts on an outcome once and a failed image is not retried in a
  loop).
- A requested pull waits for a free slot (its state says "pulling" with no progress meanwhile);
  the listener hears ``pull_started`` only when it really starts, and the time limit runs from
  then, so a queue of big images does not time out the last one.
- The registry's credentials are fetched when it starts (never kept: a changed password counts
  at the next pull). Registry id "" means anonymous. A credentials fetch that fails is cause
  "other" with a reason naming the credentials (the registry never saw the pull, so
  "authentication" would blame the password wrongly); a fetch that raises ``PullFailedError``
  keeps its own cause ("authentication" for an unknown registry, say).
- Progress: the first is told at once, later ones at most once per ``throttle_s`` (the latest
  wins), and a success always ends with one at 100% before ``pull_finished``.
- A pull's state turns "done"/"failed" only after the listener is told, then ``done()`` runs
  (the agent's next reconcile pass then sees the outcome and its report on the log).
- A listener that raises is logged, never fatal. ``close`` cancels pulls in flight, and a
  cancelled pull tells the listener nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from schemas.images import PullCause

log = logging.getLogger(__name__)

PullStatus = Literal["pulling", "done", "failed"]


@dataclass(frozen=True, slots=True)
class RegistryAuth:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class LayerProgress:
    layer: str
    done_bytes: int
    total_bytes: int
    """0 while its size is unknown (not yet downloading, or already on the machine)."""


@dataclass(frozen=True, slots=True)
class PullProgress:
    done_bytes: int
    total_bytes: int
    """The sizes known so far: it grows as layers start downloading."""
    layers: tuple[LayerProgress, ...] = ()

    def complete(self) -> PullProgress:
        """The same layers, all downloaded."""
        layers = tuple(dataclasses.replace(x, done_bytes=x.total_bytes) for x in self.layers)
        return PullProgress(self.total_bytes, self.total_bytes, layers)


class PullFailedError(Exception):
    """A pull that cannot succeed as asked; the message says what was wrong (never a password)."""

    def __init__(self, cause: PullCause, message: str) -> None:
        super().__init__(message)
        self.cause: PullCause = cause


def scrub(text: str, auth: RegistryAuth | None) -> str:
    """``text`` without the password in it (engines do not echo it; this makes sure)."""
    return text.replace(auth.password, "***") if auth is not None and auth.password else text


ProgressCallback = Callable[[PullProgress], None]


class Pulling(Protocol):
    async def pull(self, ref: str, auth: RegistryAuth | None, progress: ProgressCallback) -> str:
        """Pull ``ref`` (calling ``progress`` on the loop as bytes arrive) and return its digest;
        raises ``PullFailedError`` with the cause when the registry or machine refuses."""
        ...


class PullListener(Protocol):
    async def pull_started(self, ref: str) -> None: ...
    async def pull_progressed(self, ref: str, progress: PullProgress) -> None: ...
    async def pull_finished(self, ref: str, digest: str) -> None: ...
    async def pull_failed(self, ref: str, cause: PullCause, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class PullState:
    status: PullStatus
    cause: PullCause | None = None
    reason: str = ""
    digest: str = ""
    progress: PullProgress | None = None


Credentials = Callable[[str], Awaitable[RegistryAuth | None]]


class _Reporter:
    """One pull's progress towards the listener: sends the latest, then rests ``throttle_s``."""

    def __init__(self) -> None:
        self.latest: PullProgress | None = None
        self.changed = asyncio.Event()
        self.ended = asyncio.Event()

    def update(self, progress: PullProgress) -> None:
        self.latest = progress
        self.changed.set()

    def end(self) -> None:
        self.ended.set()
        self.changed.set()

    async def run(self, send: Callable[[PullProgress], Awaitable[None]], throttle_s: float) -> None:
        while True:
            await self.changed.wait()
            self.changed.clear()
            if self.ended.is_set() or self.latest is None:
                return
            await send(self.latest)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ended.wait(), throttle_s)


class ImagePuller:
    def __init__(
        self,
        backend: Pulling,
        listener: PullListener,
        *,
        credentials: Credentials,
        done: Callable[[], None],
        concurrency: int = 2,
        timeout_s: float = 3600.0,
        throttle_s: float = 1.0,
    ) -> None:
        self._backend = backend
        self._listener = listener
        self._credentials = credentials
        self._done = done
        self._slots = asyncio.Semaphore(concurrency)
        self._timeout_s = timeout_s
        self._throttle_s = throttle_s
        self._states: dict[str, PullState] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    def request(self, ref: str, registry_id: str) -> PullState:
        """The state of ``ref``'s pull, started now if it has none (see the module's notes)."""
        if self._closed:
            raise RuntimeError("the image puller is closed")
        state = self._states.get(ref)
        if state is None:
            state = self._states[ref] = PullState("pulling")
            task = asyncio.create_task(self._pull(ref, registry_id), name=f"pull {ref}")
            self._tasks[ref] = task
            task.add_done_callback(functools.partial(self._ended, ref))
        return state

    def _ended(self, ref: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(ref) is task:  # not a newer pull of the same image
            del self._tasks[ref]

    def state(self, ref: str) -> PullState | None:
        return self._states.get(ref)

    def forget(self, ref: str) -> None:
        """Drop a finished or failed state (the next ``request`` pulls again); a pull still
        running is kept."""
        state = self._states.get(ref)
        if state is not None and state.status != "pulling":
            del self._states[ref]

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _pull(self, ref: str, registry_id: str) -> None:
        async with self._slots:
            await self._tell("pull_started", self._listener.pull_started(ref))
            reporter = _Reporter()
            reporting = asyncio.create_task(reporter.run(self._progressed(ref), self._throttle_s))
            try:
                outcome = await self._fetch(ref, registry_id, reporter)
                reporter.end()
                await reporting  # its last send is told before the final one
            finally:
                reporting.cancel()
        if isinstance(outcome, str):
            final = (reporter.latest or PullProgress(0, 0)).complete()
            await self._tell("pull_progressed", self._listener.pull_progressed(ref, final))
            await self._tell("pull_finished", self._listener.pull_finished(ref, outcome))
            self._states[ref] = PullState("done", digest=outcome, progress=final)
        else:
            cause, reason = outcome
            log.warning("pull of %s failed (%s): %s", ref, cause, reason)
            await self._tell("pull_failed", self._listener.pull_failed(ref, cause, reason))
            self._states[ref] = PullState("failed", cause, reason, progress=reporter.latest)
        try:
            self._done()
        except Exception:
            log.exception("the puller's done callback failed")

    async def _fetch(
        self, ref: str, registry_id: str, reporter: _Reporter
    ) -> str | tuple[PullCause, str]:
        """The digest pulled, or why not: (cause, reason)."""

        def progressed(progress: PullProgress) -> None:
            reporter.update(progress)
            self._states[ref] = PullState("pulling", progress=progress)

        auth: RegistryAuth | None = None
        deadline = asyncio.timeout(self._timeout_s)
        try:
            async with deadline:
                if registry_id:
                    try:
                        auth = await self._credentials(registry_id)
                    except PullFailedError:
                        raise
                    except Exception as exc:
                        log.exception("credentials of registry %s", registry_id)
                        why = f"the credentials of registry {registry_id!r} could not be fetched"
                        return "other", f"{why}: {exc}"
                return await self._backend.pull(ref, auth, progressed)
        except PullFailedError as exc:
            return exc.cause, scrub(str(exc), auth)
        except TimeoutError as exc:
            if deadline.expired():
                return "timeout", f"the pull took longer than {self._timeout_s:g} s"
            return "timeout", scrub(f"the pull timed out: {exc}", auth)
        except Exception as exc:
            log.exception("pull of %s", ref)
            return "other", scrub(f"the pull failed: {exc!r}", auth)

    def _progressed(self, ref: str) -> Callable[[PullProgress], Awaitable[None]]:
        async def send(progress: PullProgress) -> None:
            await self._tell("pull_progressed", self._listener.pull_progressed(ref, progress))

        return send

    async def _tell(self, what: str, call: Awaitable[None]) -> None:
        try:
            await call
        except Exception:
            log.exception("the pull listener's %s failed", what)
