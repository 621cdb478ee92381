"""Node operations for the cluster's administrators: ``cordonNode``, ``drainNode``,
``uncordonNode``, ``purgeImage``, ``removeNode`` (commands on ``cmd.node.*``, decided by the
scheduler, the ledger's writer).
The node's state and reason then show in ``nodes``."""

from __future__ import annotations

from typing import Any

import strawberry
from strawberry.types import Info

from commands.authorisation import Principal, can_administer_cluster
from commands.node.messages import CordonNode, DrainNode, PurgeImage, RemoveNode, UncordonNode
from services.gateway.admin_api.send import build, run
from services.gateway.admin_api.tenancy_types import AdminOutcome
from services.gateway.context import Context, ctx_of, forbidden, who

Ctx = Info[Context, Any]


def _superadmin(info: Ctx) -> Principal:
    me = who(info)
    if not can_administer_cluster(me):
        raise forbidden(
            info,
            "only cluster administrators cordon, drain, uncordon, remove or purge nodes' images",
        )
    return me


@strawberry.type
class NodeMutation:
    @strawberry.mutation(description="No new sessions on the node; what runs stays.")
    async def cordon_node(
        self, info: Ctx, id: strawberry.ID, reason: str = "cordoned by an operator"
    ) -> AdminOutcome:
        cmd = build(CordonNode, _superadmin(info), node_id=str(id), reason=reason)
        return await run(ctx_of(info), cmd, str(id))

    @strawberry.mutation(
        description="Cordon, and let what runs end; with deadlineSeconds, what still runs "
        "then is stopped (its sessions end with the drain as their reason)."
    )
    async def drain_node(
        self,
        info: Ctx,
        id: strawberry.ID,
        reason: str = "drained by an operator",
        deadline_seconds: int | None = None,
    ) -> AdminOutcome:
        cmd = build(
            DrainNode, _superadmin(info), node_id=str(id), reason=reason,
            deadline_s=deadline_seconds,
        )  # fmt: skip
        return await run(ctx_of(info), cmd, str(id))

    @strawberry.mutation(description="Take sessions again (ends a drain too).")
    async def uncordon_node(
        self, info: Ctx, id: strawberry.ID, reason: str = "uncordoned by an operator"
    ) -> AdminOutcome:
        cmd = build(UncordonNode, _superadmin(info), node_id=str(id), reason=reason)
        return await run(ctx_of(info), cmd, str(id))

    @strawberry.mutation(
        description="Take the node out of the cluster for good (refused while it holds "
        "kernels: drain it first). It leaves `nodes`; its agent stops, and it cannot join again."
    )
    async def remove_node(
        self, info: Ctx, id: strawberry.ID, reason: str = "removed by an operator"
    ) -> AdminOutcome:
        cmd = build(RemoveNode, _superadmin(info), node_id=str(id), reason=reason)
        return await run(ctx_of(info), cmd, str(id))

    @strawberry.mutation(
        description="Remove an image from nodes' disks (`nodes`: those ids; none: every live "
        "node that holds it). Each agent refuses while a kernel there uses the image and says "
        "so with `ImagePurged`; `nodes { images }` shows what is left."
    )
    async def purge_image(
        self, info: Ctx, reference: str, nodes: list[strawberry.ID] | None = None,
        reason: str = "purged by an operator",
    ) -> list[AdminOutcome]:  # fmt: skip
        me, ctx = _superadmin(info), ctx_of(info)
        if nodes is None:
            views = await ctx.views.nodes()
            targets = [v.id for v in views if not v.lost and reference in v.images]
        else:
            targets = [str(n) for n in nodes]
        commands = [
            build(PurgeImage, me, node_id=node_id, reference=reference, reason=reason)
            for node_id in dict.fromkeys(targets)
        ]
        return [await run(ctx, cmd, cmd.node_id) for cmd in commands]
