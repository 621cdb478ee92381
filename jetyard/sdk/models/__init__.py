"""What the SDK returns: the gateway's GraphQL types as frozen pydantic models (snake_case
attributes, camelCase on the wire; ``jetyard.sdk.wire``), one module per subject: sessions and
their apps, accounts (logins, administration, usage), and virtual folders."""

from __future__ import annotations

from jetyard.sdk.models.accounts import (
    AdminOutcome,
    DomainInfo,
    GpuDeviceUsage,
    IssuedKeypair,
    KeypairInfo,
    KeypairLimits,
    Limits,
    LoginResult,
    Node,
    ProjectInfo,
    Quota,
    QuotaSlot,
    ResourcePolicyInfo,
    StorageLimits,
    UsageRow,
    UserInfo,
    Viewer,
)
from jetyard.sdk.models.folders import (
    FOLDER_FIELDS,
    Share,
    VFolder,
)
from jetyard.sdk.models.sessions import (
    AppAccess,
    KernelOutput,
    Mount,
    Outcome,
    Resources,
    RunnableImage,
    ServicePort,
    Session,
    SessionMount,
    SessionSummary,
    StatusChange,
)

__all__ = [
    "FOLDER_FIELDS",
    "AdminOutcome",
    "AppAccess",
    "DomainInfo",
    "GpuDeviceUsage",
    "IssuedKeypair",
    "KernelOutput",
    "KeypairInfo",
    "KeypairLimits",
    "Limits",
    "LoginResult",
    "Mount",
    "Node",
    "Outcome",
    "ProjectInfo",
    "Quota",
    "QuotaSlot",
    "ResourcePolicyInfo",
    "Resources",
    "RunnableImage",
    "ServicePort",
    "Session",
    "SessionMount",
    "SessionSummary",
    "Share",
    "StatusChange",
    "StorageLimits",
    "UsageRow",
    "UserInfo",
    "VFolder",
    "Viewer",
]
