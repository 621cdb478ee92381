"""The GraphQL schema: the session queries, mutations and subscription, merged with the admin,
account and virtual folder parts. Each part lives in its own module (``session_queries``,
``session_mutations``, ``app_mutations``, ``session_subscription``, ``admin_schema``,
``account_schema``, ``vfolder_queries``, ``vfolder_mutations``, ``vfolder_access``) and says
what it reads and writes; every resolver authorises its caller (``commands/authorisation.py``)."""

from __future__ import annotations

from strawberry.tools import merge_types

from services.gateway.account_schema import AccountMutation, AccountQuery
from services.gateway.admin_schema import AdminMutation, AdminQuery
from services.gateway.app_mutations import AppMutation
from services.gateway.errors import ErrorCodes, JetyardSchema
from services.gateway.limits import limits
from services.gateway.output_subscription import OutputSubscription
from services.gateway.session_mutations import SessionMutation
from services.gateway.session_queries import SessionQuery
from services.gateway.session_subscription import Subscription
from services.gateway.vfolder_access import VFolderAccessMutation
from services.gateway.vfolder_mutations import VFolderMutation
from services.gateway.vfolder_queries import VFolderQuery
from services.gateway.ws_limits import WebSocketRateLimit

Query = merge_types("Query", (SessionQuery, AdminQuery, AccountQuery, VFolderQuery))
Mutation = merge_types(
    "Mutation",
    (
        SessionMutation,
        AppMutation,
        AdminMutation,
        AccountMutation,
        VFolderMutation,
        VFolderAccessMutation,
    ),
)
schema = JetyardSchema(
    query=Query,
    mutation=Mutation,
    subscription=merge_types("Subscription", (Subscription, OutputSubscription)),
    extensions=[*limits(), WebSocketRateLimit, ErrorCodes],
)
