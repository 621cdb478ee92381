"""Who may do what: the one table of authorisation rules, used by the gateway on every
resolver and by the services on every command (defence in depth: a command that reached NATS
some other way is checked again). Pure; reads and writes nothing.

Roles (Backend.AI's, and two for audit): a superadmin acts on everything; a domain admin on
their domain; a user on their own sessions and keypairs; a monitor reads their domain and acts
on nothing; an auditor reads their domain and its events in the log, a superauditor every
domain and the whole log, and neither acts on anything. Another
tenant's object must answer exactly like one that does not exist, so the read rules return a
plain bool and callers turn "no" into "not found".
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.principal import Actor, ActorKind, Tenant
from schemas.tenancy import READ_ONLY_ROLES, Role, SessionOwner

DOMAIN_READERS = frozenset({Role.ADMIN, Role.MONITOR, Role.AUDITOR})
"""Roles that read everything of their own domain."""
LOG_READERS = frozenset({Role.ADMIN, Role.AUDITOR})
"""Roles that read their own domain's events in the log (``auditLog``)."""


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

    @property
    def reads_every_domain(self) -> bool:
        return self.role in (Role.SUPERADMIN, Role.SUPERAUDITOR)

    @property
    def read_only(self) -> bool:
        """Monitors and auditors: they read, and act on nothing."""
        return self.role in READ_ONLY_ROLES


# ---- sessions -----------------------------------------------------------------------------


def can_read_session(who: Principal, owner: SessionOwner | None) -> bool:
    if who.reads_every_domain:
        return True
    if owner is None:
        return False  # from before tenancy: superadmins only
    if who.role in DOMAIN_READERS:
        return owner.domain == who.domain
    return owner.user_id == who.user_id


def can_act_on_session(who: Principal, owner: SessionOwner | None) -> bool:
    """Terminate, read logs of, or otherwise change a session."""
    if who.read_only:
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
    if who.read_only:
        return False
    return who.is_superadmin or who.role is Role.ADMIN or project_id in who.projects


# ---- tenancy ------------------------------------------------------------------------------


def can_read_domain(who: Principal, domain: str) -> bool:
    """Read a domain's tenancy objects (projects, users, keypairs, quota use)."""
    if who.reads_every_domain:
        return True
    return who.role in DOMAIN_READERS and domain == who.domain


def can_read_log(who: Principal, domain: str | None) -> bool:
    """Read the events of the log whose tenant is ``domain`` (None: the system's own, such as
    nodes and agents): superadmins and superauditors all, admins and auditors their domain's."""
    if who.reads_every_domain:
        return True
    return who.role in LOG_READERS and domain is not None and domain == who.domain


def can_administer_domain(who: Principal, domain: str) -> bool:
    """Create or change projects, users and keypairs of ``domain``."""
    return who.is_superadmin or (who.role is Role.ADMIN and domain == who.domain)


def can_administer_cluster(who: Principal) -> bool:
    """Domains, resource policies, resource groups and images are cluster-wide."""
    return who.is_superadmin


def can_grant_role(who: Principal, role: Role) -> bool:
    """Nobody grants more than they hold: a domain admin cannot make a superadmin or a
    superauditor."""
    return who.is_superadmin or (
        who.role is Role.ADMIN and role not in (Role.SUPERADMIN, Role.SUPERAUDITOR)
    )


def can_read_user(who: Principal, user_id: str, domain: str) -> bool:
    return user_id == who.user_id or can_read_domain(who, domain)


def can_issue_keypair(who: Principal, domain: str) -> bool:
    """Issue or change keypairs (their policy sets quotas, so users cannot choose it)."""
    return can_administer_domain(who, domain)


def can_deactivate_keypair(who: Principal, user_id: str, domain: str) -> bool:
    """Revoke a keypair: one's own (a leaked key), or as an admin."""
    if user_id == who.user_id and not who.read_only:
        return True
    return can_administer_domain(who, domain)
