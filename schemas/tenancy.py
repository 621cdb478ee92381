"""Tenancy vocabulary: roles, who owns a session, policy limits and the ids of tenancy
aggregates and quota scopes. Pure values; the aggregates live in ``commands``.

Ids that become subject tokens are derived here, once: a domain is its name, a project and an
image are uuid5s of their names, a user is a uuid5 of a keyed digest of the email (so a second
user with the same email is a create-once conflict, and the email itself never enters a
subject or an event), a keypair is its access key.
"""

from __future__ import annotations

import hashlib
import hmac
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from schemas.fair_share import FairShareSettings
from schemas.ids import derived_id
from schemas.images import PullPolicy
from schemas.resources import ResourceSlots
from schemas.sandbox import SAFE_SANDBOX, Sandbox

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$"
"""Names that are also ids (domains, policies, resource groups): subject-safe and short."""

SESSION_PRIORITY_DEFAULT = 10
SESSION_PRIORITY_MAX = 100
MAX_STARVATION_S = 7 * 24 * 3600
"""The longest a group may let its blocked head wait before it reserves a node (a week)."""


class Role(StrEnum):
    SUPERADMIN = "superadmin"
    ADMIN = "admin"  # a domain's administrator
    USER = "user"
    MONITOR = "monitor"  # reads, never acts
    AUDITOR = "auditor"  # reads its domain and its domain's log, never acts
    SUPERAUDITOR = "superauditor"  # reads every domain and the whole log, never acts


READ_ONLY_ROLES = frozenset({Role.MONITOR, Role.AUDITOR, Role.SUPERAUDITOR})
"""Roles that read and act on nothing: every mutation but logging in and out is refused."""


class ScopeKind(StrEnum):
    """The scopes a session's slots are reserved on, narrowest first."""

    KEYPAIR = "keypair"
    USER = "user"
    PROJECT = "project"
    DOMAIN = "domain"


class PolicyKind(StrEnum):
    KEYPAIR = "keypair"
    USER = "user"
    PROJECT = "project"


class DefaultForUnspecified(StrEnum):
    """What a slot the policy does not name is limited to: nothing, or no limit."""

    LIMITED = "limited"
    UNLIMITED = "unlimited"


class QueuePolicy(StrEnum):
    FIFO = "fifo"
    LIFO = "lifo"
    DRF = "drf"
    FAIR_SHARE = "fair-share"
    """Owners who used the group least lately (decayed, weighed by their shares) go first:
    ``placement.fairshare``."""


class AgentSelection(StrEnum):
    CONCENTRATED = "concentrated"
    DISPERSED = "dispersed"
    ROUND_ROBIN = "roundrobin"


class HeadOfLine(StrEnum):
    """What the sessions behind a session that fits nowhere do (see docs/scheduling.md)."""

    BLOCK = "block"
    """Wait behind it: strict order, nothing overtakes."""
    BACKFILL = "backfill"
    """Go ahead where they fit; once the head has waited ``starvation_after_s`` it holds a
    reservation on the node closest to fitting it, and nothing else is placed there."""


class DeviceFill(StrEnum):
    """How fractional GPU shares are laid over a node's devices."""

    FILL = "fill"
    """The fullest device that still fits first (keeps whole devices free)."""
    EVENLY = "evenly"
    """The emptiest device first (spreads load)."""


MAX_PENDING_TIMEOUT_S = 366 * 24 * 3600


class GroupScheduling(BaseModel):
    """How one resource group orders its queue and places sessions on its nodes: each setting
    declared once, here. The commands and events embed this model; the GraphQL arguments and
    fields (``services/gateway/admin_api/group_settings.py``) and the table in
    ``docs/tenancy.md`` (checked by a test) follow from its fields. See docs/architecture.md,
    "Adding a resource group setting".

    A setting's default is what a group stored before the setting existed means (its events
    hold none and load with the default), so a default never changes once released; a new
    group takes ``CREATED_SCHEDULING`` where the admin names nothing.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    queue_policy: QueuePolicy = Field(
        default=QueuePolicy.FIFO, description="the order of the queue after priority"
    )
    agent_selection: AgentSelection = Field(
        default=AgentSelection.CONCENTRATED,
        description="which of the nodes a session fits on takes it",
    )
    head_of_line: HeadOfLine = Field(
        default=HeadOfLine.BACKFILL,
        description="what the sessions behind a head that fits nowhere do",
    )
    starvation_after_s: int = Field(
        default=300,
        ge=0,
        le=MAX_STARVATION_S,
        description="how long a blocked head waits before it reserves a node (backfill)",
    )
    fragmentation_guard: bool = Field(
        default=True,
        description="a fractional GPU request is never split over more devices than it needs",
    )
    device_fill: DeviceFill = Field(
        default=DeviceFill.FILL, description="how fractional GPU shares are laid over devices"
    )
    pending_timeout_s: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PENDING_TIMEOUT_S,
        description="a session still waiting this long after its request is cancelled "
        "(never when unset)",
    )
    preemption: bool = Field(
        default=False,
        description="a waiting session may stop lower-priority ones when that is the only "
        "way to place it (docs/scheduling.md)",
    )
    preemption_grace_s: int = Field(
        default=60,
        ge=0,
        le=MAX_STARVATION_S,
        description="how long a session waits for room to come by itself before it preempts",
    )
    preempt_across_domains: bool = Field(
        default=False, description="victims may belong to another domain"
    )
    wait_for_larger_nodes: bool = Field(
        default=False,
        description="a request no node of the group could hold even idle waits for a larger "
        "node to join, instead of being refused at creation (docs/scheduling.md)",
    )
    pull_policy: PullPolicy = Field(
        default=PullPolicy.IF_NOT_PRESENT,
        description="when a node pulls a registry image its sessions run (an image's own "
        "policy wins; docs/images.md)",
    )
    image_locality: bool = Field(
        default=True,
        description="a session goes to a node that already holds its image when one fits, "
        "before any node that would have to pull it",
    )
    sandbox: Sandbox = Field(
        default=SAFE_SANDBOX,
        description="what the group's sessions' containers may do (schemas/sandbox.py); "
        "each allocation carries it to its node",
    )
    fair_share: FairShareSettings = Field(
        default=FairShareSettings(),
        description="how the fair-share queue policy counts usage (schemas/fair_share.py)",
    )


CREATED_SCHEDULING = GroupScheduling(agent_selection=AgentSelection.DISPERSED)
"""A new group's settings where the admin names none (groups have always dispersed). A group
no admin has created (``default`` before bootstrap) schedules with ``GroupScheduling()``."""


SLOT_NAMES = ("cpu", "memory", "gpu")
"""The slot names limits and reasons use, in the order ResourceSlots holds them."""


class SlotLimits(BaseModel):
    """A limit per slot; None means the slot is not named (see ``DefaultForUnspecified``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    cpu_milli: int | None = Field(default=None, ge=0)
    memory_bytes: int | None = Field(default=None, ge=0)
    gpu_hundredths: int | None = Field(default=None, ge=0)

    def limit(self, slot: str, unspecified: DefaultForUnspecified) -> int | None:
        """The limit of ``slot`` (a SLOT_NAMES entry) in quanta; None is no limit."""
        value: int | None = getattr(self, _FIELD[slot])
        if value is None and unspecified is DefaultForUnspecified.LIMITED:
            return 0
        return value

    def over(
        self, used: ResourceSlots, unspecified: DefaultForUnspecified
    ) -> list[tuple[str, int, int]]:
        """(slot, used, limit) for every slot ``used`` exceeds, in SLOT_NAMES order."""
        found = []
        for slot in SLOT_NAMES:
            limit = self.limit(slot, unspecified)
            amount: int = getattr(used, _FIELD[slot])
            if limit is not None and amount > limit:
                found.append((slot, amount, limit))
        return found


_FIELD = {"cpu": "cpu_milli", "memory": "memory_bytes", "gpu": "gpu_hundredths"}
UNLIMITED = SlotLimits()


class KeypairPolicyLimits(BaseModel):
    """A keypair resource policy (Backend.AI's ``keypair_resource_policies``). None: no limit."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    total_resource_slots: SlotLimits = UNLIMITED
    default_for_unspecified: DefaultForUnspecified = DefaultForUnspecified.UNLIMITED
    max_concurrent_sessions: int | None = Field(default=None, ge=0)
    max_pending_sessions: int | None = Field(default=None, ge=0)
    max_pending_resource_slots: SlotLimits = UNLIMITED
    """Unnamed slots are never limited here: pending slots are a queue bound, not a grant."""
    max_containers_per_session: int = Field(default=1, ge=1)
    max_session_lifetime_s: int | None = Field(default=None, ge=1)
    idle_timeout_s: int | None = Field(default=None, ge=1)
    idle_utilization_threshold_pct: int | None = Field(default=None, ge=1, le=100)
    """With ``idle_timeout_s``: an interactive session whose CPU and GPU utilisation stayed
    under this many percent for that long is idle too, whatever its traffic."""
    max_priority: int = Field(default=SESSION_PRIORITY_DEFAULT, ge=0, le=SESSION_PRIORITY_MAX)


class StoragePolicyLimits(BaseModel):
    """User and project resource policies: virtual folder limits (enforced by storage)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    max_vfolder_count: int | None = Field(default=None, ge=0)
    max_quota_scope_size_bytes: int | None = Field(default=None, ge=0)


class SessionOwner(BaseModel):
    """Whose a session is: every scope its slots are reserved on. Set by the gateway from the
    authenticated principal, never from what a client claims."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    access_key: str
    user_id: str
    project_id: str
    domain: str

    def scopes(self) -> tuple[tuple[ScopeKind, str], ...]:
        return (
            (ScopeKind.KEYPAIR, self.access_key),
            (ScopeKind.USER, self.user_id),
            (ScopeKind.PROJECT, self.project_id),
            (ScopeKind.DOMAIN, self.domain),
        )


# ---- ids ----------------------------------------------------------------------------------


def project_id_for(domain: str, name: str) -> str:
    """Project names are unique within a domain: the id is derived from both."""
    return derived_id("project", domain, name)


def image_id_for(name: str) -> str:
    return derived_id("image", name)


def registry_id_for(name: str) -> str:
    return derived_id("registry", name)


def normalise_email(email: str) -> str:
    return email.strip().lower()


def email_digest(email: str, key: bytes) -> str:
    """A keyed digest of an email: lets the log say "this email is taken" and find a login
    without holding the email. The key comes from settings (the secrets key)."""
    return hmac.new(key, normalise_email(email).encode(), hashlib.sha256).hexdigest()


def user_id_for(digest: str) -> str:
    """A user's id from the digest of their email: one user per email, by construction."""
    return derived_id("user", digest)


def policy_id_for(kind: PolicyKind, name: str) -> str:
    return f"{kind.value}-{name}"


def quota_id_for(kind: ScopeKind, scope_id: str) -> str:
    """The ``quota`` aggregate of one scope, e.g. ``project-<uuid>``."""
    return f"{kind.value}-{scope_id}"
