"""The vfolders view's pure folds (a folder's row from its events, a session's mounts from its
request and its end, both idempotent) and the gateway's reading rules over that row (who sees
a folder, with which permission, who manages it)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from commands.authorisation import Principal
from events.catalogue import Event
from events.domain.session import SessionRequested, SessionRequeued, SessionTerminated
from events.domain.vfolder import (
    VFolderCloned,
    VFolderCreated,
    VFolderInvitationAccepted,
    VFolderInvited,
    VFolderLeft,
    VFolderPurged,
    VFolderRenamed,
    VFolderShareRevoked,
    VFolderUsageMeasured,
)
from events.envelope import StoredEvent
from events.writes import AggregateRef
from projections.folders.tables import FolderRecord, member_rows
from projections.folders.view import apply_folder, apply_mounts
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import Role
from schemas.vfolder import FolderStatus, Mount, OwnerKind, Permission
from services.gateway.core.folder_lookup import manages, permission, scope_of, visible
from tests.support import NOW, envelope, ref

RO, RW, RWD = Permission.READ_ONLY, Permission.READ_WRITE, Permission.READ_WRITE_DELETE
CREATED = VFolderCreated(
    name="data", owner_kind=OwnerKind.USER, owner_id="ada", domain="lab", volume="local",
    quota_bytes=1000, creator="ada",
)  # fmt: skip


def stored(seq: int, aggregate: AggregateRef, version: int, event: Event) -> StoredEvent:
    env = envelope(aggregate, version, name=event.event_name, payload=event.model_dump(mode="json"))
    return StoredEvent(seq, env.model_copy(update={"occurred_at": NOW + timedelta(seconds=seq)}))


def fold(*events: Event) -> tuple[FolderRecord | None, AggregateRef]:
    folder = ref(AggregateType.VFOLDER)
    row = None
    for version, event in enumerate(events, 1):
        row = apply_folder(row, stored(version * 10, folder, version, event))
    return row, folder


def test_a_folder_row_follows_its_events() -> None:
    row, folder = fold(
        CREATED,
        VFolderRenamed(name="results"),
        VFolderInvited(user_id="bo", permission=RW),
        VFolderInvited(user_id="cy", permission=RO),
        VFolderInvitationAccepted(user_id="bo"),
        VFolderUsageMeasured(bytes_used=321, files=4, links=2, others=1),
    )
    assert row is not None and row.id == folder.id
    assert (row.name, row.status, row.quota_bytes, row.bytes_used, row.files) == (
        "results", FolderStatus.READY, 1000, 321, 4,
    )  # fmt: skip
    assert (row.links, row.others) == (2, 1)
    assert row.shares == {"bo": RW} and row.invitations == {"cy": RO}
    assert (row.created_seq, row.last_seq) == (10, 60)
    assert row.updated_at == NOW + timedelta(seconds=60)
    assert member_rows(row)[(folder.id, "bo")]["kind"] == "share"

    # The same event again, or an older one, changes nothing.
    again = apply_folder(row, stored(60, folder, 6, VFolderUsageMeasured(bytes_used=1, files=1)))
    assert again is row
    left = apply_folder(row, stored(70, folder, 7, VFolderLeft(user_id="bo")))
    revoked = apply_folder(left, stored(80, folder, 8, VFolderShareRevoked(user_id="cy")))
    assert revoked is not None and (revoked.shares, revoked.invitations) == ({}, {})


def test_a_clone_is_cloning_until_copied_and_a_purge_empties_the_row() -> None:
    clone = CREATED.model_copy(update={"cloned_from": "src"})
    row, _ = fold(clone)
    assert row is not None and row.status is FolderStatus.CLONING and row.cloned_from == "src"
    row, _ = fold(clone, VFolderCloned(bytes_used=50, files=2, links=1))
    assert row is not None and (row.status, row.bytes_used) == (FolderStatus.READY, 50)
    assert (row.files, row.links, row.others) == (2, 1, 0)
    row, _ = fold(
        CREATED, VFolderInvited(user_id="bo", permission=RO),
        VFolderUsageMeasured(bytes_used=5, files=1, links=1, others=1),
        VFolderPurged(reason="gone"),
    )  # fmt: skip
    assert row is not None and row.status is FolderStatus.PURGED and row.invitations == {}
    assert (row.bytes_used, row.files, row.links, row.others) == (0, 0, 0, 0)


def test_a_v1_measurement_folds_with_no_links_or_others() -> None:
    row, folder = fold(CREATED)
    v1 = stored(20, folder, 2, VFolderUsageMeasured(bytes_used=9, files=3))
    v1 = StoredEvent(
        v1.seq,
        v1.envelope.model_copy(
            update={"schema_version": 1, "payload": {"bytes_used": 9, "files": 3}}
        ),
    )
    row = apply_folder(row, v1)
    assert row is not None
    assert (row.bytes_used, row.files, row.links, row.others) == (9, 3, 0, 0)
    assert fold(VFolderRenamed(name="x"))[0] is None  # never created: nothing to change


def test_mounts_are_recorded_once_and_end_with_the_session() -> None:
    session = ref(AggregateType.SESSION)
    spec = SessionSpec(image="i", kernels=(KernelSpec(resources=ResourceSlots(cpu_milli=1)),))
    mounts = (
        Mount(folder_id="f1", name="a", volume="local", path="/a", read_only=True),
        Mount(folder_id="f1", name="a", volume="local", path="/b", read_only=False),
        Mount(folder_id="f2", name="b", volume="local", path="/c", read_only=True),
    )
    requested = stored(5, session, 1, SessionRequested(spec=spec, kernel_ids=("k",), mounts=mounts))
    rows = apply_mounts([], requested)
    assert {(m.folder_id, m.read_only, m.live) for m in rows} == {
        ("f1", False, True), ("f2", True, True),
    }  # fmt: skip
    assert apply_mounts(rows, requested) is rows
    requeued = stored(
        6, session, 2, SessionRequeued(reason="node lost", kernel_ids=("k2",), attempt=1)
    )
    assert apply_mounts(rows, requeued) == rows
    ended = apply_mounts(rows, stored(7, session, 3, SessionTerminated(reason="done")))
    assert not any(m.live for m in ended)
    assert apply_mounts(ended, requested) == ended  # a replayed request revives nothing
    assert apply_mounts([], stored(8, session, 1, SessionRequested(spec=spec, kernel_ids=()))) == []


def person(user: str, role: Role = Role.USER, domain: str = "lab", *projects: str) -> Principal:
    return Principal(user, role, domain, frozenset(projects), None)


def test_who_sees_a_folder_and_with_which_permission() -> None:
    row, _ = fold(CREATED, VFolderInvited(user_id="cy", permission=RW))
    assert row is not None
    shared = replace(row, shares={"bo": RO})
    team = replace(row, owner_kind=OwnerKind.PROJECT, owner_id="p1")
    cases = [
        (shared, person("ada"), True, RWD, True),
        (shared, person("bo"), True, RO, False),
        (shared, person("cy"), True, None, False),  # invited: sees it, holds nothing yet
        (shared, person("dee"), False, None, False),
        (shared, person("adm", Role.ADMIN), True, RWD, True),
        (shared, person("adm", Role.ADMIN, "elsewhere"), False, None, False),
        (shared, person("mon", Role.MONITOR), True, None, False),
        (shared, person("root", Role.SUPERADMIN, "system"), True, RWD, True),
        (team, person("dee", Role.USER, "lab", "p1"), True, RW, False),
        (team, person("ada"), False, None, False),
    ]
    for record, who, sees, holds, manager in cases:
        assert visible(record, who) is sees, who
        assert permission(record, who) is holds, who
        assert manages(record, who) is manager, who


def test_a_listing_is_scoped_by_role() -> None:
    assert scope_of(person("root", Role.SUPERADMIN)).domain is None
    assert scope_of(person("adm", Role.ADMIN)).domain == "lab"
    assert scope_of(person("mon", Role.MONITOR)).user_id is None
    user = scope_of(person("ada", Role.USER, "lab", "p1"))
    assert (user.domain, user.user_id, user.projects) == (None, "ada", frozenset({"p1"}))
