"""What the tenancy deciders share: the shape of a decision (the changed aggregates, or a
refusal) and the checks every command makes (who may act, what must exist). Pure: no I/O,
no clock; reads the folded ``Directory`` handed in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from commands import authorisation as auth
from commands.aggregate import Aggregate
from commands.directory import Directory
from commands.messages import Command
from commands.outcome import Code, Rejected
from commands.unit_of_work import working_copy as working_copy
from schemas.subjects import AggregateType
from schemas.tenancy import PolicyKind, Role, policy_id_for

A = TypeVar("A", bound=Aggregate)
Who = auth.Principal | None


@dataclass(frozen=True, slots=True)
class Change:
    """What a decision changed (aggregates with pending events; others are skipped)."""

    aggregates: tuple[Aggregate, ...]
    message: str


Decision = Change | Rejected
Decide = Callable[[Any, Directory, Who, datetime], Decision]


def said(changed: bool, done: str, already: str) -> str:
    return done if changed else already


def acted(aggregate: A, what: str, act: Callable[[A], bool], done: str, already: str) -> Change:
    """``act`` decides on a working copy of ``aggregate`` (the folded one stays untouched
    until the write is stored); the message says whether anything changed."""
    copy = working_copy(aggregate)
    return Change((copy,), f"{what} " + said(act(copy), done, already))


def forbidden(allowed: bool, who: Who, what: str) -> Rejected | None:
    if who is None or allowed:
        return None
    return Rejected(Code.FORBIDDEN, f"a {who.role.value} of domain {who.domain} may not {what}")


def missing(what: str) -> Rejected:
    return Rejected(Code.NOT_FOUND, f"there is no {what}")


def exists(d: Directory, kind: AggregateType, key: str, cmd: Command, what: str) -> Decision:
    if d.created_by(kind, key) == cmd.command_id:
        return Change((), f"{what} was created by this command already")  # a redelivery
    return Rejected(Code.CONFLICT, f"{what} already exists")


def usable_domain(d: Directory, name: str) -> Rejected | None:
    domain = d.domains.get(name)
    if domain is None:
        return missing(f"domain {name}: create it first")
    if not domain.active:
        return Rejected(Code.INVALID, f"domain {name} is deactivated")
    return None


def policy_known(d: Directory, kind: PolicyKind, name: str) -> Rejected | None:
    if policy_id_for(kind, name) in d.policies:
        return None
    return missing(f"{kind.value} resource policy {name}: create it first")


def cluster_admin(who: Who, what: str) -> Rejected | None:
    return forbidden(who is None or auth.can_administer_cluster(who), who, what)


def domain_admin(who: Who, domain: str, what: str) -> Rejected | None:
    return forbidden(who is None or auth.can_administer_domain(who, domain), who, what)


def grants(who: Who, *roles: Role) -> Rejected | None:
    for role in roles:
        if who is not None and not auth.can_grant_role(who, role):
            return forbidden(False, who, f"grant or change the role {role.value}")
    return None
