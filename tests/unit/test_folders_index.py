"""The folders every service folds (``commands.folders.index``, with ``commands.folders.access``):
names unique per live owner, the share index ``find`` and ``shared_with`` read, and what purge
and a held aggregate drop."""

from __future__ import annotations

from commands.authorisation import Principal
from commands.folders.access import permission_of, sees
from commands.folders.index import Folders
from events.catalogue import Event
from events.domain.vfolder import (
    VFolderCreated,
    VFolderInvitationAccepted,
    VFolderInvited,
    VFolderPurged,
    VFolderRenamed,
    VFolderShareRevoked,
    VFolderTrashed,
)
from events.envelope import StoredEvent
from schemas.tenancy import Role
from schemas.vfolder import OwnerKind, Permission
from tests.unit.scenario import at, envelope_of

ANN = Principal("ann", Role.USER, "d1", frozenset(), None)
BOB = Principal("bob", Role.USER, "d1", frozenset({"p1"}), None)
ADMIN = Principal("adm", Role.ADMIN, "d1", frozenset(), None)
OTHER_ADMIN = Principal("adm2", Role.ADMIN, "d2", frozenset(), None)


class Log:
    def __init__(self) -> None:
        self.folders = Folders()
        self.seq = 0
        self.versions: dict[str, int] = {}

    def add(self, folder_id: str, *events: Event) -> None:
        for event in events:
            self.versions[folder_id] = self.versions.get(folder_id, 0) + 1
            self.seq += 1
            envelope = envelope_of(folder_id, self.versions[folder_id], event, at(self.seq))
            self.folders.apply(StoredEvent(self.seq, envelope))

    def user_folder(self, folder_id: str, name: str, owner: str = "ann") -> None:
        self.add(folder_id, VFolderCreated(
            name=name, owner_kind=OwnerKind.USER, owner_id=owner, domain="d1", volume="local",
        ))  # fmt: skip

    def share(self, folder_id: str, user_id: str, permission: Permission) -> None:
        self.add(
            folder_id,
            VFolderInvited(user_id=user_id, permission=permission),
            VFolderInvitationAccepted(user_id=user_id),
        )


def test_a_shared_folder_is_found_by_name_until_the_share_is_revoked() -> None:
    log = Log()
    log.user_folder("f1", "data")
    assert log.folders.find(BOB, "data") is None
    log.add("f1", VFolderInvited(user_id="bob", permission=Permission.READ_ONLY))
    assert log.folders.find(BOB, "data") is None  # an invitation is not a share
    assert sees(log.folders.by_id["f1"], BOB)
    log.add("f1", VFolderInvitationAccepted(user_id="bob"))
    found = log.folders.find(BOB, "data")
    assert found is not None and found.id == "f1"
    assert permission_of(found, BOB) is Permission.READ_ONLY
    assert [f.id for f in log.folders.shared_with("bob")] == ["f1"]
    log.add("f1", VFolderShareRevoked(user_id="bob"))
    assert log.folders.find(BOB, "data") is None
    assert list(log.folders.shared_with("bob")) == []


def test_two_sharers_folders_of_one_name_are_ambiguous_by_name_but_not_by_id() -> None:
    log = Log()
    log.user_folder("f1", "data", owner="ann")
    log.user_folder("f2", "data", owner="cat")
    log.share("f1", "bob", Permission.READ_WRITE)
    log.share("f2", "bob", Permission.READ_ONLY)
    assert log.folders.find(BOB, "data") is None
    found = log.folders.find(BOB, "f2")
    assert found is not None and found.owner_id == "cat"


def test_own_name_wins_and_a_rename_moves_the_index() -> None:
    log = Log()
    log.user_folder("f1", "data", owner="ann")
    log.user_folder("f2", "data", owner="bob")
    log.share("f1", "bob", Permission.READ_WRITE)
    own = log.folders.find(BOB, "data")
    assert own is not None and own.id == "f2"
    log.add("f2", VFolderRenamed(name="mine"))
    assert log.folders.named((OwnerKind.USER, "bob"), "data") is None
    shared = log.folders.find(BOB, "data")
    assert shared is not None and shared.id == "f1"


def test_a_purged_folder_frees_its_name_and_its_shares() -> None:
    log = Log()
    log.user_folder("f1", "data")
    log.share("f1", "bob", Permission.READ_WRITE)
    assert log.folders.count((OwnerKind.USER, "ann")) == 1
    log.add("f1", VFolderTrashed(), VFolderPurged())
    assert log.folders.count((OwnerKind.USER, "ann")) == 0
    assert log.folders.find(ANN, "data") is None
    assert log.folders.find(ANN, "f1") is None
    assert list(log.folders.shared_with("bob")) == []


def test_admins_see_their_domain_only_and_a_held_folder_is_forgotten() -> None:
    log = Log()
    log.user_folder("f1", "data")
    folder = log.folders.by_id["f1"]
    assert sees(folder, ADMIN) and permission_of(folder, ADMIN) is Permission.READ_WRITE_DELETE
    assert not sees(folder, OTHER_ADMIN) and log.folders.find(OTHER_ADMIN, "f1") is None
    log.share("f1", "bob", Permission.READ_ONLY)
    log.folders.forget("ev.vfolder.f1")
    assert log.folders.get("f1") is None
    assert log.folders.find(BOB, "data") is None
    assert "ev.vfolder.f1" in log.folders.broken
