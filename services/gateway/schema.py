"""The GraphQL schema, assembled from the feature packages' parts: sessions (``sessions``),
administration (``admin_api``), logging in (``auth``), virtual folders (``folders``), usage
(``usage``), the operators' picture of the cluster (``cluster``), the audit trails
(``audit``) and model-serving endpoints (``endpoints``). Each part lives in its feature's
package and says what it reads and writes; every resolver authorises its caller
(``commands/authorisation.py``). With the query limits and the error codes of the core
(``limits``, ``errors``)."""

from __future__ import annotations

from strawberry.tools import merge_types

from services.gateway.admin_api.schema import AdminMutation, AdminQuery
from services.gateway.audit.log import AuditLogQuery
from services.gateway.audit.queries import AccessLogQuery, EventLogQuery
from services.gateway.auth.mutations import AccountMutation
from services.gateway.auth.read_only import ReadOnlyRoles
from services.gateway.cluster.queries import ClusterQuery
from services.gateway.cluster.subscriptions import ClusterSubscription
from services.gateway.endpoints.mutations import EndpointMutation
from services.gateway.endpoints.queries import EndpointQuery
from services.gateway.errors import ErrorCodes, JetyardSchema
from services.gateway.folders.data_plane import VFolderAccessMutation
from services.gateway.folders.mutations import VFolderMutation
from services.gateway.folders.queries import VFolderQuery
from services.gateway.images.registries import (
    RegistryMutation,
    RegistryQuery,
    RegistrySubscription,
)
from services.gateway.limits import WebSocketRateLimit, limits
from services.gateway.sessions.apps import AppMutation
from services.gateway.sessions.mutations import SessionMutation
from services.gateway.sessions.queries import SessionQuery
from services.gateway.sessions.subscriptions import (
    OutputSubscription,
    PullSubscription,
    SessionsSubscription,
    StatusSubscription,
)
from services.gateway.usage.queries import UsageQuery

Query = merge_types(
    "Query",
    (
        SessionQuery,
        AdminQuery,
        AccessLogQuery,
        VFolderQuery,
        UsageQuery,
        ClusterQuery,
        EventLogQuery,
        AuditLogQuery,
        RegistryQuery,
        EndpointQuery,
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
        RegistryMutation,
        EndpointMutation,
    ),
)
schema = JetyardSchema(
    query=Query,
    mutation=Mutation,
    subscription=merge_types(
        "Subscription",
        (
            StatusSubscription,
            OutputSubscription,
            ClusterSubscription,
            SessionsSubscription,
            RegistrySubscription,
            PullSubscription,
        ),
    ),
    extensions=[*limits(), WebSocketRateLimit, ReadOnlyRoles, ErrorCodes],
)
