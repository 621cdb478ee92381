"""The GraphQL admin surface, as one query part and one mutation part for the schema
(``services.gateway.schema``): tenancy administration, nodes, quarantine and quota visibility.
Reads the directory and quota folds; sends the commands the tenancy service and the scheduler
decide on ``cmd.domain.*``, ``cmd.project.*``, ``cmd.user.*``, ``cmd.keypair.*``,
``cmd.resource_policy.*``, ``cmd.resource_group.*``, ``cmd.image.*``, ``cmd.node.*``,
``cmd.join_token.*``."""

from __future__ import annotations

from strawberry.tools import merge_types

from services.gateway.admin_api.cluster import ClusterMutation
from services.gateway.admin_api.join_tokens import JoinTokenMutation, JoinTokenQuery
from services.gateway.admin_api.keypairs import KeypairMutation
from services.gateway.admin_api.nodes import NodeMutation
from services.gateway.admin_api.quarantine import QuarantineMutation, QuarantineQuery
from services.gateway.admin_api.queries import AdminQuery as TenancyQuery
from services.gateway.admin_api.tenancy import TenancyMutation

AdminQuery = merge_types("AdminQuery", (TenancyQuery, QuarantineQuery, JoinTokenQuery))
AdminMutation = merge_types(
    "AdminMutation",
    (
        TenancyMutation,
        KeypairMutation,
        ClusterMutation,
        QuarantineMutation,
        NodeMutation,
        JoinTokenMutation,
    ),
)

__all__ = ["AdminMutation", "AdminQuery"]
