"""The cluster queries: ``cluster``, the operators' picture of the cluster now (``snapshot``),
and ``nodes``, every node's row, for administrators and monitors; ``nodeImages``, what the
nodes hold (``images.py``), for everyone. Reads the views; writes nothing."""

from __future__ import annotations

from typing import Any

import strawberry
from strawberry.types import Info

from schemas.tenancy import Role
from services.gateway.cluster.images import NodeImage, node_images
from services.gateway.cluster.snapshot import pictures
from services.gateway.cluster.types import ClusterNow, Node
from services.gateway.context import Context, ctx_of, forbidden, who
from services.gateway.core.history import AsOf, views_of


@strawberry.type
class ClusterQuery:
    @strawberry.field(
        description="The cluster now: nodes with their GPUs and who holds them, each resource "
        "group's queue, and why waiting sessions do not fit. For administrators and monitors "
        "(their domain's sessions by name; superadmins: all). Only the lists asked are "
        "worked out."
    )
    async def cluster(self, info: Info[Context, Any]) -> ClusterNow:
        me = who(info)
        if me.role is Role.USER:
            raise forbidden(info, "only administrators and monitors see the cluster")
        ctx = ctx_of(info)
        seq = await ctx.views.position()
        return ClusterNow(seq=seq, parts=pictures(ctx.views).of(seq, ctx, me))

    @strawberry.field
    async def nodes(self, info: Info[Context, Any], as_of: AsOf | None = None) -> list[Node]:
        principal = who(info)
        if principal.role is Role.USER:
            raise forbidden(info, "only administrators and monitors may list nodes")
        return [Node.of(view) for view in await (await views_of(info, as_of)).nodes()]

    @strawberry.field(
        description="The images the live nodes report holding, by name: a user sees the nodes "
        "of the resource groups they may run in, administrators and monitors every node. "
        "Registered images: `images`."
    )
    async def node_images(self, info: Info[Context, Any]) -> list[NodeImage]:
        return await node_images(info)
