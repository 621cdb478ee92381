"""A join token (``ev.join_token.<token id>``), decided by the tenancy service: what a new
machine presents at the gateway's ``POST /join`` to get the cluster's settings. Only the
SHA-256 digest of its secret is kept (``events.domain.join``); the secret was shown once.

The rules a join is checked by are here, once: the gateway answers with the reason this
module gives (unknown, expired, revoked). Pure: ``now`` is passed in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from commands.errors import DomainError
from events.domain.join import JoinTokenCreated, JoinTokenRevoked, NodeJoined
from schemas.ids import new_id
from schemas.subjects import AggregateType

PREFIX = "jyjoin"
SECRET_BYTES = 32  # 256 bits


class JoinRefusedError(DomainError):
    """The token does not let a machine join now; the message says why."""


class UnknownJoinTokenError(JoinRefusedError):
    """No such token, or the secret does not match (the two are not told apart)."""


def unknown() -> UnknownJoinTokenError:
    return UnknownJoinTokenError("unknown join token")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_token() -> tuple[str, str, str]:
    """A fresh token: (token id, secret, the token as given to people ``jyjoin_<id>_<secret>``).
    The id holds no ``_`` (a uuid), so the token splits back unambiguously."""
    token_id, secret = new_id(), secrets.token_urlsafe(SECRET_BYTES)
    return token_id, secret, f"{PREFIX}_{token_id}_{secret}"


def parse(token: str) -> tuple[str, str]:
    """(token id, secret) of a token as given to people; ``UnknownJoinTokenError`` if it is
    not shaped like one."""
    prefix, _, rest = token.strip().partition("_")
    token_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not token_id or not secret or len(token_id) > 64:
        raise unknown()
    return token_id, secret


class JoinToken(Aggregate):
    aggregate_type = AggregateType.JOIN_TOKEN

    class State(BaseModel):
        secret_sha256: str
        created_at: datetime
        expires_at: datetime
        resource_group: str
        note: str
        revoked_at: datetime | None
        nodes: tuple[str, ...]

    def __init__(self) -> None:
        self.secret_sha256 = ""
        self.created_at = datetime.min
        self.expires_at = datetime.min
        self.resource_group = ""
        self.note = ""
        self.revoked_at: datetime | None = None
        self.nodes: tuple[str, ...] = ()
        """The nodes that joined with it, in order, once each."""

    @classmethod
    def create(
        cls, token_id: str, secret_sha256: str, expires_at: datetime, resource_group: str,
        note: str, now: datetime,
    ) -> JoinToken:  # fmt: skip
        return cls._create(
            cls.Made, id=token_id, timestamp=now, secret_sha256=secret_sha256,
            expires_at=expires_at, resource_group=resource_group, note=note,
        )  # fmt: skip

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at

    def check(self, secret_sha256: str, now: datetime) -> None:
        """Raise ``JoinRefusedError`` saying why, unless a machine may join with it now. The
        digests are compared in constant time; a wrong secret reads as an unknown token."""
        if not hmac.compare_digest(self.secret_sha256.encode(), secret_sha256.encode()):
            raise unknown()
        if self.revoked_at is not None:
            raise JoinRefusedError(f"join token {self.id} was revoked")
        if self.expired(now):
            raise JoinRefusedError(
                f"join token {self.id} expired at {self.expires_at.isoformat(timespec='seconds')}"
            )

    def join(
        self, secret_sha256: str, node_id: str, hostname: str, address: str, now: datetime
    ) -> bool:
        """Record that ``node_id`` joined with it (every join is recorded: the audit trail)."""
        self.check(secret_sha256, now)
        return self._trigger(self.Joined, now, node_id=node_id, hostname=hostname, address=address)

    def revoke(self, reason: str, now: datetime) -> bool:
        if self.revoked_at is not None:
            return False
        return self._trigger(self.Revoked, now, reason=reason)

    class Made(JoinTokenCreated, Aggregate.Created):
        def apply(self, token: JoinToken) -> None:
            token.secret_sha256 = self.secret_sha256
            token.created_at = self.timestamp
            token.expires_at = self.expires_at
            token.resource_group = self.resource_group
            token.note = self.note

    class Revoked(JoinTokenRevoked, Aggregate.Event):
        def apply(self, token: JoinToken) -> None:
            token.revoked_at = self.timestamp

    class Joined(NodeJoined, Aggregate.Event):
        def apply(self, token: JoinToken) -> None:
            if self.node_id not in token.nodes:
                token.nodes = (*token.nodes, self.node_id)
