"""GraphQL object types of tenancy administration: domains, projects, users and keypairs as
the gateway's directory holds them, a newly issued keypair, the viewer, and the outcome every
admin mutation answers. Never a secret key but once, when issued; an email only where the
resolver unsealed it for someone allowed to see it."""

from __future__ import annotations

import strawberry

from commands.tenancy import Domain, Keypair, Project, User
from services.gateway.admin_api.resource_types import Limits
from services.gateway.core.types import OutcomeStatus


@strawberry.type
class DomainInfo:
    name: strawberry.ID
    description: str
    total_resource_slots: Limits
    active: bool
    fair_share: int = strawberry.field(
        description="its share among its siblings for fair share (1 to 10000)"
    )

    @classmethod
    def of(cls, domain: Domain) -> DomainInfo:
        return cls(
            name=strawberry.ID(domain.name),
            description=domain.description,
            total_resource_slots=Limits.of(domain.total_resource_slots),
            active=domain.active,
            fair_share=domain.fair_share,
        )


@strawberry.type
class ProjectInfo:
    id: strawberry.ID
    domain: str
    name: str
    description: str
    total_resource_slots: Limits
    policy: str
    active: bool
    fair_share: int = strawberry.field(
        description="its share among its siblings for fair share (1 to 10000)"
    )

    @classmethod
    def of(cls, project: Project) -> ProjectInfo:
        return cls(
            id=strawberry.ID(str(project.id)),
            domain=project.domain,
            name=project.name,
            description=project.description,
            total_resource_slots=Limits.of(project.total_resource_slots),
            policy=project.policy,
            active=project.active,
            fair_share=project.fair_share,
        )


@strawberry.type
class UserInfo:
    id: strawberry.ID
    domain: str
    role: str
    email: str | None = strawberry.field(description="only for the person and their admins")
    policy: str
    projects: list[str]
    default_access_key: str | None
    active: bool
    fair_share: int = strawberry.field(
        description="its share among its siblings for fair share (1 to 10000)"
    )

    @classmethod
    def of(cls, user: User, email: str | None) -> UserInfo:
        return cls(
            id=strawberry.ID(str(user.id)),
            domain=user.domain,
            role=user.role.value,
            email=email,
            policy=user.policy,
            projects=sorted(user.projects),
            default_access_key=user.default_access_key,
            active=user.active,
            fair_share=user.fair_share,
        )


@strawberry.type(description="A keypair; its secret key is shown once, when it is created.")
class KeypairInfo:
    access_key: strawberry.ID
    user_id: str
    domain: str
    policy: str
    rate_limit: int | None
    is_default: bool
    active: bool

    @classmethod
    def of(cls, keypair: Keypair, default_access_key: str | None) -> KeypairInfo:
        access_key = str(keypair.id)
        return cls(
            access_key=strawberry.ID(access_key),
            user_id=keypair.user_id,
            domain=keypair.domain,
            policy=keypair.policy,
            rate_limit=keypair.rate_limit,
            is_default=access_key == default_access_key,
            active=keypair.active,
        )


@strawberry.type(description="The caller, as this request authenticated them.")
class Viewer:
    user_id: strawberry.ID
    role: str
    domain: str
    projects: list[str]
    access_key: str | None


@strawberry.type
class AdminOutcome:
    command_id: strawberry.ID
    status: OutcomeStatus
    message: str
    id: strawberry.ID | None = strawberry.field(description="the object the command is about")


@strawberry.type(description="A new keypair: the secret key is shown here once and never again.")
class IssuedKeypair:
    outcome: AdminOutcome
    access_key: strawberry.ID
    secret_key: str
