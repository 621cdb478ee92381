"""Placement as tables: nodes and requests in, placements or readable reasons out."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from schemas.resources import ResourceSlots
from services.scheduler.placement import (
    KernelRequest,
    NodeOffer,
    Placed,
    SessionRequest,
    Waiting,
    place,
)
from services.scheduler.reasons import describe, format_cpu, format_gpu, format_memory

GIB = 1 << 30
IMAGE = "img"


def slots(cpu: float = 0, mem: float = 0, gpu: float = 0) -> ResourceSlots:
    return ResourceSlots(
        cpu_milli=round(cpu * 1000), memory_bytes=round(mem * GIB), gpu_hundredths=round(gpu * 100)
    )


def node(
    node_id: str,
    cpu: float = 8,
    mem: float = 32,
    gpu: float = 0,
    *,
    used: ResourceSlots | None = None,
    images: tuple[str, ...] = (IMAGE,),
    available: bool = True,
) -> NodeOffer:
    capacity = slots(cpu, mem, gpu)
    used = used or ResourceSlots()
    free = ResourceSlots(
        cpu_milli=capacity.cpu_milli - used.cpu_milli,
        memory_bytes=capacity.memory_bytes - used.memory_bytes,
        gpu_hundredths=capacity.gpu_hundredths - used.gpu_hundredths,
    )
    return NodeOffer(node_id, node_id, capacity, free, frozenset(images), available)


def ask(
    session_id: str, cpu: float = 1, mem: float = 1, gpu: float = 0, *, image: str = IMAGE,
    kernels: int = 1,
) -> SessionRequest:  # fmt: skip
    return SessionRequest(
        session_id,
        image,
        tuple(KernelRequest(f"{session_id}-k{i}", slots(cpu, mem, gpu)) for i in range(kernels)),
    )


@dataclass(frozen=True)
class Case:
    nodes: list[NodeOffer]
    requests: list[SessionRequest]
    expected: dict[str, str]
    """Session id -> the node its first kernel lands on, or "wait: <reason>"."""


def outcome(decision: Placed | Waiting) -> str:
    if isinstance(decision, Waiting):
        return f"wait: {decision.reason}"
    return next(iter(decision.placements.values()))


CASES = {
    "fits on the only node": Case([node("n1")], [ask("a", cpu=2)], {"a": "n1"}),
    "exactly fills a node": Case([node("n1", cpu=2, mem=4)], [ask("a", 2, 4)], {"a": "n1"}),
    "too much cpu": Case(
        [node("n1", cpu=2)],
        [ask("a", cpu=4)],
        {"a": "wait: no node has 4 CPUs even when idle (largest: 2 CPUs on n1)"},
    ),
    "cpu taken by others": Case(
        [node("n1", cpu=8, used=slots(cpu=7.5))],
        [ask("a", cpu=1)],
        {"a": "wait: no node has 1 CPU free (largest free: 0.5 CPU on n1)"},
    ),
    "memory, with the readable largest free": Case(
        [node("gpu-01", mem=64, used=slots(mem=48.4)), node("gpu-02", mem=64, used=slots(mem=60))],
        [ask("a", mem=64)],
        {"a": "wait: no node has 64 GiB of free memory (largest free: 15.6 GiB on gpu-01)"},
    ),
    "memory no node has even idle": Case(
        [node("n1", mem=16), node("n2", mem=32)],
        [ask("a", mem=64)],
        {"a": "wait: no node has 64 GiB of memory even when idle (largest: 32 GiB on n2)"},
    ),
    "whole gpus: a fraction left on a node does not count": Case(
        [node("n1", gpu=2, used=slots(gpu=0.5))],
        [ask("a", gpu=1), ask("b", gpu=1)],
        {"a": "n1", "b": "wait: no node has 1 GPU free (largest free: 0 GPUs on n1)"},
    ),
    "a fractional request waits, saying why": Case(
        [node("n1", gpu=4)],
        [ask("a", gpu=0.5)],
        {"a": "wait: fractional GPUs are not supported yet (asked for 0.5 GPU)"},
    ),
    "cordoned or lost nodes are skipped": Case(
        [node("n1", gpu=8, available=False), node("n2", gpu=1)],
        [ask("a", gpu=1)],
        {"a": "n2"},
    ),
    "only cordoned nodes offer the image": Case(
        [node("n1", available=False)],
        [ask("a")],
        {"a": "wait: every node offering image img is cordoned or lost"},
    ),
    "a node without the image is skipped": Case(
        [node("n1", gpu=8, images=("other",)), node("n2", gpu=1)],
        [ask("a", gpu=1)],
        {"a": "n2"},
    ),
    "no node has the image": Case(
        [node("n1", images=("other",))],
        [ask("a", image="pytorch:2")],
        {"a": "wait: no node offers image pytorch:2"},
    ),
    "no node at all": Case(
        [], [ask("a")], {"a": "wait: no node is registered in this resource group"}
    ),
    "decisions consume capacity within the pass": Case(
        [node("n1", gpu=2)],
        [ask("a", gpu=1), ask("b", gpu=1), ask("c", gpu=1)],
        {"a": "n1", "b": "n1", "c": "wait: no node has 1 GPU free (largest free: 0 GPUs on n1)"},
    ),
    "fifo: the first asker gets the last gpu": Case(
        [node("n1", gpu=1)],
        [ask("b", gpu=1), ask("a", gpu=1)],
        {"b": "n1", "a": "wait: no node has 1 GPU free (largest free: 0 GPUs on n1)"},
    ),
    "a session that fits nowhere does not block those behind it": Case(
        [node("n1", gpu=2)],
        [ask("big", gpu=4), ask("small", gpu=1)],
        {
            "big": "wait: no node has 4 GPUs even when idle (largest: 2 GPUs on n1)",
            "small": "n1",
        },
    ),
    "gpu requests go to the node with the fewest free gpus that fit": Case(
        [
            node("n1", gpu=4),
            node("n3", gpu=2, used=slots(gpu=1)),
            node("n2", gpu=2, used=slots(gpu=1)),
        ],
        [ask("a", gpu=1), ask("b", gpu=1), ask("c", gpu=2)],
        {"a": "n2", "b": "n3", "c": "n1"},
    ),
    "cpu-only requests go to nodes without free gpus first": Case(
        [node("gpu", gpu=8), node("cpu")],
        [ask("a", cpu=1)],
        {"a": "cpu"},
    ),
    "every dimension fits somewhere, never together": Case(
        [node("n1", cpu=8, mem=1), node("n2", cpu=1, mem=64)],
        [ask("a", cpu=4, mem=32)],
        {"a": "wait: no single node has 4 CPUs and 32 GiB of memory free at once"},
    ),
    "several shortages are all named": Case(
        [node("n1", cpu=2, mem=4, gpu=1)],
        [ask("a", cpu=4, mem=1, gpu=2)],
        {
            "a": "wait: no node has 4 CPUs even when idle (largest: 2 CPUs on n1); "
            "no node has 2 GPUs even when idle (largest: 1 GPU on n1)"
        },
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_placement(case: Case) -> None:
    decisions = place(case.requests, case.nodes)
    assert [d.session_id for d in decisions] == [r.session_id for r in case.requests]
    assert {d.session_id: outcome(d) for d in decisions} == case.expected


def test_all_kernels_of_a_session_are_placed_or_none() -> None:
    nodes = [node("n1", gpu=2)]
    decisions = place([ask("three", gpu=1, kernels=3), ask("one", gpu=1)], nodes)
    assert isinstance(decisions[0], Waiting)
    # Nothing stays taken by the kernels of the session that had to wait.
    assert decisions[1] == Placed("one", {"one-k0": "n1"})
    pair = place([ask("pair", gpu=1, kernels=2)], nodes)
    assert pair == [Placed("pair", {"pair-k0": "n1", "pair-k1": "n1"})]


def test_placement_does_not_change_the_snapshot() -> None:
    nodes = [node("n1", gpu=1)]
    place([ask("a", gpu=1)], nodes)
    assert nodes[0].free.gpu_hundredths == 100


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (format_memory(64 * GIB), "64 GiB"),
        (format_memory(int(15.55 * GIB) + 1), "15.6 GiB"),
        (format_memory(512 << 20), "512 MiB"),
        (format_cpu(500), "0.5 CPU"),
        (format_cpu(1000), "1 CPU"),
        (format_cpu(16_000), "16 CPUs"),
        (format_gpu(0), "0 GPUs"),
        (format_gpu(100), "1 GPU"),
        (format_gpu(800), "8 GPUs"),
        (describe(slots(cpu=2, mem=8, gpu=1)), "2 CPUs, 8 GiB of memory and 1 GPU"),
        (describe(slots(mem=8)), "8 GiB of memory"),
    ],
)
def test_units_read_like_people_write_them(text: str, expected: str) -> None:
    assert text == expected
