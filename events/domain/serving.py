"""Events of the ``endpoint`` aggregate (``ev.endpoint.<endpoint id>``), written only by the
serving controller (``services/serving``): a model-serving endpoint, its numbered revisions,
its replicas (each one inference session the controller asks the scheduler for) with their
lifecycle, health and traffic kept apart, every scaling, rollout and health decision with its
reason, and its bearer tokens (only the SHA-256 digest of a token's secret is kept).

The app proxy folds them (with ``ev.session.*`` and ``ev.agent.*`` for each replica's address)
into its endpoint routes; a revoked token is refused once the proxy has folded its revocation.
"""

from __future__ import annotations

from pydantic import AwareDatetime

from events.catalogue import Event, event
from schemas.serving import (
    ReplicaHealth,
    Revision,
    Rollout,
    ScaleSource,
    Scaling,
    ScalingMetric,
)
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner

ENDPOINT = AggregateType.ENDPOINT


@event("EndpointCreated", ENDPOINT)
class EndpointCreated(Event):
    """An endpoint was made (or made again under a name whose endpoint was destroyed), with
    its first revision (number ``revision``) and ``replicas`` desired."""

    name: str
    owner: SessionOwner
    """Whose replicas' sessions are (their quota is charged to this keypair, user, project and
    domain), as the gateway authenticated the creator."""
    revision: int = 1
    spec: Revision
    replicas: int
    scaling: Scaling
    rollout: Rollout = Rollout()
    open_to_public: bool = False
    """True: the endpoint's URL answers without a token."""
    incarnation: str = ""
    """The id of the command that made it: its replicas' session ids derive from it and the
    replica number (``schemas.serving.replica_command_id``), so endpoints of one name in two
    installations on one container engine never share a session, nor a container name."""


@event("EndpointModified", ENDPOINT)
class EndpointModified(Event):
    """Its scaling bounds and rules, rollout bounds or openness changed (the values as they
    are now, whole)."""

    scaling: Scaling
    rollout: Rollout
    open_to_public: bool


@event("EndpointScaled", ENDPOINT)
class EndpointScaled(Event):
    """The desired replica count changed, and why: a person (``manual``), a rule (its index,
    metric and the value that crossed its threshold), a request while at zero (``wake``) or a
    change of bounds (``bounds``)."""

    replicas: int
    previous: int
    source: ScaleSource
    reason: str
    rule: int | None = None
    metric: ScalingMetric | None = None
    value: float | None = None


@event("EndpointRevisionAdded", ENDPOINT)
class EndpointRevisionAdded(Event):
    """A new revision (immutable, numbered from 1 up): the controller rolls the replicas to it
    within the rollout bounds."""

    revision: int
    spec: Revision
    reason: str = ""


@event("EndpointRolloutFinished", ENDPOINT)
class EndpointRolloutFinished(Event):
    """Every replica now runs ``revision``: it is the endpoint's current one."""

    revision: int


@event("EndpointRolledBack", ENDPOINT)
class EndpointRolledBack(Event):
    """Revision ``revision`` never became healthy (``reason`` holds the probe's last answer):
    the replicas go back to ``to_revision``, which is current again."""

    revision: int
    to_revision: int
    reason: str


@event("ReplicaRequested", ENDPOINT)
class ReplicaRequested(Event):
    """The controller asked for replica number ``replica`` (numbers are never reused): an
    inference session ``session_id`` (``session_id_for(replica_command_id(...))``) running
    ``revision``. PROVISIONING, health NOT_CHECKED, traffic INACTIVE."""

    replica: int
    revision: int
    session_id: str
    reason: str = ""


@event("ReplicaHealthChanged", ENDPOINT)
class ReplicaHealthChanged(Event):
    """A replica's probes changed its health: HEALTHY after a passing probe (a PROVISIONING
    replica becomes RUNNING and ACTIVE with its first), UNHEALTHY after ``failures`` probes
    failed in a row (out of the rotation at once). ``reason``: the probe's answer
    (``GET /health: 200``, ``GET /health: 503 Service Unavailable``, ``connection refused``)."""

    replica: int
    health: ReplicaHealth
    reason: str


@event("ReplicaRetired", ENDPOINT)
class ReplicaRetired(Event):
    """The replica leaves the rotation and its session is ended (TERMINATING): scaled in,
    replaced by a newer revision, unhealthy for too long, or its endpoint destroyed."""

    replica: int
    reason: str


@event("ReplicaEnded", ENDPOINT)
class ReplicaEnded(Event):
    """The replica is gone: TERMINATED (its session ended after it was retired, or by
    itself, or its node was lost), or FAILED (``failed``: it never became healthy within its
    warm-up, or its session could not start). ``reason`` says which, with the probe's last
    answer or the session's own reason."""

    replica: int
    failed: bool
    reason: str


@event("EndpointTokenIssued", ENDPOINT)
class EndpointTokenIssued(Event):
    """A bearer token for the endpoint's URL, valid until ``expires_at`` unless revoked. Only
    the SHA-256 of its secret is kept; the token was shown once."""

    token_id: str
    secret_sha256: str
    expires_at: AwareDatetime
    note: str = ""


@event("EndpointTokenRevoked", ENDPOINT)
class EndpointTokenRevoked(Event):
    """The token is refused from now on, by every app proxy that has folded this."""

    token_id: str
    reason: str = ""


@event("EndpointDestroyRequested", ENDPOINT)
class EndpointDestroyRequested(Event):
    """DESTROYING: every replica is retired; its URL answers 410."""

    reason: str = ""


@event("EndpointDestroyed", ENDPOINT)
class EndpointDestroyed(Event):
    """Every replica ended: the endpoint is gone; its name may be used again."""


@event("EndpointRecreated", ENDPOINT)
class EndpointRecreated(EndpointCreated):
    """An endpoint was made under the name of one that was destroyed (the same aggregate: its
    replica numbers go on from where they were; tokens of the old one stay revoked)."""
