"""A request no node of its group could ever hold: refused at creation naming the largest node
(the scheduler's own judge, asked about the group's nodes as if idle), unless the group waits
for larger nodes or has no node yet; a session that waits for one says so. Tables of nodes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from placement import reasons
from placement.judge import Verdict, judge
from placement.model import KernelRequest, NodeOffer, SessionRequest
from projections.queries import NodeView
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.tenancy import GroupScheduling
from services.gateway.sessions.fit import refusal

GIB = 1 << 30


def node(host: str, cpu: int, mem_gib: int = 8, gpus: int = 0, group: str = "default") -> NodeView:
    devices = tuple({"kind": "cuda", "index": i, "uuid": f"GPU-{host}-{i}"} for i in range(gpus))
    capacity = ResourceSlots(
        cpu_milli=cpu * 1000, memory_bytes=mem_gib * GIB, gpu_hundredths=gpus * 100
    )
    return NodeView(
        id=f"id-{host}", hostname=host, resource_group=group, capacity=capacity,
        used=ResourceSlots(), allocations=0, cordoned=False, lost=False, reason="",
        updated_at=datetime.now(UTC), seq=1, backend="docker", epoch=1, devices=devices,
        images=("img",),
    )  # fmt: skip


def ask(cpu: str = "1", mem_gib: int = 1, gpu: str = "0", group: str = "default") -> SessionSpec:
    resources = ResourceSlots.of(cpu=cpu, memory=mem_gib * GIB, gpu=gpu)
    return SessionSpec(
        image="img", kernels=(KernelSpec(resources=resources),), resource_group=group
    )


def test_eight_cpus_on_a_two_core_cluster_are_refused_naming_the_largest_node() -> None:
    said = refusal(ask(cpu="8"), [node("small", 2), node("tiny", 1)], GroupScheduling())

    assert said is not None
    assert "no node in group default could ever hold this request" in said
    assert "has 8 CPUs even when idle (largest: 2 CPUs on small)" in said
    assert "waitForLargerNodes" in said


def test_a_gpu_share_on_a_cluster_without_gpus_is_told_there_are_none() -> None:
    said = refusal(ask(gpu="0.5"), [node("cpu-only", 4)], GroupScheduling())

    assert said is not None
    assert "there are no GPUs in group default (asked for 0.5 GPU)" in said
    assert "1 GPU" not in said


@pytest.mark.parametrize(
    ("spec", "nodes", "policy"),
    [
        (ask(cpu="2"), [node("small", 2)], GroupScheduling()),  # fits when idle: it waits
        (ask(cpu="8"), [], GroupScheduling()),  # no node yet (jetyard up): it waits
        (ask(cpu="8"), [node("other", 64, group="big")], GroupScheduling()),  # none of its group
        (ask(cpu="8"), [node("small", 2)], GroupScheduling(wait_for_larger_nodes=True)),
        (ask(gpu="2"), [node("busy", 8, gpus=2)], GroupScheduling()),
    ],
    ids=["fits-idle", "no-nodes", "no-nodes-in-its-group", "group-waits", "whole-gpus-fit"],
)
def test_what_may_wait_is_not_refused(
    spec: SessionSpec, nodes: list[NodeView], policy: GroupScheduling
) -> None:
    assert refusal(spec, nodes, policy) is None


def test_a_node_that_has_not_listed_its_gpus_yet_is_not_a_refusal() -> None:
    gpus_not_listed = ResourceSlots.of(cpu=8, memory=8 * GIB, gpu=2)
    unlisted = replace(node("new-gpu-box", 8), capacity=gpus_not_listed)

    assert refusal(ask(gpu="1"), [unlisted], GroupScheduling()) is None


def test_the_scheduler_s_waiting_reason_says_it_waits_for_a_larger_node() -> None:
    two = ResourceSlots.of(cpu=2)
    small = NodeOffer("n1", "small", two, two, frozenset({"img"}))
    request = SessionRequest("s", "img", (KernelRequest("k", ResourceSlots.of(cpu=8)),))

    said = judge(request, [small], group="default")

    assert said.verdict is Verdict.NEVER
    assert reasons.while_waiting(said.reason) == (
        "no node in group default has 8 CPUs even when idle (largest: 2 CPUs on small); "
        "it waits for a larger node to join the group"
    )
    short_now = "no node in group default has 2 CPUs free (largest free: 1 CPU on small)"
    assert reasons.while_waiting(short_now) == short_now
