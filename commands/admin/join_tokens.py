"""Commands on join tokens (``cmd.join_token.*``), decided by the tenancy service:
``create`` and ``revoke`` by superadmins, ``join`` by the gateway for a machine that presented
a token at ``POST /join``.

No secret is carried: the gateway makes the token, shows it once, and sends only the SHA-256
digest of its secret (as the log keeps it)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from commands.admin.fields import Reason
from commands.messages import Command
from schemas.ids import Token
from schemas.subjects import AggregateType

JT = AggregateType.JOIN_TOKEN
MAX_EXPIRY_S = 30 * 24 * 3600

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
GroupName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
Hostname = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._-]+$")]


class CreateJoinToken(Command):
    """A token machines join with until ``expires_in_s`` from now, into ``resource_group``."""

    aggregate_type, verb = JT, "create"
    token_id: Token
    secret_sha256: Sha256
    expires_in_s: int = Field(default=3600, ge=1, le=MAX_EXPIRY_S)
    resource_group: GroupName = "default"
    note: Reason = ""


class RevokeJoinToken(Command):
    """No machine joins with the token from now on (those that joined stay)."""

    aggregate_type, verb = JT, "revoke"
    token_id: Token
    reason: Reason = "revoked by an operator"


class JoinNode(Command):
    """A machine presented the token: record its join (refused with the reason if the token
    is unknown, wrong, expired or revoked). Sent by the gateway, as itself."""

    aggregate_type, verb = JT, "join"
    token_id: Token
    secret_sha256: Sha256
    node_id: Token
    hostname: Hostname
    address: Annotated[str, Field(max_length=255)] = ""
