"""``nodeImages``: the images the nodes report holding (their agents' ``AgentRegistered``
images, as the node view keeps them), each with the resource groups and the number of live
nodes that hold it. A user sees the nodes of the groups they may run in; administrators and
monitors every node. Reads the views; writes nothing."""

from __future__ import annotations

from typing import Any

import strawberry
from strawberry.types import Info

from projections.queries import NodeView
from schemas.tenancy import Role
from services.gateway.context import Context, ctx_of, who


@strawberry.type(description="An image that nodes report holding, so a session can run it.")
class NodeImage:
    name: str
    nodes: int = strawberry.field(description="how many live nodes (of those seen) hold it")
    resource_groups: list[str] = strawberry.field(description="the groups of those nodes")
    hosts: list[str] = strawberry.field(description="those nodes' host names")


def held(views: list[NodeView], groups: set[str] | None) -> list[NodeImage]:
    """Every image the live nodes in ``groups`` (None: all) hold, by name."""
    nodes: dict[str, int] = {}
    where: dict[str, set[str]] = {}
    hosts: dict[str, set[str]] = {}
    for view in views:
        if view.lost or (groups is not None and view.resource_group not in groups):
            continue
        for image in set(view.images):
            nodes[image] = nodes.get(image, 0) + 1
            where.setdefault(image, set()).add(view.resource_group)
            hosts.setdefault(image, set()).add(view.hostname or view.id)
    return [
        NodeImage(name=n, nodes=nodes[n], resource_groups=sorted(where[n]), hosts=sorted(hosts[n]))
        for n in sorted(nodes)
    ]


async def node_images(info: Info[Context, Any]) -> list[NodeImage]:
    me, ctx = who(info), ctx_of(info)
    groups: set[str] | None = None
    if me.role is Role.USER:
        groups = set()
        for project in me.projects or {""}:
            groups |= ctx.directory.allowed_groups(me.domain, project, me.access_key or "")
    return held(await ctx.views.nodes(), groups)
