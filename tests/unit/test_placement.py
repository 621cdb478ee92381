"""Placement as tables: nodes and requests in, placements or readable reasons out (the
group's defaults: FIFO, concentrated, backfill, guard on, FILL)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from placement import NodeOffer, Placed, SessionRequest, Waiting, place
from placement.reasons import describe, format_cpu, format_gpu, format_memory
from schemas.session import ClusterMode
from schemas.tenancy import GroupScheduling
from tests.unit.placement_support import GIB, ask, by_session, check, node, slots

GROUP = "gpu-a"


@dataclass(frozen=True)
class Case:
    nodes: list[NodeOffer]
    requests: list[SessionRequest]
    expected: dict[str, str]
    """Session id -> the node its first kernel lands on, or "wait: <reason>"."""


CASES = {
    "fits on the only node": Case([node("n1")], [ask("a", cpu=2)], {"a": "n1"}),
    "exactly fills a node": Case([node("n1", cpu=2, mem=4)], [ask("a", 2, 4)], {"a": "n1"}),
    "too much cpu": Case(
        [node("n1", cpu=2)],
        [ask("a", cpu=4)],
        {"a": "wait: no node in group gpu-a has 4 CPUs even when idle (largest: 2 CPUs on n1)"},
    ),
    "cpu taken by others": Case(
        [node("n1", cpu=8, used_cpu=7.5)],
        [ask("a", cpu=1)],
        {"a": "wait: no node in group gpu-a has 1 CPU free (largest free: 0.5 CPU on n1)"},
    ),
    "memory, with the readable largest free": Case(
        [node("gpu-01", mem=64, used_mem=48.4), node("gpu-02", mem=64, used_mem=60)],
        [ask("a", mem=64)],
        {
            "a": "wait: no node in group gpu-a has 64 GiB of free memory "
            "(largest free: 15.6 GiB on gpu-01)"
        },
    ),
    "memory no node has even idle": Case(
        [node("n1", mem=16), node("n2", mem=32)],
        [ask("a", mem=64)],
        {
            "a": "wait: no node in group gpu-a has 64 GiB of memory even when idle "
            "(largest: 32 GiB on n2)"
        },
    ),
    "whole gpus: a device holding shares is not free": Case(
        [node("n1", gpus=2, shared={0: 50})],
        [ask("a", gpu=1), ask("b", gpu=1)],
        {"a": "n1", "b": "wait: no node in group gpu-a has 1 free GPU (most free: 0)"},
    ),
    "the brief's sentence for whole gpus": Case(
        [node("n1", gpus=4, whole=[0, 1]), node("n2", gpus=4, whole=[0, 1, 2])],
        [ask("a", gpu=4)],
        {"a": "wait: no node in group gpu-a has 4 free GPUs (most free: 2)"},
    ),
    "more gpus than any node has": Case(
        [node("n1", gpus=2)],
        [ask("big", gpu=4)],
        {"big": "wait: no node in group gpu-a has 4 GPUs even when idle (largest: 2 GPUs on n1)"},
    ),
    "gpu capacity without a device list takes no gpu request": Case(
        [node("n1", gpus=2, listed=False)],
        [ask("a", gpu=1), ask("b", cpu=1)],
        {
            "a": "wait: no node in group gpu-a lists its GPU devices yet (GPU requests need them)",
            "b": "n1",
        },
    ),
    "a share fits next to other shares": Case(
        [node("n1", gpus=1, shared={0: 50})], [ask("a", gpu=0.5)], {"a": "n1"}
    ),
    "no room for a share on one device": Case(
        [node("n1", gpus=2, shared={0: 70, 1: 90})],
        [ask("a", gpu=0.5)],
        {"a": "wait: no node in group gpu-a has 0.5 GPU free on one device (most free: 0.3 GPU)"},
    ),
    "shares are refused on MIG devices": Case(
        [node("n1", gpus=2, mig=[0, 1])],
        [ask("a", gpu=0.5), ask("b", gpu=1)],
        {
            "a": "wait: no node in group gpu-a has a GPU that takes shares (MIG devices take none)",
            "b": "n1",
        },
    ),
    "cordoned or lost nodes are skipped": Case(
        [node("n1", gpus=8, available=False), node("n2", gpus=1)],
        [ask("a", gpu=1)],
        {"a": "n2"},
    ),
    "only cordoned nodes": Case(
        [node("n1", available=False)],
        [ask("a")],
        {"a": "wait: every node in group gpu-a is cordoned or lost"},
    ),
    "a node without the image is skipped": Case(
        [node("n1", gpus=8, images=("other",)), node("n2", gpus=1)],
        [ask("a", gpu=1)],
        {"a": "n2"},
    ),
    "no available node has the image": Case(
        [node("n1", images=("other",)), node("n2", available=False)],
        [ask("a", image="pytorch:2")],
        {"a": "wait: image pytorch:2 is on no available node in group gpu-a"},
    ),
    "no node at all": Case([], [ask("a")], {"a": "wait: no node is registered in group gpu-a"}),
    "decisions consume capacity within the pass": Case(
        [node("n1", gpus=2)],
        [ask("a", gpu=1, order=1), ask("b", gpu=1, order=2), ask("c", gpu=1, order=3)],
        {"a": "n1", "b": "n1", "c": "wait: no node in group gpu-a has 1 free GPU (most free: 0)"},
    ),
    "every dimension fits somewhere, never together": Case(
        [node("n1", cpu=8, mem=1), node("n2", cpu=1, mem=64)],
        [ask("a", cpu=4, mem=32)],
        {"a": "wait: no single node in group gpu-a has 4 CPUs and 32 GiB of memory free at once"},
    ),
    "several shortages are all named": Case(
        [node("n1", cpu=2, mem=4, gpus=1)],
        [ask("a", cpu=4, mem=1, gpu=2)],
        {
            "a": "wait: no node in group gpu-a has 4 CPUs even when idle (largest: 2 CPUs on n1); "
            "no node in group gpu-a has 2 GPUs even when idle (largest: 1 GPU on n1)"
        },
    ),
    "a single-node session's reason is about its kernels together": Case(
        [node("n1", gpus=2), node("n2", gpus=2)],
        [ask("pair", gpu=2, kernels=2)],
        {
            "pair": "wait: all 2 kernels on one node: no node in group gpu-a has 4 GPUs even "
            "when idle (largest: 2 GPUs on n1)"
        },
    ),
    "a multi-node session's reason names the kernel": Case(
        [node("n1", gpus=2), node("n2", gpus=1)],
        [ask("trio", gpu=1, kernels=4, mode=ClusterMode.MULTI_NODE)],
        {"trio": "wait: kernel 4 of 4: no node in group gpu-a has 1 free GPU (most free: 0)"},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_placement(case: Case) -> None:
    decisions = place(case.requests, case.nodes, GroupScheduling(), group=GROUP)
    assert [d.session_id for d in decisions] == [r.session_id for r in case.requests]
    assert by_session(decisions) == case.expected
    check(case.nodes, case.requests, decisions)


def test_a_placed_kernel_names_its_node_devices_and_numa_node() -> None:
    nodes = [node("n1", gpus=2, numa=[1, 1])]
    [decision] = place([ask("a", gpu=2)], nodes)
    assert isinstance(decision, Placed)
    assert decision.placements == {"a-k0": "n1"}
    placed = decision.kernels["a-k0"]
    assert [(d.index, d.uuid, d.hundredths, d.whole) for d in placed.devices] == [
        (0, "n1-gpu0", 100, True),
        (1, "n1-gpu1", 100, True),
    ]
    assert placed.numa_node == 1


def test_placement_does_not_change_the_snapshot() -> None:
    nodes = [node("n1", gpus=1)]
    place([ask("a", gpu=1)], nodes)
    assert nodes[0].free.gpu_hundredths == 100
    assert not nodes[0].devices[0].whole


def test_the_same_shape_failing_twice_gives_the_same_reason_and_position() -> None:
    nodes = [node("n1", gpus=1)]
    requests = [ask(f"s{i}", gpu=2, order=i) for i in range(3)]
    decisions = place(requests, nodes, group=GROUP)
    assert [(d.reason, d.position) for d in decisions if isinstance(d, Waiting)] == [
        ("no node in group gpu-a has 2 GPUs even when idle (largest: 1 GPU on n1)", i)
        for i in (1, 2, 3)
    ]


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
        (format_gpu(60), "0.6 GPU"),
        (format_gpu(800), "8 GPUs"),
        (describe(slots(cpu=2, mem=8, gpu=1)), "2 CPUs, 8 GiB of memory and 1 GPU"),
        (describe(slots(mem=8)), "8 GiB of memory"),
    ],
)
def test_units_read_like_people_write_them(text: str, expected: str) -> None:
    assert text == expected
