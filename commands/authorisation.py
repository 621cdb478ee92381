"""Who may do what: the one table of authorisation rules, used by the gateway on every
resolver and by the services on every command (defence in depth: a command that reached NATS
some other way is checked again). Pure; reads and writes nothing.

Roles (Backend.AI's): a superadmin acts on everything; a domain admin on their domain; a user
on their own sessions and keypairs; a monitor reads their domain and acts on nothing. Another
tenant's object must answer exactly like one that does not exist, so the read rules return a
plain bool and callers turn "no" into "not found".
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.principal import Actor, ActorKind, Tenant
from schemas.tenancy import Role, SessionOwner


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated person, as the gateway resolved them for one request."""

    user_id: str
    role: Role
    domain: str
    projects: frozenset[str]
    access_key: str | None
    """The keypair that signed the request, or the user's default keypair after a login."""

    @property
    def actor(self) -> Actor:
        if self.access_key is not None:
            return Actor(kind=ActorKind.KEYPAIR, id=self.access_key)
        return Actor(kind=ActorKind.USER, id=self.user_id)

    def tenant(self, project_id: str | None = None) -> Tenant:
        return Tenant(domain=self.domain, project=project_id)

    @property
    def is_superadmin(self) -> bool:
        return self.role is Role.SUPERADMIN


# ---- sessions -----------------------------------------------------------------------------


def can_read_session(who: Principal, owner: SessionOwner | None) -> bool:
    if who.is_superadmin:
        return True
    if owner is None:
        return False  # from before tenancy: superadmins only
    if who.role in (Role.ADMIN, Role.MONITOR):
        return owner.domain == who.domain
    return owner.user_id == who.user_id


def can_act_on_session(who: Principal, owner: SessionOwner | None) -> bool:
    """Terminate, read logs of, or otherwise change a session."""
    if who.role is Role.MONITOR:
        return False
    if who.is_superadmin:
        return True
    if owner is None:
        return False
    if who.role is Role.ADMIN:
        return owner.domain == who.domain
    return owner.user_id == who.user_id


def can_create_session(who: Principal, project_id: str) -> bool:
    """In a project the person belongs to (admins: any project of their domain is checked by
    the caller against the directory)."""
    if who.role is Role.MONITOR:
        return False
    return who.is_superadmin or who.role is Role.ADMIN or project_id in who.projects


# ---- tenancy ------------------------------------------------------------------------------


def can_read_domain(who: Principal, domain: str) -> bool:
    """Read a domain's tenancy objects (projects, users, keypairs, quota use)."""
    if who.is_superadmin:
        return True
    return who.role in (Role.ADMIN, Role.MONITOR) and domain == who.domain


def can_administer_domain(who: Principal, domain: str) -> bool:
    """Create or change projects, users and keypairs of ``domain``."""
    return who.is_superadmin or (who.role is Role.ADMIN and domain == who.domain)


def can_administer_cluster(who: Principal) -> bool:
    """Domains, resource policies, resource groups and images are cluster-wide."""
    return who.is_superadmin


def can_grant_role(who: Principal, role: Role) -> bool:
    """Nobody grants more than they hold: a domain admin cannot make a superadmin."""
    return who.is_superadmin or (who.role is Role.ADMIN and role is not Role.SUPERADMIN)


def can_read_user(who: Principal, user_id: str, domain: str) -> bool:
    return user_id == who.user_id or can_read_domain(who, domain)


def can_issue_keypair(who: Principal, domain: str) -> bool:
    """Issue or change keypairs (their policy sets quotas, so users cannot choose it)."""
    return can_administer_domain(who, domain)


def can_deactivate_keypair(who: Principal, user_id: str, domain: str) -> bool:
    """Revoke a keypair: one's own (a leaked key), or as an admin."""
    if user_id == who.user_id and who.role is not Role.MONITOR:
        return True
    return can_administer_domain(who, domain)
