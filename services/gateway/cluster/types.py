"""GraphQL types of the operators' picture of the cluster (``snapshot``): the nodes with their
state, their GPUs, who holds each whole or in part, the kernels on them; each resource group's
queue and its waiting sessions; the notes that say why waiting requests do not fit. A session of a
domain the caller may not read shows with no id, name or user.

The lists are flat, each row naming its node or group, rather than nested: a query's cost is
estimated per list (``limits.py``), and nodes x GPUs x holds nested would cost far more than
the rows it returns. Each list is worked out only when a query selects it (``ClusterParts``:
``cluster { seq }`` reads no node, ``nodes`` no kernel)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, cast

import strawberry
from strawberry.scalars import JSON

from projections.nodes import DRAINING
from projections.queries import NodeView
from services.gateway.core.types import FairShareFactors, Resources, resources


@strawberry.type
class Node:
    id: strawberry.ID
    hostname: str
    resource_group: str
    capacity: Resources
    used: Resources
    allocations: int
    cordoned: bool
    lost: bool
    state: str = strawberry.field(description="schedulable | cordoned | draining | drained | lost")
    reason: str = strawberry.field(description="why it is in that state (the last change's)")
    images: list[str] = strawberry.field(description="the images its agent reports holding")
    pulls: list[NodePull] = strawberry.field(description="the image pulls in flight there")

    @classmethod
    def of(cls, view: NodeView) -> Node:
        capacity, used = view.capacity, view.used
        return cls(
            id=strawberry.ID(view.id),
            hostname=view.hostname,
            resource_group=view.resource_group,
            capacity=resources(capacity.cpu_milli, capacity.memory_bytes, capacity.gpu_hundredths),
            used=resources(used.cpu_milli, used.memory_bytes, used.gpu_hundredths),
            allocations=view.allocations,
            cordoned=view.cordoned,
            lost=view.lost,
            state=_node_state(view),
            reason=view.reason,
            images=sorted(view.images),
            pulls=[NodePull.of(ref, p) for ref, p in sorted(view.pulls.items())],
        )


@strawberry.type(description="An image pull in flight on a node.")
class NodePull:
    reference: str
    done_bytes: float
    total_bytes: float
    since: str = strawberry.field(description="when it began (ISO 8601)")
    kernels: int = strawberry.field(description="how many kernels wait for it")

    @classmethod
    def of(cls, reference: str, pull: dict[str, object]) -> NodePull:
        return cls(
            reference=reference, done_bytes=float(str(pull.get("done_bytes", 0))),
            total_bytes=float(str(pull.get("total_bytes", 0))), since=str(pull.get("since", "")),
            kernels=int(str(pull.get("kernels", 0))),
        )  # fmt: skip


def _node_state(view: NodeView) -> str:
    if view.lost:
        return "lost"
    if view.cordoned and view.reason.startswith(DRAINING):
        return "draining" if view.allocations else "drained"
    return "cordoned" if view.cordoned else "schedulable"


@strawberry.type(description="One kernel's hold on a GPU.")
class DeviceHold:
    node_id: str
    index: int = strawberry.field(description="the GPU's index on its node")
    session_id: strawberry.ID | None = strawberry.field(
        description="null: a session of a domain you may not read"
    )
    session_name: str | None
    kernel_id: str | None
    user: str | None = strawberry.field(description="the owner's email where you may see it")
    hundredths: int = strawberry.field(description="of the GPU: 100 when held whole")
    whole: bool


@strawberry.type(description="One GPU of a node as its agent reported it, and who holds it.")
class GpuDevice:
    node_id: str
    index: int
    uuid: str
    name: str
    memory_bytes: str
    numa_node: int | None
    mig: bool
    used_hundredths: int = strawberry.field(description="0 to 100: held whole or in shares")


@strawberry.type(description="One kernel holding slots on a node.")
class NodeKernel:
    node_id: str
    session_id: strawberry.ID | None = strawberry.field(
        description="null: a session of a domain you may not read"
    )
    session_name: str | None
    kernel_id: str | None
    user: str | None
    resources: Resources
    started: bool = strawberry.field(description="its agent reported it running")
    since: datetime = strawberry.field(description="when its slots were allocated")


@strawberry.type(description="A PENDING session, in its resource group's queue.")
class WaitingSession:
    resource_group: str
    session_id: strawberry.ID
    name: str | None
    user: str | None
    domain: str | None
    position: int | None = strawberry.field(
        description="1-based place in its group's queue; null when the scheduler has not "
        "listed it (not admitted yet, or set aside by a dependency or a start time)"
    )
    per_kernel: Resources = strawberry.field(description="what each of its kernels asks")
    cluster_size: int
    cluster_mode: str
    priority: int
    admitted: bool = strawberry.field(description="its quota is reserved")
    reason: str = strawberry.field(description="the scheduler's words for why it waits")
    created_at: datetime
    fair_share: FairShareFactors | None = strawberry.field(
        default=None,
        description="in a fair-share group: its owner's factors, as its reason says them",
    )


@strawberry.type
class GroupQueue:
    resource_group: str
    length: int = strawberry.field(description="how many wait in it (the scheduler's count)")


@strawberry.type(description="Why one waiting session does not fit now, in words.")
class FragmentationNote:
    session_id: strawberry.ID
    resource_group: str
    kind: str = strawberry.field(
        description="fragmented (the group has the room in total, no node in one piece) | "
        "short (the group has less free than it asks) | fits (there is room now: it waits "
        "for its turn or another reason) | oversized (it cannot fit the group as it is, even "
        "with nothing running: reason says why)"
    )
    text: str
    reason: str = strawberry.field(
        description="the scheduler's own sentence for why it does not fit now, from the rule "
        "the scheduler places with (empty when it fits)"
    )
    situation: str = strawberry.field(
        description="what every waiting request of its shape in its group meets: the text "
        "without this request's own words (a page says it once for all of them)"
    )
    free_gpu: str = strawberry.field(description="GPUs free on the group's available nodes")
    need_gpu: str = strawberry.field(description="GPUs it asks, all kernels together")


NODE_IDS = (
    "nodeIds: only these nodes' rows (to draw a few nodes, or one when it is opened); "
    "left out: every node's"
)


class ClusterParts(Protocol):
    """One caller's picture at one log position (``snapshot.Snapshot``), each part
    worked out on first need."""

    async def nodes(self, node_ids: list[str] | None) -> list[Node]: ...

    async def devices(self, node_ids: list[str] | None) -> list[GpuDevice]: ...

    async def holds(self, node_ids: list[str] | None) -> list[DeviceHold]: ...

    async def gpu_map(self, node_ids: list[str] | None) -> dict[str, list[dict[str, Any]]]: ...

    async def kernels(self, node_ids: list[str] | None) -> list[NodeKernel]: ...

    async def sessions_on_nodes(self) -> int: ...

    async def queues(self) -> list[GroupQueue]: ...

    async def waiting(self) -> list[WaitingSession]: ...

    async def notes(self) -> list[FragmentationNote]: ...


def _ids(node_ids: list[strawberry.ID] | None) -> list[str] | None:
    return None if node_ids is None else [str(i) for i in node_ids]


@strawberry.type(
    description="The cluster now, as the views hold it. Each list is worked out only when "
    "asked: ask only what you draw."
)
class ClusterNow:
    seq: int = strawberry.field(description="the log position the views had reached")
    parts: strawberry.Private[ClusterParts]

    @strawberry.field(description=f"by resource group, then host name. {NODE_IDS}")
    async def nodes(self, node_ids: list[strawberry.ID] | None = None) -> list[Node]:
        return await self.parts.nodes(_ids(node_ids))

    @strawberry.field(description=f"by node, then index. {NODE_IDS}")
    async def devices(self, node_ids: list[strawberry.ID] | None = None) -> list[GpuDevice]:
        return await self.parts.devices(_ids(node_ids))

    @strawberry.field(description=f"by node, GPU, then kernel. {NODE_IDS}")
    async def holds(self, node_ids: list[strawberry.ID] | None = None) -> list[DeviceHold]:
        return await self.parts.holds(_ids(node_ids))

    @strawberry.field(
        description="`devices` with their `holds`, in one value for drawing many nodes at "
        "once: an object of node id to that node's GPUs by index, each GPU `{index, uuid, "
        "name, memoryBytes, numaNode, mig, usedHundredths, holds: [{sessionId, sessionName, "
        "kernelId, user, hundredths, whole}]}` (the typed lists' fields and meanings). "
        f"{NODE_IDS}"
    )
    async def gpu_map(self, node_ids: list[strawberry.ID] | None = None) -> JSON:
        return cast(JSON, await self.parts.gpu_map(_ids(node_ids)))

    @strawberry.field(description=f"the kernels holding slots, by node. {NODE_IDS}")
    async def kernels(self, node_ids: list[strawberry.ID] | None = None) -> list[NodeKernel]:
        return await self.parts.kernels(_ids(node_ids))

    @strawberry.field(
        description="how many sessions hold slots on the nodes, every domain's counted "
        "(the kernels' sessions without reading the kernels)"
    )
    async def sessions_on_nodes(self) -> int:
        return await self.parts.sessions_on_nodes()

    @strawberry.field
    async def queues(self) -> list[GroupQueue]:
        return await self.parts.queues()

    @strawberry.field(description="by group, head first")
    async def waiting(self) -> list[WaitingSession]:
        return await self.parts.waiting()

    @strawberry.field(description="in the order of `waiting`")
    async def notes(self) -> list[FragmentationNote]:
        return await self.parts.notes()
