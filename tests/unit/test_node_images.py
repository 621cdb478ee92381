"""``nodeImages`` (``services/gateway/cluster/images.py``): every image the live nodes hold, by
name, with how many nodes, which hosts and which groups; lost nodes left out; a user's view
limited to the groups they may run in."""

from __future__ import annotations

from datetime import UTC, datetime

from projections.queries import NodeView
from schemas.resources import ResourceSlots
from services.gateway.cluster.images import NodeImage, held


def node(name: str, group: str, *images: str, lost: bool = False) -> NodeView:
    slots = ResourceSlots.of(cpu="2")
    return NodeView(
        id=name, hostname=name, resource_group=group, capacity=slots, used=slots, allocations=0,
        cordoned=False, lost=lost, reason="", updated_at=datetime(2026, 1, 1, tzinfo=UTC), seq=1,
        backend="docker", epoch=1, devices=(), images=images,
    )  # fmt: skip


NODES = [
    node("n1", "default", "busybox:1", "python:3.11"),
    node("n2", "gpu", "python:3.11", "python:3.11", "cuda:12"),
    node("n3", "gpu", "cuda:12", "gone:1", lost=True),
]


def test_every_image_the_live_nodes_hold() -> None:
    assert held(NODES, None) == [
        NodeImage(name="busybox:1", nodes=1, resource_groups=["default"], hosts=["n1"]),
        NodeImage(name="cuda:12", nodes=1, resource_groups=["gpu"], hosts=["n2"]),
        NodeImage(
            name="python:3.11", nodes=2, resource_groups=["default", "gpu"], hosts=["n1", "n2"]
        ),
    ]


def test_a_user_sees_the_nodes_of_their_groups() -> None:
    assert [i.name for i in held(NODES, {"default"})] == ["busybox:1", "python:3.11"]
    assert held(NODES, set()) == []
