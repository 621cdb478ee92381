"""``ImagePuller`` (``services/node/pulls.py``) with fake registries: one pull per image however
many ask, at most ``concurrency`` at once, a time limit, throttled progress ending at 100%,
causes passed on, credentials fetched per pull and never shown, a listener that fails or a
close that cancels leaving the puller sound."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from schemas.images import PullCause
from services.node.pulls import (
    ImagePuller,
    ProgressCallback,
    PullFailedError,
    PullProgress,
    PullState,
    RegistryAuth,
)
from services.node.simulated_pull import simulated_digest, simulated_pull

AUTH = RegistryAuth("robot", "s3cret-pass")


@dataclass
class Listener:
    calls: list[tuple[str, str, object]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    broken: bool = False

    def _note(self, what: str, ref: str, detail: object) -> None:
        self.calls.append((what, ref, detail))
        self.times.append(asyncio.get_running_loop().time())
        if self.broken:
            raise RuntimeError(f"listener broke on {what}")

    async def pull_started(self, ref: str) -> None:
        self._note("started", ref, None)

    async def pull_progressed(self, ref: str, progress: PullProgress) -> None:
        self._note("progressed", ref, progress)

    async def pull_finished(self, ref: str, digest: str) -> None:
        self._note("finished", ref, digest)

    async def pull_failed(self, ref: str, cause: PullCause, reason: str) -> None:
        self._note("failed", ref, (cause, reason))

    def of(self, what: str, ref: str | None = None) -> list[object]:
        return [d for w, r, d in self.calls if w == what and ref in (None, r)]


@dataclass
class Registry:
    """A fake ``Pulling``: simulated pulls, or pulls held until ``release``d."""

    seconds: float = 0.05
    total_bytes: int = 1000
    fail: dict[str, PullCause] = field(default_factory=dict)
    hold: bool = False
    pulls: list[tuple[str, RegistryAuth | None]] = field(default_factory=list)
    running: int = 0
    most_running: int = 0
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    error: Exception | None = None
    quiet: bool = False

    async def pull(self, ref: str, auth: RegistryAuth | None, progress: ProgressCallback) -> str:
        self.pulls.append((ref, auth))
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.hold:
                await self.gates.setdefault(ref, asyncio.Event()).wait()
            if self.error is not None:
                raise self.error
            if self.quiet:
                return simulated_digest(ref)
            return await simulated_pull(
                ref,
                auth,
                progress,
                total_bytes=self.total_bytes,
                seconds=self.seconds,
                fail=self.fail,
            )
        finally:
            self.running -= 1

    def release(self, ref: str) -> None:
        self.gates.setdefault(ref, asyncio.Event()).set()


@dataclass
class Setup:
    registry: Registry
    listener: Listener
    puller: ImagePuller
    fetched: list[str]
    ended: list[int]

    async def settled(self, ref: str) -> PullState:
        for _ in range(1000):
            state = self.puller.state(ref)
            if state is not None and state.status != "pulling":
                return state
            await asyncio.sleep(0.01)
        raise AssertionError(f"the pull of {ref} never ended")


def make(
    registry: Registry | None = None,
    listener: Listener | None = None,
    *,
    credentials: Callable[[str], RegistryAuth | None] = lambda _: AUTH,
    **options: float,
) -> Setup:
    registry, listener = registry or Registry(), listener or Listener()
    fetched: list[str] = []
    ended: list[int] = []

    async def fetch(registry_id: str) -> RegistryAuth | None:
        fetched.append(registry_id)
        return credentials(registry_id)

    options = {"throttle_s": 0.01, **options}
    puller = ImagePuller(
        registry,
        listener,
        credentials=fetch,
        done=lambda: ended.append(1),
        concurrency=int(options.pop("concurrency", 2)),
        **options,
    )
    return Setup(registry, listener, puller, fetched, ended)


async def test_one_pull_per_image_however_many_ask() -> None:
    s = make()
    first = s.puller.request("reg/a:1", "r1")
    again = [s.puller.request("reg/a:1", "r1") for _ in range(5)]
    assert first.status == "pulling" and all(a.status == "pulling" for a in again)
    state = await s.settled("reg/a:1")
    assert state == PullState("done", digest=simulated_digest("reg/a:1"), progress=state.progress)
    assert [ref for ref, _ in s.registry.pulls] == ["reg/a:1"]
    assert s.listener.of("started") == [None]
    assert s.listener.of("finished") == [simulated_digest("reg/a:1")]
    assert s.ended == [1]
    # Done stays done (the agent acts on it once); a request after ``forget`` pulls again.
    assert s.puller.request("reg/a:1", "r1").status == "done"
    s.puller.forget("reg/a:1")
    assert s.puller.request("reg/a:1", "r1").status == "pulling"
    await s.settled("reg/a:1")
    assert len(s.registry.pulls) == 2
    await s.puller.close()


async def test_at_most_concurrency_pulls_at_once_the_rest_start_later() -> None:
    s = make(Registry(hold=True), concurrency=2)
    refs = [f"reg/c{i}:1" for i in range(4)]
    for ref in refs:
        s.puller.request(ref, "")
    await asyncio.sleep(0.05)
    assert s.registry.running == 2
    assert s.listener.of("started") == [None, None]  # queued ones have not started
    assert all(s.puller.state(r) == PullState("pulling") for r in refs[2:])
    for ref in refs:
        s.registry.release(ref)
    for ref in refs:
        assert (await s.settled(ref)).status == "done"
    assert s.registry.most_running == 2
    assert len(s.listener.of("started")) == 4
    await s.puller.close()


async def test_a_pull_over_its_time_limit_fails_with_timeout() -> None:
    s = make(Registry(hold=True), timeout_s=0.1)
    s.puller.request("reg/slow:1", "r1")
    state = await s.settled("reg/slow:1")
    assert (state.status, state.cause) == ("failed", "timeout")
    assert "longer than 0.1 s" in state.reason
    assert s.listener.of("failed") == [("timeout", state.reason)]
    assert s.listener.of("finished") == []
    assert s.ended == [1]
    await s.puller.close()


async def test_progress_is_throttled_and_ends_at_one_hundred_percent() -> None:
    # 10 updates over 0.3 s, told at most every 0.1 s (the gaps between them; a loaded machine
    # may stretch the pull, so not their number): the first at once, the last at 100% right
    # before "finished".
    s = make(Registry(seconds=0.3, total_bytes=4096), throttle_s=0.1)
    s.puller.request("reg/big:1", "")
    state = await s.settled("reg/big:1")
    told = s.listener.of("progressed")
    assert len(told) >= 2
    final = PullProgress(4096, 4096, state.progress.layers if state.progress else ())
    assert told[-1] == final == state.progress
    assert [w for w, _, _ in s.listener.calls][-2:] == ["progressed", "finished"]
    stamped = zip(s.listener.calls, s.listener.times, strict=True)
    progressed = [t for (what, _, _), t in stamped if what == "progressed"][:-1]
    gaps = [b - a for a, b in itertools.pairwise(progressed)]
    assert all(gap >= 0.09 for gap in gaps), gaps
    done = [p.done_bytes for p in told if isinstance(p, PullProgress)]
    assert done == sorted(done)
    await s.puller.close()


async def test_a_pull_without_progress_still_ends_with_a_final_one() -> None:
    s = make(Registry(quiet=True))  # everything was on the machine already
    s.puller.request("reg/here:1", "")
    state = await s.settled("reg/here:1")
    assert s.listener.of("progressed") == [PullProgress(0, 0)] == [state.progress]
    assert [w for w, _, _ in s.listener.calls] == ["started", "progressed", "finished"]
    await s.puller.close()


@pytest.mark.parametrize("cause", ["authentication", "not-found", "disk-full", "other"])
async def test_the_registrys_cause_is_passed_on(cause: PullCause) -> None:
    ref = f"reg/fail-{cause}:1"
    s = make(Registry(fail={ref: cause}))
    s.puller.request(ref, "r1")
    state = await s.settled(ref)
    assert (state.status, state.cause) == ("failed", cause)
    assert s.listener.of("failed") == [(cause, state.reason)]
    assert s.ended == [1]
    # A failed image is not pulled again until the agent forgets it.
    assert s.puller.request(ref, "r1") == state
    assert len(s.registry.pulls) == 1
    await s.puller.close()


async def test_an_unexpected_error_is_cause_other() -> None:
    registry = Registry(error=OSError("socket closed"))
    s = make(registry)
    s.puller.request("reg/x:1", "r1")
    state = await s.settled("reg/x:1")
    assert (state.cause, "socket closed" in state.reason) == ("other", True)
    await s.puller.close()


async def test_close_cancels_pulls_and_tells_nobody() -> None:
    s = make(Registry(hold=True))
    s.puller.request("reg/a:1", "")
    s.puller.request("reg/b:1", "")
    await asyncio.sleep(0.02)
    await s.puller.close()
    assert s.registry.running == 0
    assert s.listener.of("failed") == [] and s.listener.of("finished") == []
    assert s.ended == []
    with pytest.raises(RuntimeError):
        s.puller.request("reg/c:1", "")


async def test_a_failing_listener_does_not_stop_the_puller() -> None:
    s = make(listener=Listener(broken=True))
    s.puller.request("reg/a:1", "")
    s.puller.request("reg/b:1", "")
    assert (await s.settled("reg/a:1")).status == "done"
    assert (await s.settled("reg/b:1")).status == "done"
    assert s.ended == [1, 1]
    assert len(s.listener.of("finished")) == 2
    await s.puller.close()


async def test_credentials_are_fetched_for_each_pull_and_anonymous_has_none() -> None:
    s = make()
    s.puller.request("reg/a:1", "r1")
    s.puller.request("pub/b:1", "")
    await s.settled("reg/a:1")
    await s.settled("pub/b:1")
    s.puller.forget("reg/a:1")
    s.puller.request("reg/a:1", "r1")
    await s.settled("reg/a:1")
    assert s.fetched == ["r1", "r1"]
    assert sorted(s.registry.pulls, key=lambda p: p[0]) == [
        ("pub/b:1", None),
        ("reg/a:1", AUTH),
        ("reg/a:1", AUTH),
    ]
    await s.puller.close()


async def test_credentials_that_cannot_be_fetched_fail_the_pull_as_other() -> None:
    def broken(registry_id: str) -> RegistryAuth | None:
        raise ConnectionError("registry service did not answer")

    s = make(credentials=broken)
    s.puller.request("reg/a:1", "r9")
    state = await s.settled("reg/a:1")
    assert state.cause == "other"
    assert "credentials of registry 'r9'" in state.reason
    assert s.registry.pulls == []

    def unknown(registry_id: str) -> RegistryAuth | None:
        raise PullFailedError("authentication", f"registry {registry_id} is not known")

    s = make(credentials=unknown)
    s.puller.request("reg/a:1", "gone")
    state = await s.settled("reg/a:1")
    assert (state.cause, state.reason) == ("authentication", "registry gone is not known")
    await s.puller.close()


async def test_the_password_is_never_shown() -> None:
    assert "s3cret" not in repr(AUTH)
    registry = Registry(error=PullFailedError("authentication", f"rejected {AUTH.password}"))
    s = make(registry)
    s.puller.request("reg/a:1", "r1")
    state = await s.settled("reg/a:1")
    assert state.reason == "rejected ***"
    assert all("s3cret" not in repr(call) for call in s.listener.calls)
    await s.puller.close()
