"""Whether a new session could ever run in its resource group: the scheduler's own judge
(``placement.judge``) asked about the request against the group's nodes as if each were idle.
Pure over the node views the caller reads; no subjects.

"Ever" counts every registered node of the group, cordoned or lost ones too (they may come
back), and only sizes: the image and the folders' volumes have their own answers (the
scheduler refuses an image no agent has; a volume waits with its reason).
"""

from __future__ import annotations

from collections.abc import Sequence

from placement import DeviceState, KernelRequest, NodeOffer, SessionRequest
from placement.judge import Verdict, judge
from placement.reasons import never, refused
from projections.queries import NodeView
from schemas.devices import DeviceInfo
from schemas.session import SessionSpec
from schemas.tenancy import GroupScheduling


def refusal(spec: SessionSpec, nodes: Sequence[NodeView], policy: GroupScheduling) -> str | None:
    """Why the request must be refused at creation, or None when it may wait. It may wait
    when some node of its group could hold it, when the group waits for larger nodes, and
    when the group has no node at all yet (right after ``jetyard up``, before the agent has
    registered: refusing then would refuse everything; it waits for a node)."""
    group = spec.resource_group
    mine = [view for view in nodes if view.resource_group == group]
    if policy.wait_for_larger_nodes or not mine:
        return None
    request = SessionRequest(
        session_id="new",
        image=spec.image,
        kernels=tuple(KernelRequest(f"new/{i}", k.resources) for i, k in enumerate(spec.kernels)),
        cluster_mode=spec.cluster_mode,
    )
    said = judge(request, [_idle(view, spec.image) for view in mine], policy, group=group)
    # NEVER alone is not enough: a node that has not listed its GPUs yet may still.
    if said.verdict is Verdict.NEVER and never(said.reason):
        return refused(said.reason, group)
    return None


def _idle(view: NodeView, image: str) -> NodeOffer:
    devices = tuple(
        DeviceState(
            index=d.index, uuid=d.uuid, numa_node=d.numa_node, whole=False, shared=0,
            mig=d.mig_enabled,
        )
        for d in (DeviceInfo.model_validate(raw) for raw in view.devices)
    )  # fmt: skip
    return NodeOffer(
        node_id=view.id,
        hostname=view.hostname,
        capacity=view.capacity,
        free=view.capacity,
        images=frozenset({image}),
        devices=devices,
    )
