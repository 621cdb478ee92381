"""Events of the tenancy aggregates, written only by the tenancy service:
``ev.domain.<name>``, ``ev.project.<id>``, ``ev.user.<id>``, ``ev.keypair.<access key>``,
``ev.resource_policy.<kind>-<name>``, ``ev.resource_group.<name>``, ``ev.image.<id>``,
``ev.registry.<id>``.

No secret and no personal data in clear: a keypair's secret key lives encrypted in a KV bucket
and its event names the key id (a registry's password too: its events name the sealed value's
id); a user's email is here only as a keyed digest (for uniqueness
and login lookups) and sealed with a key of that person's own, which forgetting them deletes.

A resource group's v2 events hold its scheduling settings as one ``GroupScheduling``; v1
events spelled each out and are upcast on load.
"""

from __future__ import annotations

from events.catalogue import Event, Payload, event, upcaster
from schemas.fair_share import SHARE_DEFAULT
from schemas.images import PullPolicy
from schemas.resources import ResourceSlots
from schemas.service_ports import ServicePort
from schemas.session import SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import (
    CREATED_SCHEDULING,
    GroupScheduling,
    KeypairPolicyLimits,
    PolicyKind,
    Role,
    ScopeKind,
    SlotLimits,
    StoragePolicyLimits,
)

DOMAIN = AggregateType.DOMAIN
PROJECT = AggregateType.PROJECT
USER = AggregateType.USER
KEYPAIR = AggregateType.KEYPAIR
POLICY = AggregateType.RESOURCE_POLICY
GROUP = AggregateType.RESOURCE_GROUP
IMAGE = AggregateType.IMAGE
REGISTRY = AggregateType.REGISTRY

# ---- domain -------------------------------------------------------------------------------


@event("DomainCreated", DOMAIN)
class DomainCreated(Event):
    description: str = ""
    total_resource_slots: SlotLimits = SlotLimits()
    """Unnamed slots are unlimited at domain scope."""
    fair_share: int = SHARE_DEFAULT
    """Its share among its siblings for fair share (``schemas.fair_share``); 1 in events
    written before shares existed, as every share was then."""


@event("DomainModified", DOMAIN)
class DomainModified(Event):
    """The domain's settings, whole (not a difference)."""

    description: str
    total_resource_slots: SlotLimits
    fair_share: int = SHARE_DEFAULT
    """Its share among its siblings for fair share (``schemas.fair_share``); 1 in events
    written before shares existed, as every share was then."""


@event("DomainDeactivated", DOMAIN)
class DomainDeactivated(Event):
    reason: str = ""


@event("DomainReactivated", DOMAIN)
class DomainReactivated(Event):
    pass


# ---- project ------------------------------------------------------------------------------


@event("ProjectCreated", PROJECT)
class ProjectCreated(Event):
    domain: str
    name: str
    description: str = ""
    total_resource_slots: SlotLimits = SlotLimits()
    policy: str = "default"
    """Name of its project resource policy (``ev.resource_policy.project-<name>``)."""
    fair_share: int = SHARE_DEFAULT
    """Its share among its siblings for fair share (``schemas.fair_share``); 1 in events
    written before shares existed, as every share was then."""


@event("ProjectModified", PROJECT)
class ProjectModified(Event):
    description: str
    total_resource_slots: SlotLimits
    policy: str
    fair_share: int = SHARE_DEFAULT
    """Its share among its siblings for fair share (``schemas.fair_share``); 1 in events
    written before shares existed, as every share was then."""


@event("ProjectDeactivated", PROJECT)
class ProjectDeactivated(Event):
    reason: str = ""


@event("ProjectReactivated", PROJECT)
class ProjectReactivated(Event):
    pass


# ---- user ---------------------------------------------------------------------------------


@event("UserCreated", USER)
class UserCreated(Event):
    """``email_digest`` is the keyed digest the id derives from; ``email_sealed`` the email
    encrypted with this person's own key (``jy-people`` bucket)."""

    domain: str
    role: Role
    email_digest: str
    email_sealed: str
    policy: str = "default"
    projects: tuple[str, ...] = ()
    fair_share: int = SHARE_DEFAULT
    """Its share among its siblings for fair share (``schemas.fair_share``); 1 in events
    written before shares existed, as every share was then."""


@event("UserModified", USER)
class UserModified(Event):
    role: Role
    policy: str
    fair_share: int = SHARE_DEFAULT
    """Its share among its siblings for fair share (``schemas.fair_share``); 1 in events
    written before shares existed, as every share was then."""


@event("UserJoinedProject", USER)
class UserJoinedProject(Event):
    project_id: str


@event("UserLeftProject", USER)
class UserLeftProject(Event):
    project_id: str


@event("UserDefaultKeypairSet", USER)
class UserDefaultKeypairSet(Event):
    access_key: str


@event("UserDeactivated", USER)
class UserDeactivated(Event):
    reason: str = ""


@event("UserReactivated", USER)
class UserReactivated(Event):
    pass


# ---- keypair ------------------------------------------------------------------------------


@event("KeypairCreated", KEYPAIR)
class KeypairCreated(Event):
    """The secret key is not here: ``secret_key_id`` names its encrypted entry (and the
    master key it is sealed with)."""

    user_id: str
    domain: str
    secret_key_id: str
    policy: str = "default"
    rate_limit: int | None = None
    """Requests per minute; None: the gateway's default."""


@event("KeypairModified", KEYPAIR)
class KeypairModified(Event):
    policy: str
    rate_limit: int | None


@event("KeypairDeactivated", KEYPAIR)
class KeypairDeactivated(Event):
    reason: str = ""


@event("KeypairReactivated", KEYPAIR)
class KeypairReactivated(Event):
    pass


# ---- resource policies --------------------------------------------------------------------


@event("ResourcePolicyCreated", POLICY)
class ResourcePolicyCreated(Event):
    """``keypair`` is set for keypair policies, ``storage`` for user and project ones."""

    kind: PolicyKind
    name: str
    keypair: KeypairPolicyLimits | None = None
    storage: StoragePolicyLimits | None = None


@event("ResourcePolicyModified", POLICY)
class ResourcePolicyModified(Event):
    """The policy's limits, whole. They act at the next admission; nothing running is
    evicted by a lower limit."""

    keypair: KeypairPolicyLimits | None = None
    storage: StoragePolicyLimits | None = None


# ---- resource groups ----------------------------------------------------------------------


@event("ResourceGroupCreated", GROUP, version=2)
class ResourceGroupCreated(Event):
    description: str = ""
    allowed_session_types: tuple[SessionType, ...] = tuple(SessionType)
    scheduling: GroupScheduling = CREATED_SCHEDULING
    """A setting added to ``GroupScheduling`` later loads with its default."""


@event("ResourceGroupModified", GROUP, version=2)
class ResourceGroupModified(Event):
    """The group's settings, whole."""

    description: str
    allowed_session_types: tuple[SessionType, ...]
    scheduling: GroupScheduling


V1_SCHEDULING: Payload = {
    "queue_policy": "fifo",
    "agent_selection": "dispersed",
    "head_of_line": "backfill",
    "starvation_after_s": 300,
    "fragmentation_guard": True,
    "device_fill": "fill",
    "pending_timeout_s": None,
    "preemption": False,
    "preemption_grace_s": 60,
    "preempt_across_domains": False,
}
"""The settings v1 events spelled out at the top level, with what a v1 event that holds none
of a setting meant (it was written before the setting existed). Literals: v1 is closed, and a
later change of ``GroupScheduling``'s defaults must not rewrite what it meant."""


@upcaster("ResourceGroupCreated", from_version=1)
@upcaster("ResourceGroupModified", from_version=1)
def _scheduling_v1_to_v2(payload: Payload) -> Payload:
    scheduling = {name: payload.pop(name, meant) for name, meant in V1_SCHEDULING.items()}
    return {**payload, "scheduling": scheduling}


@event("ResourceGroupAssociated", GROUP)
class ResourceGroupAssociated(Event):
    """A domain, project or keypair may now use the group (the union of the three decides)."""

    scope: ScopeKind
    scope_id: str


@event("ResourceGroupDisassociated", GROUP)
class ResourceGroupDisassociated(Event):
    scope: ScopeKind
    scope_id: str


@event("ResourceGroupDeactivated", GROUP)
class ResourceGroupDeactivated(Event):
    reason: str = ""


@event("ResourceGroupReactivated", GROUP)
class ResourceGroupReactivated(Event):
    pass


# ---- images -------------------------------------------------------------------------------


@event("ImageRegistered", IMAGE)
class ImageRegistered(Event):
    name: str
    min_resources: ResourceSlots = ResourceSlots()
    max_resources: SlotLimits = SlotLimits()
    service_ports: tuple[ServicePort, ...] = ()
    """The apps its containers serve (``schemas.service_ports``); none in older events."""
    registry: str = ""
    """The id of the registry it was found in by a rescan ("": registered by hand, and then
    only nodes that hold it run it)."""
    digest: str = ""
    """Its manifest digest in the registry, when found by a rescan."""
    architecture: str = ""
    size_bytes: int = 0
    """Its layers and config, as the registry lists them (0: unknown)."""


@event("ImageScanned", IMAGE)
class ImageScanned(Event):
    """A rescan found the image changed in its registry: its tag moved to another digest, or
    its labels say other apps or minimums. Written only when something changed."""

    registry: str
    digest: str
    architecture: str = ""
    size_bytes: int = 0
    min_resources: ResourceSlots = ResourceSlots()
    service_ports: tuple[ServicePort, ...] = ()


@event("ImagePullPolicySet", IMAGE)
class ImagePullPolicySet(Event):
    """When nodes pull it; None: its resource group's policy decides."""

    policy: PullPolicy | None = None


@event("ImageModified", IMAGE)
class ImageModified(Event):
    min_resources: ResourceSlots
    max_resources: SlotLimits
    service_ports: tuple[ServicePort, ...] = ()
    """The apps after the change (older events predate service ports: none)."""


@event("ImageForgotten", IMAGE)
class ImageForgotten(Event):
    """No new session may use it; sessions already using it are unaffected."""

    reason: str = ""


# ---- registries ---------------------------------------------------------------------------


@event("RegistryAdded", REGISTRY)
class RegistryAdded(Event):
    """A registry images are found in and pulled from. Its password or token is never here:
    it is sealed with the secrets key in the ``jy-registry-secrets`` bucket under
    ``<registry id>.<secret_id>``, read only by the gateway, which hands it to an agent
    sealed to that agent's key."""

    name: str
    url: str
    kind: str = "docker"
    username: str = ""
    secret_id: str = ""
    """Names the sealed password ("": anonymous pulls)."""
    projects: tuple[str, ...] = ()
    """The project ids whose sessions may use its images (empty: every project)."""
    verify_tls: bool = True
    ca_pem: str = ""
    """A CA certificate (PEM) its TLS certificate is checked against, for a lab's own CA."""


@event("RegistryModified", REGISTRY)
class RegistryModified(Event):
    """Its settings after the change (the whole set); ``secret_id`` changes when its password
    or token was replaced."""

    url: str
    username: str = ""
    secret_id: str = ""
    projects: tuple[str, ...] = ()
    verify_tls: bool = True
    ca_pem: str = ""


@event("RegistryRemoved", REGISTRY)
class RegistryRemoved(Event):
    """No rescan or pull uses it again; its images stay registered, and nodes that hold them
    still run them."""

    reason: str = ""
