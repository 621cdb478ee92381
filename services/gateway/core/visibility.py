"""Which tenancy objects a principal may see, over the gateway's directory. Pure; reads and
writes nothing. Another tenant's object is invisible, so resolvers answer as if it did not
exist (null, empty, "not found"), never "forbidden"."""

from __future__ import annotations

from commands.authorisation import (
    Principal,
    can_administer_domain,
    can_read_domain,
    can_read_user,
)
from commands.directory import Directory
from commands.tenancy import Keypair, Project, User
from schemas.tenancy import PolicyKind, ScopeKind, policy_id_for


def sees_project(who: Principal, project: Project) -> bool:
    return str(project.id) in who.projects or can_read_domain(who, project.domain)


def sees_user(who: Principal, user: User) -> bool:
    return can_read_user(who, str(user.id), user.domain)


def sees_email(who: Principal, user: User) -> bool:
    """An email is personal data: the person and their administrators, not monitors."""
    return str(user.id) == who.user_id or can_administer_domain(who, user.domain)


def sees_keypair(who: Principal, keypair: Keypair) -> bool:
    return keypair.user_id == who.user_id or can_read_domain(who, keypair.domain)


def sees_scope(directory: Directory, who: Principal, kind: ScopeKind, scope_id: str) -> bool:
    """A quota scope: one's own (keypair, user, projects, domain) or any in a readable domain."""
    if kind is ScopeKind.KEYPAIR:
        keypair = directory.keypairs.get(scope_id)
        return keypair is not None and sees_keypair(who, keypair)
    if kind is ScopeKind.USER:
        user = directory.users.get(scope_id)
        return user is not None and sees_user(who, user)
    if kind is ScopeKind.PROJECT:
        project = directory.projects.get(scope_id)
        return project is not None and sees_project(who, project)
    return scope_id in directory.domains and (
        scope_id == who.domain or can_read_domain(who, scope_id)
    )


def own_scopes(who: Principal) -> list[tuple[ScopeKind, str]]:
    """The scopes the caller's sessions reserve on: keypair, user, each project, domain."""
    found: list[tuple[ScopeKind, str]] = []
    if who.access_key is not None:
        found.append((ScopeKind.KEYPAIR, who.access_key))
    found.append((ScopeKind.USER, who.user_id))
    found.extend((ScopeKind.PROJECT, p) for p in sorted(who.projects))
    found.append((ScopeKind.DOMAIN, who.domain))
    return found


def policies_in_use(directory: Directory, who: Principal) -> set[str]:
    """Policy ids a non-superadmin may read: those of keypairs, users and projects they see."""
    found: set[str] = set()
    for keypair in directory.keypairs.values():
        if sees_keypair(who, keypair):
            found.add(policy_id_for(PolicyKind.KEYPAIR, keypair.policy))
    for user in directory.users.values():
        if sees_user(who, user):
            found.add(policy_id_for(PolicyKind.USER, user.policy))
    for project in directory.projects.values():
        if sees_project(who, project):
            found.add(policy_id_for(PolicyKind.PROJECT, project.policy))
    return found
