"""The tenancy service's decisions on people: ``cmd.user.*`` and ``cmd.keypair.*``, decided on
the folded ``Directory`` (see ``domains``). A keypair that becomes its user's default
is written together with ``UserDefaultKeypairSet`` on the user, in one commit; so is the
first keypair a ``CreateUser`` may carry, with the user it belongs to."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from commands import admin as a
from commands import authorisation as auth
from commands.directory import Directory
from commands.outcome import Code, Rejected
from commands.tenancy import Keypair, User
from schemas.subjects import AggregateType
from schemas.tenancy import PolicyKind, ScopeKind, user_id_for
from services.tenancy.common import (
    Change,
    Decision,
    Who,
    acted,
    domain_admin,
    exists,
    forbidden,
    grants,
    missing,
    policy_known,
    said,
    usable_domain,
    working_copy,
)

# ---- users --------------------------------------------------------------------------------


def _projects_of(d: Directory, domain: str, projects: tuple[str, ...]) -> Rejected | None:
    for project_id in projects:
        project = d.projects.get(project_id)
        if project is None:
            return missing(f"project {project_id}")
        if project.domain != domain:
            return Rejected(
                Code.INVALID, f"project {project.name} belongs to domain {project.domain}, "
                f"not {domain}: a user joins projects of their own domain only",
            )  # fmt: skip
        if not project.active:
            return Rejected(Code.INVALID, f"project {project.name} is deactivated")
    return None


def create_user(cmd: a.CreateUser, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := domain_admin(who, cmd.domain, f"create users in domain {cmd.domain}"):
        return refused
    if refused := grants(who, cmd.role):
        return refused
    user_id = user_id_for(cmd.email_digest)
    if user_id in d.users:
        if d.created_by(AggregateType.USER, user_id) == cmd.command_id:
            return Change((), f"user {user_id[:8]} was created by this command already")
        return Rejected(Code.CONFLICT, "a user with this email already exists")
    if refused := (
        usable_domain(d, cmd.domain)
        or policy_known(d, PolicyKind.USER, cmd.policy)
        or _projects_of(d, cmd.domain, cmd.projects)
    ):
        return refused
    if cmd.keypair is not None:
        if cmd.keypair.access_key in d.keypairs:
            return Rejected(Code.CONFLICT, f"keypair {cmd.keypair.access_key} already exists")
        if refused := policy_known(d, PolicyKind.KEYPAIR, cmd.keypair.policy):
            return refused
    user = User.create(
        cmd.domain,
        cmd.role,
        cmd.email_digest,
        cmd.email_sealed,
        cmd.policy,
        cmd.projects,
        now,
        cmd.fair_share,
    )
    said = f"user {user.id[:8]} created in domain {cmd.domain}"
    if cmd.keypair is None:
        return Change((user,), said)
    first = cmd.keypair
    keypair = Keypair.create(
        first.access_key, user.id, cmd.domain, first.secret_key_id, first.policy, None, now
    )
    user.set_default_keypair(first.access_key, now)
    return Change((user, keypair), f"{said}, with keypair {first.access_key} (their default)")


def _user_change(
    cmd: Any, d: Directory, who: Who, act: Callable[[User], bool], done: str, already: str,
    *, check: Callable[[User], Rejected | None] = lambda user: None,
) -> Decision:  # fmt: skip
    """``check``: the command's own rules, asked only of someone allowed to change the user
    (so nobody else learns what exists in another domain)."""
    user = d.users.get(cmd.user_id)
    if user is None:
        return missing(f"user {cmd.user_id}")
    if refused := domain_admin(who, user.domain, f"change users of domain {user.domain}"):
        return refused
    # Nobody changes a person who holds more than they could grant.
    if refused := grants(who, user.role) or check(user):
        return refused
    return acted(user, f"user {user.id[:8]}", act, done, already)


def modify_user(cmd: a.ModifyUser, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := grants(who, cmd.role) or policy_known(d, PolicyKind.USER, cmd.policy):
        return refused

    def act(user: User) -> bool:
        return user.modify(cmd.role, cmd.policy, now, cmd.fair_share)

    return _user_change(cmd, d, who, act, "modified", "already had these settings")


def add_user_to_project(cmd: a.AddUserToProject, d: Directory, who: Who, now: datetime) -> Decision:
    def act(user: User) -> bool:
        return user.join(cmd.project_id, now)

    def check(user: User) -> Rejected | None:
        return _projects_of(d, user.domain, (cmd.project_id,))

    name = d.scope_name(ScopeKind.PROJECT, cmd.project_id)
    return _user_change(cmd, d, who, act, f"joined {name}", f"was already in {name}", check=check)


def remove_user_from_project(
    cmd: a.RemoveUserFromProject, d: Directory, who: Who, now: datetime
) -> Decision:
    def act(user: User) -> bool:
        return user.leave(cmd.project_id, now)

    name = d.scope_name(ScopeKind.PROJECT, cmd.project_id)
    return _user_change(cmd, d, who, act, f"left {name}", f"was not in {name}")


def deactivate_user(cmd: a.DeactivateUser, d: Directory, who: Who, now: datetime) -> Decision:
    def act(user: User) -> bool:
        return user.deactivate(cmd.reason, now)

    return _user_change(cmd, d, who, act, "deactivated", "was already deactivated")


def reactivate_user(cmd: a.ReactivateUser, d: Directory, who: Who, now: datetime) -> Decision:
    def act(user: User) -> bool:
        return user.reactivate(now)

    return _user_change(cmd, d, who, act, "reactivated", "was already active")


# ---- keypairs -----------------------------------------------------------------------------


def create_keypair(cmd: a.CreateKeypair, d: Directory, who: Who, now: datetime) -> Decision:
    user = working_copy(d.users.get(cmd.user_id))
    if user is None:
        return missing(f"user {cmd.user_id}: a keypair belongs to an existing user")
    can = who is None or auth.can_issue_keypair(who, user.domain)
    if refused := forbidden(can, who, f"issue keypairs in domain {user.domain}"):
        return refused
    if refused := _outranked(who, user):
        return refused
    if cmd.access_key in d.keypairs:
        what = f"keypair {cmd.access_key}"
        return exists(d, AggregateType.KEYPAIR, cmd.access_key, cmd, what)
    if not user.active:
        return Rejected(Code.INVALID, f"user {user.id[:8]} is deactivated")
    if refused := policy_known(d, PolicyKind.KEYPAIR, cmd.policy):
        return refused
    keypair = Keypair.create(
        cmd.access_key, user.id, user.domain, cmd.secret_key_id, cmd.policy, cmd.rate_limit, now
    )
    # A user's first keypair is their default, and so is one issued while their default is
    # deactivated: a login must always have a key to act with.
    current = d.keypairs.get(user.default_access_key or "")
    default = cmd.make_default or current is None or not current.active
    if default:
        user.set_default_keypair(cmd.access_key, now)
    suffix = " (their default)" if default else ""
    return Change(
        (keypair, user), f"keypair {cmd.access_key} created for user {user.id[:8]}{suffix}"
    )


def _outranked(who: Who, owner: User | None) -> Rejected | None:
    """Nobody acts on the keys of a person who holds more than they could grant (a domain
    admin on a superadmin's), except that person on their own."""
    if who is None or owner is None or owner.id == who.user_id:
        return None
    return grants(who, owner.role)


def _keypair_change(
    cmd: Any, d: Directory, who: Who, act: Callable[[Keypair], bool], done: str, already: str,
    *, own: bool = False,
) -> Decision:  # fmt: skip
    """``own``: the keypair's user may do this themselves (revoking a leaked key)."""
    keypair = d.keypairs.get(cmd.access_key)
    if keypair is None:
        return missing(f"keypair {cmd.access_key}")
    if who is not None:
        can = (
            auth.can_deactivate_keypair(who, keypair.user_id, keypair.domain)
            if own
            else auth.can_issue_keypair(who, keypair.domain)
        )
        if refused := forbidden(can, who, f"change keypair {cmd.access_key}"):
            return refused
        if refused := _outranked(who, d.users.get(keypair.user_id)):
            return refused
    return acted(keypair, f"keypair {cmd.access_key}", act, done, already)


def modify_keypair(cmd: a.ModifyKeypair, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := policy_known(d, PolicyKind.KEYPAIR, cmd.policy):
        return refused

    def act(keypair: Keypair) -> bool:
        return keypair.modify(cmd.policy, cmd.rate_limit, now)

    return _keypair_change(cmd, d, who, act, "modified", "already had these settings")


def deactivate_keypair(cmd: a.DeactivateKeypair, d: Directory, who: Who, now: datetime) -> Decision:
    def act(keypair: Keypair) -> bool:
        return keypair.deactivate(cmd.reason, now)

    return _keypair_change(cmd, d, who, act, "deactivated", "was already deactivated", own=True)


def reactivate_keypair(cmd: a.ReactivateKeypair, d: Directory, who: Who, now: datetime) -> Decision:
    def act(keypair: Keypair) -> bool:
        return keypair.reactivate(now)

    return _keypair_change(cmd, d, who, act, "reactivated", "was already active")


def set_default_keypair(
    cmd: a.SetDefaultKeypair, d: Directory, who: Who, now: datetime
) -> Decision:
    """Written on the user: their default is an attribute of the person, not the key."""
    keypair = d.keypairs.get(cmd.access_key)
    if keypair is None:
        return missing(f"keypair {cmd.access_key}")
    can = who is None or auth.can_deactivate_keypair(who, keypair.user_id, keypair.domain)
    if refused := forbidden(can, who, f"choose the default keypair of {keypair.user_id[:8]}"):
        return refused
    if refused := _outranked(who, d.users.get(keypair.user_id)):
        return refused
    if not keypair.active:
        return Rejected(Code.INVALID, f"keypair {cmd.access_key} is deactivated")
    user = working_copy(d.users.get(keypair.user_id))
    if user is None:
        return missing(f"user {keypair.user_id}")
    changed = user.set_default_keypair(cmd.access_key, now)
    done, already = "is now the default", "was already the default"
    return Change((user,), f"keypair {cmd.access_key} " + said(changed, done, already))
