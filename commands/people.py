"""People: the ``User`` (``ev.user.<id>``) and ``Keypair`` (``ev.keypair.<access key>``)
aggregates, decided by the tenancy service.

A user's id derives from the keyed digest of their email, so a second user with the same
email is refused by the create-once guard; the email itself is only held sealed. A keypair
names its encrypted secret by id, never the secret.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from events.domain.tenancy import (
    KeypairCreated,
    KeypairDeactivated,
    KeypairModified,
    KeypairReactivated,
    UserCreated,
    UserDeactivated,
    UserDefaultKeypairSet,
    UserJoinedProject,
    UserLeftProject,
    UserModified,
    UserReactivated,
)
from schemas.fair_share import SHARE_DEFAULT
from schemas.subjects import AggregateType
from schemas.tenancy import Role, user_id_for


class User(Aggregate):
    aggregate_type = AggregateType.USER

    class State(BaseModel):
        domain: str
        role: Role
        email_digest: str
        email_sealed: str
        policy: str
        projects: frozenset[str]
        default_access_key: str | None
        active: bool
        fair_share: int = SHARE_DEFAULT

    def __init__(self) -> None:
        self.domain = ""
        self.role = Role.USER
        self.email_digest = ""
        self.email_sealed = ""
        self.policy = "default"
        # Replaced on change, never changed in place: working copies share nothing.
        self.projects: frozenset[str] = frozenset()
        self.default_access_key: str | None = None
        self.active = True
        self.fair_share = SHARE_DEFAULT

    @classmethod
    def create(
        cls, domain: str, role: Role, email_digest: str, email_sealed: str, policy: str,
        projects: Iterable[str], now: datetime, fair_share: int = SHARE_DEFAULT,
    ) -> User:  # fmt: skip
        return cls._create(
            cls.Created, id=user_id_for(email_digest), timestamp=now, domain=domain, role=role,
            email_digest=email_digest, email_sealed=email_sealed, policy=policy,
            projects=tuple(dict.fromkeys(projects)), fair_share=fair_share,
        )  # fmt: skip

    def modify(self, role: Role, policy: str, now: datetime, fair_share: int | None = None) -> bool:
        """``fair_share`` None keeps the user's."""
        share = self.fair_share if fair_share is None else fair_share
        if (role, policy, share) == (self.role, self.policy, self.fair_share):
            return False
        return self._trigger(self.Modified, now, role=role, policy=policy, fair_share=share)

    def join(self, project_id: str, now: datetime) -> bool:
        if project_id in self.projects:
            return False
        return self._trigger(self.JoinedProject, now, project_id=project_id)

    def leave(self, project_id: str, now: datetime) -> bool:
        if project_id not in self.projects:
            return False
        return self._trigger(self.LeftProject, now, project_id=project_id)

    def set_default_keypair(self, access_key: str, now: datetime) -> bool:
        if access_key == self.default_access_key:
            return False
        return self._trigger(self.DefaultKeypairSet, now, access_key=access_key)

    def deactivate(self, reason: str, now: datetime) -> bool:
        return self.active and self._trigger(self.Deactivated, now, reason=reason)

    def reactivate(self, now: datetime) -> bool:
        return not self.active and self._trigger(self.Reactivated, now)

    class Created(UserCreated, Aggregate.Created):
        def apply(self, user: User) -> None:
            user.domain = self.domain
            user.role = self.role
            user.email_digest = self.email_digest
            user.email_sealed = self.email_sealed
            user.policy = self.policy
            user.projects = frozenset(self.projects)
            user.fair_share = self.fair_share

    class Modified(UserModified, Aggregate.Event):
        def apply(self, user: User) -> None:
            user.role = self.role
            user.policy = self.policy
            user.fair_share = self.fair_share

    class JoinedProject(UserJoinedProject, Aggregate.Event):
        def apply(self, user: User) -> None:
            user.projects = user.projects | {self.project_id}

    class LeftProject(UserLeftProject, Aggregate.Event):
        def apply(self, user: User) -> None:
            user.projects = user.projects - {self.project_id}

    class DefaultKeypairSet(UserDefaultKeypairSet, Aggregate.Event):
        def apply(self, user: User) -> None:
            user.default_access_key = self.access_key

    class Deactivated(UserDeactivated, Aggregate.Event):
        def apply(self, user: User) -> None:
            user.active = False

    class Reactivated(UserReactivated, Aggregate.Event):
        def apply(self, user: User) -> None:
            user.active = True


class Keypair(Aggregate):
    aggregate_type = AggregateType.KEYPAIR

    class State(BaseModel):
        user_id: str
        domain: str
        secret_key_id: str
        policy: str
        rate_limit: int | None
        active: bool

    def __init__(self) -> None:
        self.user_id = ""
        self.domain = ""
        self.secret_key_id = ""
        self.policy = "default"
        self.rate_limit: int | None = None
        self.active = True

    @classmethod
    def create(
        cls, access_key: str, user_id: str, domain: str, secret_key_id: str, policy: str,
        rate_limit: int | None, now: datetime,
    ) -> Keypair:  # fmt: skip
        return cls._create(
            cls.Created, id=access_key, timestamp=now, user_id=user_id, domain=domain,
            secret_key_id=secret_key_id, policy=policy, rate_limit=rate_limit,
        )  # fmt: skip

    def modify(self, policy: str, rate_limit: int | None, now: datetime) -> bool:
        if (policy, rate_limit) == (self.policy, self.rate_limit):
            return False
        return self._trigger(self.Modified, now, policy=policy, rate_limit=rate_limit)

    def deactivate(self, reason: str, now: datetime) -> bool:
        return self.active and self._trigger(self.Deactivated, now, reason=reason)

    def reactivate(self, now: datetime) -> bool:
        return not self.active and self._trigger(self.Reactivated, now)

    class Created(KeypairCreated, Aggregate.Created):
        def apply(self, keypair: Keypair) -> None:
            keypair.user_id = self.user_id
            keypair.domain = self.domain
            keypair.secret_key_id = self.secret_key_id
            keypair.policy = self.policy
            keypair.rate_limit = self.rate_limit

    class Modified(KeypairModified, Aggregate.Event):
        def apply(self, keypair: Keypair) -> None:
            keypair.policy = self.policy
            keypair.rate_limit = self.rate_limit

    class Deactivated(KeypairDeactivated, Aggregate.Event):
        def apply(self, keypair: Keypair) -> None:
            keypair.active = False

    class Reactivated(KeypairReactivated, Aggregate.Event):
        def apply(self, keypair: Keypair) -> None:
            keypair.active = True
