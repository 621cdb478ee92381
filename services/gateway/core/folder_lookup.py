"""How a folder resolver finds a folder and what the caller may do with it, over the vfolders
view: the rules of ``commands/folders/access.py`` (``sees``, ``owns``, ``administers``,
``permission_of``) applied to the view's ``FolderRecord``, with one addition for reading: a
monitor reads the folders of their domain (and may do nothing with their files). Another
tenant's folder answers exactly like one that does not exist. Reads the vfolders view."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import DOMAIN_READERS, Principal, can_administer_domain, can_read_domain
from projections.folders.queries import Scope
from projections.folders.tables import FolderRecord
from schemas.ids import TOKEN_PATTERN
from schemas.vfolder import FolderStatus, OwnerKind, Permission, folder_name_problem
from services.gateway.context import Context, ctx_of, who


def scope_of(me: Principal) -> Scope:
    """The folders a caller's listing may hold (the filter is the authorisation)."""
    if me.reads_every_domain:
        return Scope()
    if me.role in DOMAIN_READERS:
        return Scope(domain=me.domain)
    return Scope(user_id=me.user_id, projects=me.projects)


def owns(record: FolderRecord, me: Principal) -> bool:
    return record.owner_kind is OwnerKind.USER and record.owner_id == me.user_id


def manages(record: FolderRecord, me: Principal) -> bool:
    """Its owner, or an admin of its domain: who renames, shares and trashes it."""
    return owns(record, me) or can_administer_domain(me, record.domain)


def visible(record: FolderRecord, me: Principal) -> bool:
    """Owner, sharer, invitee, member of the owning project, or a reader of its domain."""
    if owns(record, me) or can_read_domain(me, record.domain):
        return True
    if record.owner_kind is OwnerKind.PROJECT and record.owner_id in me.projects:
        return True
    return me.user_id in record.shares or me.user_id in record.invitations


def permission(record: FolderRecord, me: Principal) -> Permission | None:
    """What the caller may do with the folder's files: its owner and the admins of its domain
    everything, a member of the owning project read-write, a sharer their share."""
    if owns(record, me) or can_administer_domain(me, record.domain):
        return Permission.READ_WRITE_DELETE
    if record.owner_kind is OwnerKind.PROJECT and record.owner_id in me.projects:
        return Permission.READ_WRITE
    return record.shares.get(me.user_id)


def not_found(ref: str) -> GraphQLError:
    return GraphQLError(f"there is no folder {ref[:80]!r}", extensions={"code": "not-found"})


async def resolve(info: Info[Context, Any], ref: str) -> FolderRecord | None:
    """The folder ``ref`` names for the caller, as ``Folders.find`` resolves a mount: a
    folder id they see, else a name among their own folders, then their projects' folders,
    then those shared with them (a name two of them share is ambiguous: None)."""
    me = who(info)
    folders = ctx_of(info).views.folders
    if TOKEN_PATTERN.match(ref):
        found = await folders.get(ref)
        if found is not None and visible(found, me):
            return found
    if folder_name_problem(ref) is not None:
        return None
    owners_in_turn = [
        [(OwnerKind.USER, me.user_id)],
        [(OwnerKind.PROJECT, project_id) for project_id in sorted(me.projects)],
    ]
    for owners in owners_in_turn:
        named = await folders.named(ref, owners=owners)
        if len(named) == 1:
            return named[0]
        if named:
            return None
    shared = await folders.named(ref, shared_with=me.user_id)
    return shared[0] if len(shared) == 1 else None


async def visible_folder(info: Info[Context, Any], ref: str) -> FolderRecord:
    """``resolve``, or the not-found error; purged folders answer as gone."""
    found = await resolve(info, ref)
    if found is None or found.status is FolderStatus.PURGED:
        raise not_found(ref)
    return found
