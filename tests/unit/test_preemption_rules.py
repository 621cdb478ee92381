"""Preemption's choice as tables: who is stopped (fewest, then youngest, lower priority, same
domain unless allowed, devices counted) and when nobody is."""

from __future__ import annotations

import pytest

from placement.preemption import Holding, Policy, Running, choose_victims
from schemas.devices import DeviceShare
from schemas.session import ClusterMode
from tests.unit.placement_support import ask, node, slots


def running(
    session_id: str,
    node_id: str,
    cpu: float = 1,
    mem: float = 1,
    *,
    priority: int = 5,
    domain: str = "d",
    started: float = 0.0,
    gpus: tuple[int, ...] = (),
    share: tuple[int, int] | None = None,
) -> Running:
    """``gpus``: device indices held whole; ``share``: (device index, hundredths)."""
    devices = tuple(
        DeviceShare(index=i, uuid=f"{node_id}-gpu{i}", hundredths=100, whole=True) for i in gpus
    )
    if share is not None:
        devices += (
            DeviceShare(index=share[0], uuid=f"{node_id}-gpu{share[0]}", hundredths=share[1]),
        )
    gpu = len(gpus) + (share[1] / 100 if share else 0)
    return Running(
        session_id, priority, domain, started, (Holding(node_id, slots(cpu, mem, gpu), devices),)
    )


def victims_of(*args: object, **kwargs: object) -> tuple[str, tuple[str, ...]] | None:
    chosen = choose_victims(*args, **kwargs)  # type: ignore[arg-type]
    return None if chosen is None else (chosen.node_id, chosen.victims)


def test_the_fewest_victims_win_over_younger_ones() -> None:
    # n1: one big old session frees enough alone; n2: two small young ones are needed.
    offers = [node("n1", cpu=8, used_cpu=8), node("n2", cpu=8, used_cpu=8)]
    held = [
        running("big", "n1", cpu=4, started=10),
        running("old", "n1", cpu=4, started=5),
        running("y1", "n2", cpu=2, started=100),
        running("y2", "n2", cpu=2, started=101),
        running("y3", "n2", cpu=4, started=1),
    ]
    request = ask("want", cpu=4, priority=10)
    assert victims_of(request, "d", offers, held, Policy()) == ("n1", ("big",))


def test_among_as_few_the_youngest_are_stopped() -> None:
    offers = [node("n1", cpu=8, used_cpu=8)]
    held = [
        running("a", "n1", cpu=2, started=1),
        running("b", "n1", cpu=2, started=3),
        running("c", "n1", cpu=2, started=2),
        running("e", "n1", cpu=2, started=4),
    ]
    request = ask("want", cpu=4, priority=10)
    assert victims_of(request, "d", offers, held, Policy()) == ("n1", ("e", "b"))


def test_the_youngest_node_wide_choice_between_nodes() -> None:
    offers = [node("n1", cpu=4, used_cpu=4), node("n2", cpu=4, used_cpu=4)]
    held = [running("old", "n1", cpu=4, started=1), running("young", "n2", cpu=4, started=9)]
    assert victims_of(ask("want", cpu=4, priority=10), "d", offers, held, Policy()) == (
        "n2",
        ("young",),
    )


@pytest.mark.parametrize(
    ("priority", "domain", "across", "expected"),
    [
        (5, "d", False, None),  # equal priority is never stopped
        (9, "d", False, ("n1", ("low",))),
        (9, "other", False, None),  # another domain's session is not ours to stop
        (9, "other", True, ("n1", ("low",))),  # unless the group allows it
    ],
)
def test_priority_and_domain(
    priority: int, domain: str, across: bool, expected: tuple[str, tuple[str, ...]] | None
) -> None:
    offers = [node("n1", cpu=4, used_cpu=4)]
    held = [running("low", "n1", cpu=4, priority=5, domain=domain)]
    request = ask("want", cpu=4, priority=priority)
    assert victims_of(request, "d", offers, held, Policy(across_domains=across)) == expected


def test_nobody_is_stopped_when_the_session_fits_already() -> None:
    offers = [node("n1", cpu=8, used_cpu=4), node("n2", cpu=4, used_cpu=4)]
    held = [running("low", "n2", cpu=4)]
    assert victims_of(ask("want", cpu=4, priority=10), "d", offers, held, Policy()) is None


def test_nobody_is_stopped_when_stopping_everyone_is_not_enough() -> None:
    offers = [node("n1", cpu=4, used_cpu=4)]
    held = [running("low", "n1", cpu=2), running("high", "n1", cpu=2, priority=20)]
    assert victims_of(ask("want", cpu=4, priority=10), "d", offers, held, Policy()) is None


def test_cordoned_lost_or_imageless_nodes_are_not_considered() -> None:
    held = [running("low", "n1", cpu=4)]
    request = ask("want", cpu=4, priority=10)
    gone = [node("n1", cpu=4, used_cpu=4, available=False)]
    assert victims_of(request, "d", gone, held, Policy()) is None
    imageless = [node("n1", cpu=4, used_cpu=4, images=("other",))]
    assert victims_of(request, "d", imageless, held, Policy()) is None


def test_multi_node_sessions_do_not_preempt() -> None:
    offers = [node("n1", cpu=4, used_cpu=4), node("n2", cpu=4, used_cpu=4)]
    held = [running("a", "n1", cpu=4), running("b", "n2", cpu=4)]
    request = ask("want", cpu=4, kernels=2, priority=10, mode=ClusterMode.MULTI_NODE)
    assert victims_of(request, "d", offers, held, Policy()) is None


def test_whole_gpus_are_freed_device_by_device() -> None:
    # Two GPUs held whole by two sessions; a request for two whole GPUs needs both stopped,
    # a request for one needs the younger only.
    offers = [node("n1", cpu=8, used_cpu=2, gpus=2, whole=(0, 1))]
    held = [
        running("g0", "n1", cpu=1, gpus=(0,), started=1),
        running("g1", "n1", cpu=1, gpus=(1,), started=2),
    ]
    assert victims_of(ask("one", cpu=1, gpu=1, priority=10), "d", offers, held, Policy()) == (
        "n1",
        ("g1",),
    )
    assert victims_of(ask("two", cpu=1, gpu=2, priority=10), "d", offers, held, Policy()) == (
        "n1",
        ("g1", "g0"),
    )


def test_shares_count_only_on_their_device() -> None:
    # GPU 0: 60 held by the young session, 30 by the old one; GPU 1: 50 by a middle one.
    offers = [node("n1", cpu=8, gpus=2, shared={0: 90, 1: 50})]
    held = [
        running("young", "n1", cpu=0, share=(0, 60), started=9),
        running("old", "n1", cpu=0, share=(0, 30), started=1),
        running("mid", "n1", cpu=0, share=(1, 50), started=5),
    ]
    # 0.7 needs 70 on one device: GPU 0 after "young" (30 used) or GPU 1 after "mid" (0).
    assert victims_of(ask("s", cpu=1, gpu=0.7, priority=10), "d", offers, held, Policy()) == (
        "n1",
        ("young",),
    )
    # 1.0 as a share-free whole device: GPU 1 after "mid", or GPU 0 after both on it.
    assert victims_of(ask("w", cpu=1, gpu=1, priority=10), "d", offers, held, Policy()) == (
        "n1",
        ("mid",),
    )
