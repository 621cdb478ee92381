"""The authentication tests' fake directory (the ``Lookup`` protocol the Authenticator reads)
and their constants: the host, the email digest key, cheap password hashing."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from argon2 import PasswordHasher

from commands.authorisation import Principal
from schemas.principal import Actor, ActorKind

HOST = "gateway.test:8080"
EMAIL_KEY = b"email-digest-key-for-tests-only!"
# Cheap parameters: the tests check behaviour, not the cost of a hash.
CHEAP = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


@dataclass
class FakeKeypair:
    user_id: str
    active: bool = True


@dataclass
class FakeUser:
    id: str


@dataclass
class FakeDirectory:
    keypairs: dict[str, FakeKeypair] = field(default_factory=dict)
    people: dict[str, Principal] = field(default_factory=dict)
    digests: dict[str, FakeUser] = field(default_factory=dict)

    def principal(self, actor: Actor) -> Principal | None:
        if actor.kind is ActorKind.KEYPAIR:
            keypair = self.keypairs.get(actor.id)
            if keypair is None or not keypair.active:
                return None
            person = self.people.get(keypair.user_id)
            return None if person is None else replace(person, access_key=actor.id)
        return self.people.get(actor.id)

    def user_by_digest(self, digest: str) -> FakeUser | None:
        return self.digests.get(digest)
