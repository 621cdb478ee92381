"""The total size a folder owner's storage policy allows (``max_quota_scope_size_bytes``) and
what their folders hold, as folded: what the data plane checks an upload against. Pure."""

from __future__ import annotations

from schemas.tenancy import PolicyKind, policy_id_for
from schemas.vfolder import OwnerKind
from services.storage.access import OwnerRoom
from services.storage.control.landed import Landed
from services.storage.control.state import StorageState


def owner_room(state: StorageState, folder_id: str, landed: Landed) -> OwnerRoom | None:
    """What finished uploads added since the last measurements (``landed``) counts as
    used. None: the folder is not known yet (the token was issued on a fresher view: no check),
    or its owner's policy sets no total."""
    folder = state.folders.get(folder_id)
    if folder is None:
        return None
    directory = state.directory
    if folder.owner_kind is OwnerKind.PROJECT:
        project = directory.projects.get(folder.owner_id)
        policy = None if project is None else (PolicyKind.PROJECT, project.policy)
    else:
        user = directory.users.get(folder.owner_id)
        policy = None if user is None else (PolicyKind.USER, user.policy)
    limits = None if policy is None else directory.policies.get(policy_id_for(*policy))
    storage = None if limits is None else limits.storage
    total = None if storage is None else storage.max_quota_scope_size_bytes
    if total is None:
        return None
    owner = (folder.owner_kind, folder.owner_id)
    folders = frozenset(f.id for f in state.folders.of_owner(owner))
    used = state.folders.bytes_used(owner) + landed.total(folders)
    return OwnerRoom(f"{owner[0].value} {owner[1]}", total, used, folders)
