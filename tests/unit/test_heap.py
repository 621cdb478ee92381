"""``jetyard.runtime.heap``: a service's heap frozen out of the collector's walks, and what that
relies on: a frozen object is still freed by reference counting when it is dropped; and a
youngest generation sized so that a growing state does not bring a full walk after a freeze."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import Iterator

import pytest

from jetyard.runtime.heap import freeze_after_collecting, keep_frozen, tune_collector


class Held:
    pass


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the other tests' objects go back to the collector


@pytest.fixture
def thresholds(unfrozen: None) -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_what_is_alive_at_the_start_is_frozen_and_garbage_is_collected_first(
    unfrozen: None,
) -> None:
    looped = Held()
    looped.me = looped  # type: ignore[attr-defined]
    in_cycle = weakref.ref(looped)
    del looped
    freeze_after_collecting()
    assert in_cycle() is None  # the startup's cyclic garbage was collected, not frozen
    assert gc.get_freeze_count() > 0
    assert gc.get_count()[2] == 0  # nothing left in the oldest generation to walk


def test_a_frozen_object_is_still_freed_when_dropped(unfrozen: None) -> None:
    held = Held()
    alive = weakref.ref(held)
    gc.freeze()
    assert alive() is held
    del held
    assert alive() is None


def walked(objects: list[Held]) -> int:
    """How many of ``objects`` the collector still walks (a frozen object is in no generation)."""
    in_generations = {id(o) for o in gc.get_objects()}
    return sum(id(o) in in_generations for o in objects)


async def test_what_is_made_later_is_frozen_every_period(unfrozen: None) -> None:
    gc.freeze()
    made = [Held() for _ in range(1000)]
    assert walked(made) == len(made)  # made after the freeze: the collector walks them
    freezing = asyncio.ensure_future(keep_frozen(every_s=0.01))
    try:
        await asyncio.sleep(0.1)
        assert walked(made) == 0
    finally:
        freezing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await freezing


def full_collections_while_growing(objects: int) -> int:
    """Full collections while a frozen service's state grows by ``objects`` containers."""
    full = 0

    def count(phase: str, info: dict[str, int]) -> None:
        nonlocal full
        full += phase == "start" and info["generation"] == 2

    freeze_after_collecting()  # as a service is once ready
    state: list[list[int]] = []
    gc.callbacks.append(count)
    try:
        for i in range(objects):
            state.append([i])
    finally:
        gc.callbacks.remove(count)
    return full


def test_a_growing_state_after_a_freeze_brings_no_full_walk_once_tuned(thresholds: None) -> None:
    gc.set_threshold(700, 10, 10)  # CPython's defaults
    assert full_collections_while_growing(400_000) >= 3  # what the scheduler suffered
    tune_collector()
    assert gc.get_threshold() == (20_000, 10, 10)
    assert full_collections_while_growing(400_000) == 0
