"""What the SDK returns: the gateway's GraphQL types as frozen pydantic models (snake_case
attributes, camelCase on the wire; ``jetyard.sdk.wire``), one module per subject: sessions and
their apps, accounts (logins, administration, usage), virtual folders, and registries and
image pulls."""

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
from jetyard.sdk.models.images import (
    ImagePull,
    PullLayer,
    RegistryInfo,
    RescanProgress,
    RescanResult,
    SkippedTag,
)
from jetyard.sdk.models.sessions import (
    AppAccess,
    FairShareFactors,
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
    "FairShareFactors",
    "GpuDeviceUsage",
    "ImagePull",
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
    "PullLayer",
    "Quota",
    "QuotaSlot",
    "RegistryInfo",
    "RescanProgress",
    "RescanResult",
    "ResourcePolicyInfo",
    "Resources",
    "RunnableImage",
    "ServicePort",
    "Session",
    "SessionMount",
    "SessionSummary",
    "Share",
    "SkippedTag",
    "StatusChange",
    "StorageLimits",
    "UsageRow",
    "UserInfo",
    "VFolder",
    "Viewer",
]
