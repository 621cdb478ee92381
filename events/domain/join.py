"""Events of the ``join_token`` aggregate (``ev.join_token.<token id>``), written only by the
tenancy service: a token a new machine joins the cluster with, and every join made with it.

The token's secret never enters the log: only its SHA-256 digest does (a 256-bit random secret
cannot be found back from its digest), and the gateway compares digests in constant time."""

from __future__ import annotations

from pydantic import AwareDatetime

from events.catalogue import Event, event
from schemas.subjects import AggregateType

JOIN_TOKEN = AggregateType.JOIN_TOKEN


@event("JoinTokenCreated", JOIN_TOKEN)
class JoinTokenCreated(Event):
    """A superadmin made a join token; machines may join with it until ``expires_at``."""

    secret_sha256: str
    """Hex SHA-256 of the token's secret (the secret itself was shown once, never stored)."""
    expires_at: AwareDatetime
    resource_group: str = "default"
    """The resource group the machines joining with it register in."""
    note: str = ""
    """What the administrator said it is for."""


@event("JoinTokenRevoked", JOIN_TOKEN)
class JoinTokenRevoked(Event):
    """No machine joins with the token from now on; machines that joined with it stay."""

    reason: str = ""


@event("NodeJoined", JOIN_TOKEN)
class NodeJoined(Event):
    """A machine exchanged the token for the cluster's settings (``POST /join``), so an auditor
    sees which machine joined with which token. Its agent registers as ``node_id`` next."""

    node_id: str
    hostname: str
    address: str = ""
    """The address the request came from, as the gateway saw it."""
