"""The GraphQL schema: the session queries, mutations and subscription, merged with the admin,
account, virtual folder and usage parts. Each part lives in its own module (``session_queries``,
``session_mutations``, ``app_mutations``, ``session_subscription``, ``admin_schema``,
``account_schema``, ``vfolder_queries``, ``vfolder_mutations``, ``vfolder_access``,
``usage_queries``, and for the operators' console ``cluster_queries``,
``cluster_subscription``, ``event_log_queries``) and says what it reads and writes; every
resolver authorises its caller (``commands/authorisation.py``)."""

from __future__ import annotations

from strawberry.tools import merge_types

from services.gateway.account_schema import AccountMutation, AccountQuery
from services.gateway.admin_schema import AdminMutation, AdminQuery
from services.gateway.app_mutations import AppMutation
from services.gateway.cluster_queries import ClusterQuery
from services.gateway.cluster_subscription import ClusterSubscription
from services.gateway.errors import ErrorCodes, JetyardSchema
from services.gateway.event_log_queries import EventLogQuery
from services.gateway.limits import limits
from services.gateway.output_subscription import OutputSubscription
from services.gateway.session_mutations import SessionMutation
from services.gateway.session_queries import SessionQuery
from services.gateway.session_subscription import Subscription
from services.gateway.sessions_subscription import SessionsSubscription
from services.gateway.usage_queries import UsageQuery
from services.gateway.vfolder_access import VFolderAccessMutation
from services.gateway.vfolder_mutations import VFolderMutation
from services.gateway.vfolder_queries import VFolderQuery
from services.gateway.ws_limits import WebSocketRateLimit

Query = merge_types(
    "Query",
    (
        SessionQuery,
        AdminQuery,
        AccountQuery,
        VFolderQuery,
        UsageQuery,
        ClusterQuery,
        EventLogQuery,
    ),
)
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
    subscription=merge_types(
        "Subscription",
        (Subscription, OutputSubscription, ClusterSubscription, SessionsSubscription),
    ),
    extensions=[*limits(), WebSocketRateLimit, ErrorCodes],
)
