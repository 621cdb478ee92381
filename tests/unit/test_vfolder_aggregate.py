"""The ``vfolder`` aggregate's rules, given/when/then: names, the trash and purge, sharing by
invitation, permissions, quota and usage, clones; and that its events fold back the same."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from commands.folders.aggregate import FolderStateError, VFolder
from events.catalogue import CATALOGUE
from events.domain.vfolder import VFolderCloned, VFolderUsageMeasured
from events.envelope import Cause
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.vfolder import FolderStatus, OwnerKind, Permission, auto_mounted

T0 = datetime(2026, 11, 25, 12, tzinfo=UTC)
OWNER, OTHER = "user-ada", "user-bob"
F = FolderStatus


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def folder(owner_kind: OwnerKind = OwnerKind.USER, **fields: object) -> VFolder:
    owner = OWNER if owner_kind is OwnerKind.USER else "project-vision"
    made = VFolder.create(
        "f-1",
        "data",
        owner_kind,
        owner,
        "lab",
        "local",
        T0,
        **fields,  # type: ignore[arg-type]
    )
    made.collect(CAUSE)
    return made


CAUSE = Cause(causation_id="c", correlation_id="c", actor=Actor.service("t"), tenant=SYSTEM_TENANT)


def then(aggregate: VFolder) -> list[str]:
    return [envelope.name for envelope in aggregate.collect(CAUSE)]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "x" * 65, "caf\u00e9", "a\x00"])
def test_a_folder_name_is_plain(name: str) -> None:
    with pytest.raises(FolderStateError, match="name"):
        VFolder.create("f-1", name, OwnerKind.USER, OWNER, "lab", "local", T0)


def test_a_dot_folder_is_mounted_everywhere() -> None:
    assert auto_mounted(".config") and not auto_mounted("config")


def test_rename_records_only_a_change() -> None:
    made = folder()
    assert made.rename("results", at(1)) and then(made) == ["VFolderRenamed"]
    assert not made.rename("results", at(2)) and then(made) == []


def test_purge_only_from_the_trash_and_nothing_after() -> None:
    made = folder()
    with pytest.raises(FolderStateError, match="move it to the trash before purging"):
        made.purge("", at(1))
    assert made.trash("done", at(2)) and made.status is F.TRASHED
    assert not made.mountable
    with pytest.raises(FolderStateError, match="cannot be renamed"):
        made.rename("x", at(3))
    assert made.restore(at(4))
    assert (made.status, made.mountable) == (F.READY, True)
    made.trash("done", at(5))
    assert made.purge("for good", at(6))
    assert (made.status, made.mountable) == (F.PURGED, False)
    assert then(made)[-1] == "VFolderPurged"
    with pytest.raises(FolderStateError, match="nothing is left to restore"):
        made.restore(at(7))
    with pytest.raises(FolderStateError, match="cannot be trashed"):
        made.trash("", at(8))


def test_sharing_goes_through_an_invitation() -> None:
    made = folder()
    assert made.permission_of(OTHER) is None
    assert made.invite(OTHER, Permission.READ_ONLY, at(1))
    assert made.permission_of(OTHER) is None  # invited is not shared
    assert made.accept(OTHER, at(2))
    assert made.permission_of(OTHER) is Permission.READ_ONLY
    assert made.invite(OTHER, Permission.READ_WRITE, at(3))  # a sharer's permission changes
    assert made.permission_of(OTHER) is Permission.READ_WRITE
    assert then(made) == ["VFolderInvited", "VFolderInvitationAccepted", "VFolderShareChanged"]
    assert made.revoke(OTHER, at(4)) and made.permission_of(OTHER) is None
    assert not made.revoke(OTHER, at(5))


def test_declined_and_left_and_the_owners_own_rights() -> None:
    made = folder()
    made.invite(OTHER, Permission.READ_WRITE, at(1))
    assert made.decline(OTHER, at(2)) and made.invitations == {}
    with pytest.raises(FolderStateError, match="no invitation"):
        made.accept(OTHER, at(3))
    made.invite(OTHER, Permission.READ_WRITE, at(4))
    made.accept(OTHER, at(5))
    assert made.leave(OTHER, at(6)) and made.shares == {}
    with pytest.raises(FolderStateError, match="is not shared with"):
        made.leave(OTHER, at(7))
    with pytest.raises(FolderStateError, match="already its owner's"):
        made.invite(OWNER, Permission.READ_ONLY, at(8))
    assert made.permission_of(OWNER) is Permission.READ_WRITE_DELETE


def test_a_project_folder_is_its_members_and_is_not_shared_by_invitation() -> None:
    made = folder(OwnerKind.PROJECT)
    assert made.permission_of(OTHER, member=True) is Permission.READ_WRITE
    assert made.permission_of(OTHER) is None
    with pytest.raises(FolderStateError, match="its members share it already"):
        made.invite(OTHER, Permission.READ_ONLY, at(1))


def test_permissions_include_the_lesser_ones() -> None:
    assert Permission.READ_WRITE_DELETE.allows(Permission.READ_WRITE)
    assert Permission.READ_WRITE.allows(Permission.READ_ONLY)
    assert not Permission.READ_ONLY.allows(Permission.READ_WRITE)


def test_quota_and_usage() -> None:
    made = folder(quota_bytes=1 << 30)
    assert made.quota_bytes == 1 << 30
    assert made.set_quota(None, at(1)) and made.quota_bytes is None
    with pytest.raises(FolderStateError, match="quota must be"):
        made.set_quota(0, at(2))
    assert made.measured(4096, 2, at(3)) and (made.bytes_used, made.files) == (4096, 2)
    assert not made.measured(4096, 2, at(4))
    assert made.measured(4096, 2, at(5), links=1, others=1)  # a symlink and a FIFO appeared
    assert (made.links, made.others) == (1, 1)
    assert not made.measured(4096, 2, at(6), links=1, others=1)
    with pytest.raises(FolderStateError, match="negative"):
        made.measured(-1, 0, at(7))
    with pytest.raises(FolderStateError, match="negative"):
        made.measured(0, 0, at(7), others=-1)


def test_a_clone_is_ready_once_copied_or_failed() -> None:
    clone = folder(cloned_from="f-0")
    assert clone.status is F.CLONING and not clone.mountable
    with pytest.raises(FolderStateError, match="cannot be shared"):
        clone.invite(OTHER, Permission.READ_ONLY, at(1))
    assert clone.cloned(10, 1, at(2), links=3)
    assert (clone.status, clone.bytes_used, clone.files, clone.links) == (F.READY, 10, 1, 3)
    assert not clone.cloned(10, 1, at(3))
    failed = folder(cloned_from="f-0")
    assert failed.clone_failed("disk full", at(1)) and failed.status is F.CLONE_FAILED
    assert failed.trash("", at(2))


def test_its_events_fold_back_into_the_same_folder() -> None:
    made = VFolder.create("f-9", "data", OwnerKind.USER, OWNER, "lab", "local", T0)
    made.invite(OTHER, Permission.READ_ONLY, at(1))
    made.accept(OTHER, at(2))
    made.measured(7, 1, at(3), links=2, others=1)
    made.rename("renamed", at(4))
    envelopes = made.collect(CAUSE)
    again = VFolder.rehydrate(envelopes)
    assert again is not None
    assert (again.name, again.shares, again.bytes_used, again.status) == (
        "renamed",
        {OTHER: Permission.READ_ONLY},
        7,
        F.READY,
    )
    assert (again.files, again.links, again.others) == (1, 2, 1)
    restored = VFolder.from_snapshot(again.snapshot(9, at(5)))
    assert restored.state() == again.state()


def test_a_v1_usage_event_is_read_with_no_links_or_others() -> None:
    """v1 counted symlinks and other entries in ``files``: the count cannot be split, so it
    stays as it was, and the folder reads as having no links or others until measured again."""
    made = VFolder.create("f-9", "data", OwnerKind.USER, OWNER, "lab", "local", T0)
    made.measured(7, 3, at(1))
    created, measured = made.collect(CAUSE)
    v1 = measured.model_copy(update={"schema_version": 1, "payload": {"bytes_used": 7, "files": 3}})

    upcast = CATALOGUE.upcast(v1)

    assert upcast.schema_version == VFolderUsageMeasured.schema_version == 2
    assert upcast.payload == {"bytes_used": 7, "files": 3, "links": 0, "others": 0}
    again = VFolder.rehydrate([created, v1])
    assert again is not None
    assert (again.bytes_used, again.files, again.links, again.others) == (7, 3, 0, 0)


def test_a_v1_clone_event_is_read_with_no_links_or_others() -> None:
    v1 = {"bytes_used": 10, "files": 2}
    clone = folder(cloned_from="f-0")
    clone.cloned(10, 2, at(1))
    (cloned,) = clone.collect(CAUSE)
    upcast = CATALOGUE.upcast(cloned.model_copy(update={"schema_version": 1, "payload": v1}))
    assert upcast.schema_version == VFolderCloned.schema_version == 2
    assert upcast.payload == {**v1, "links": 0, "others": 0}
