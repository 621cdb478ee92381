"""The storage service's rules for ``cmd.vfolder.*``, in memory: a tenancy directory folded from
events, the folders as decisions leave them, one command at a time. Names unique per owner,
policy limits, who may see and change what, sharing, and no purge while mounted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from commands.directory import Directory
from commands.folders.index import Folders
from commands.folders.messages import (
    AnswerVFolderInvitation,
    CloneVFolder,
    CreateVFolder,
    InviteToVFolder,
    LeaveVFolder,
    PurgeVFolder,
    RenameVFolder,
    RevokeVFolderShare,
    TrashVFolder,
)
from commands.outcome import Code, Rejected
from events.catalogue import Event
from events.domain.tenancy import (
    DomainCreated,
    ProjectCreated,
    ResourcePolicyCreated,
    UserCreated,
)
from events.envelope import StoredEvent
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.subjects import AggregateType
from schemas.tenancy import PolicyKind, Role, StoragePolicyLimits, project_id_for
from schemas.vfolder import FolderStatus, OwnerKind, Permission
from services.storage.control.rules import Change, World, decide
from tests.unit.scenario import at, envelope_of

PID = project_id_for("d1", "ml")
ADA, BOB, EVE, ADMIN = "user-ada", "user-bob", "user-eve", "user-admin"
NOW = at(100)


@dataclass
class Lab:
    directory: Directory = field(default_factory=Directory)
    folders: Folders = field(default_factory=Folders)
    mounted: set[str] = field(default_factory=set)
    seq: int = 0
    versions: dict[tuple[AggregateType, str], int] = field(default_factory=dict)

    def given(self, aggregate_id: str, *events: Event) -> None:
        for event in events:
            key = (type(event).aggregate_type, aggregate_id)
            self.versions[key] = self.versions.get(key, 0) + 1
            self.seq += 1
            envelope = envelope_of(aggregate_id, self.versions[key], event, at(self.seq))
            self.directory.apply(StoredEvent(self.seq, envelope))

    def person(self, user_id: str, *, role: Role = Role.USER, domain: str = "d1") -> None:
        user = UserCreated(
            domain=domain, role=role, email_digest=f"digest-{user_id}", email_sealed="x",
            projects=(PID,) if user_id in (ADA, BOB) else (), policy="small",
        )  # fmt: skip
        self.given(user_id, user)

    def send(self, cmd_type: type[Any], person: str, **fields: Any) -> Change | Rejected:
        actor = Actor(kind=ActorKind.USER, id=person)
        cmd = cmd_type(actor=actor, tenant=SYSTEM_TENANT, **fields)
        world = World(
            self.folders, self.directory, {"local", "fast"}, "local", self.mounted.__contains__
        )
        decision = decide(cmd, world, NOW)
        if isinstance(decision, Change):
            decision.folder.collect_events()  # stored: the service folds what it wrote
            self.folders.put(decision.folder)
        return decision

    def create(self, user_id: str = ADA, **fields: Any) -> str:
        decision = self.send(CreateVFolder, user_id, **{"name": "data", **fields})
        assert isinstance(decision, Change), decision
        return decision.folder.id


@pytest.fixture
def lab() -> Lab:
    lab = Lab()
    limits = StoragePolicyLimits(max_vfolder_count=3, max_quota_scope_size_bytes=1 << 30)
    lab.given(
        "user-small", ResourcePolicyCreated(kind=PolicyKind.USER, name="small", storage=limits)
    )
    lab.given("d1", DomainCreated())
    lab.given("d2", DomainCreated())
    lab.given(PID, ProjectCreated(domain="d1", name="ml"))
    for user in (ADA, BOB, EVE):
        lab.person(user)
    lab.person(ADMIN, role=Role.ADMIN)
    lab.person("user-far", domain="d2")
    return lab


def refused(decision: Change | Rejected, code: str, text: str) -> None:
    assert isinstance(decision, Rejected), decision
    assert decision.code == code and text in decision.message, decision


def test_names_are_unique_per_owner_and_free_again_after_a_purge(lab: Lab) -> None:
    first = lab.create()
    refused(lab.send(CreateVFolder, ADA, name="data"), Code.CONFLICT, "exists already")
    lab.create(BOB)  # another owner may use the name
    lab.send(TrashVFolder, ADA, folder_id=first)
    refused(lab.send(CreateVFolder, ADA, name="data"), Code.CONFLICT, "exists already")
    assert isinstance(lab.send(PurgeVFolder, ADA, folder_id=first), Change)
    lab.create()  # the name is free again


def test_the_same_create_twice_makes_one_folder(lab: Lab) -> None:
    actor = Actor(kind=ActorKind.USER, id=ADA)
    cmd = CreateVFolder(actor=actor, tenant=SYSTEM_TENANT, name="data")
    world = World(lab.folders, lab.directory, {"local"}, "local")
    made = decide(cmd, world, NOW)
    assert isinstance(made, Change)
    lab.folders.put(made.folder)
    again = decide(cmd, world, NOW)
    assert isinstance(again, Change) and again.folder.id == made.folder.id
    assert "exists already" in again.message


def test_policy_limits_count_folders_and_cap_quotas(lab: Lab) -> None:
    for name in ("a", "b", "c"):
        lab.create(name=name)
    refused(lab.send(CreateVFolder, ADA, name="d"), Code.QUOTA, "allows 3 folder(s)")
    refused(
        lab.send(CreateVFolder, BOB, name="big", quota_bytes=2 << 30),
        Code.QUOTA,
        "allows at most 1073741824 bytes",
    )


def test_volumes_and_projects_are_checked(lab: Lab) -> None:
    refused(lab.send(CreateVFolder, ADA, name="x", volume="nfs"), Code.NOT_FOUND, "no volume nfs")
    refused(
        lab.send(CreateVFolder, EVE, name="x", owner_kind=OwnerKind.PROJECT, project_id=PID),
        Code.NOT_FOUND,
        "no project",
    )  # not a member
    shared = lab.create(name="team", owner_kind=OwnerKind.PROJECT, project_id=PID)
    # A member may rename it (read-write-delete is not theirs: they may not).
    refused(lab.send(RenameVFolder, BOB, folder_id=shared, name="t2"), Code.FORBIDDEN, "owner")
    assert isinstance(lab.send(RenameVFolder, ADMIN, folder_id=shared, name="t2"), Change)


def test_sharing_by_invitation_read_only_then_revoked(lab: Lab) -> None:
    folder = lab.create()
    refused(lab.send(RenameVFolder, BOB, folder_id=folder, name="x"), Code.NOT_FOUND, "no folder")
    invited = lab.send(InviteToVFolder, ADA, folder_id=folder, user_id=BOB)
    assert isinstance(invited, Change)
    accepted = lab.send(AnswerVFolderInvitation, BOB, folder_id=folder, accept=True)
    assert isinstance(accepted, Change)
    assert lab.folders.by_id[folder].permission_of(BOB) is Permission.READ_ONLY
    refused(lab.send(RenameVFolder, BOB, folder_id=folder, name="x"), Code.FORBIDDEN, "owner")
    refused(lab.send(InviteToVFolder, BOB, folder_id=folder, user_id=EVE), Code.FORBIDDEN, "owner")
    assert isinstance(lab.send(RevokeVFolderShare, ADA, folder_id=folder, user_id=BOB), Change)
    assert lab.folders.by_id[folder].permission_of(BOB) is None
    refused(lab.send(LeaveVFolder, BOB, folder_id=folder), Code.NOT_FOUND, "no folder")


def test_nobody_outside_the_domain_is_invited_and_strangers_see_nothing(lab: Lab) -> None:
    folder = lab.create()
    refused(
        lab.send(InviteToVFolder, ADA, folder_id=folder, user_id="user-far"),
        Code.NOT_FOUND,
        "no user",
    )
    refused(lab.send(TrashVFolder, EVE, folder_id=folder), Code.NOT_FOUND, "no folder")
    refused(lab.send(TrashVFolder, "user-nobody", folder_id=folder), Code.FORBIDDEN, "signed-in")


def test_a_mounted_folder_is_neither_trashed_nor_purged(lab: Lab) -> None:
    folder = lab.create()
    lab.mounted.add(folder)
    refused(lab.send(TrashVFolder, ADA, folder_id=folder), Code.REFUSED, "mounted by a live")
    lab.mounted.clear()
    assert isinstance(lab.send(TrashVFolder, ADA, folder_id=folder), Change)
    lab.mounted.add(folder)
    refused(lab.send(PurgeVFolder, ADA, folder_id=folder), Code.REFUSED, "mounted by a live")
    lab.mounted.clear()
    refused(
        lab.send(RenameVFolder, ADA, folder_id=folder, name="x"), Code.REFUSED, "cannot be renamed"
    )


def test_a_clone_is_the_callers_own_cloning_folder(lab: Lab) -> None:
    source = lab.create(name="data", owner_kind=OwnerKind.PROJECT, project_id=PID)
    cloned = lab.send(CloneVFolder, BOB, folder_id=source, name="mine")
    assert isinstance(cloned, Change), cloned
    clone = cloned.folder
    assert (clone.owner_kind, clone.owner_id, clone.cloned_from) == (OwnerKind.USER, BOB, source)
    assert (clone.status, clone.volume) == (FolderStatus.CLONING, "local")
    refused(lab.send(CloneVFolder, BOB, folder_id=source, name="mine"), Code.CONFLICT, "exists")
    refused(lab.send(CloneVFolder, EVE, folder_id=source, name="x"), Code.NOT_FOUND, "no folder")
    # The clone is not ready yet: it cannot be cloned in turn.
    refused(lab.send(CloneVFolder, BOB, folder_id=clone.id, name="y"), Code.REFUSED, "cloning")


def test_a_clone_needs_a_share_and_counts_against_the_callers_policy(lab: Lab) -> None:
    source = lab.create()
    lab.send(InviteToVFolder, ADA, folder_id=source, user_id=BOB)
    # Invited, not yet accepted: Bob sees it but may not read it.
    refused(lab.send(CloneVFolder, BOB, folder_id=source, name="x"), Code.FORBIDDEN, "may not")
    lab.send(AnswerVFolderInvitation, BOB, folder_id=source, accept=True)
    refused(
        lab.send(CloneVFolder, BOB, folder_id=source, name="x", volume="nfs"),
        Code.NOT_FOUND,
        "no volume nfs",
    )
    for name in ("a", "b", "c"):
        assert isinstance(lab.send(CloneVFolder, BOB, folder_id=source, name=name), Change)
    refused(lab.send(CloneVFolder, BOB, folder_id=source, name="d"), Code.QUOTA, "allows 3")


def test_the_same_clone_twice_makes_one_folder(lab: Lab) -> None:
    source = lab.create()
    actor = Actor(kind=ActorKind.USER, id=ADA)
    cmd = CloneVFolder(actor=actor, tenant=SYSTEM_TENANT, folder_id=source, name="copy")
    world = World(lab.folders, lab.directory, {"local"}, "local")
    made = decide(cmd, world, NOW)
    assert isinstance(made, Change) and made.folder.id == cmd.clone_id
    lab.folders.put(made.folder)
    again = decide(cmd, world, NOW)
    assert isinstance(again, Change) and "exists already" in again.message
