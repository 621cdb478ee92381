"""The storage service's fold: which folders live sessions mount (from ``SessionRequested``
until a terminal status), which folders changed (to be made, given quotas, removed), and
which a read-write session has just left (to be measured). Pure, in memory."""

from __future__ import annotations

from events.catalogue import Event
from events.domain.session import (
    SessionCancelled,
    SessionFailed,
    SessionRequested,
    SessionRequeued,
    SessionTerminated,
)
from events.domain.vfolder import VFolderCreated, VFolderUsageMeasured
from events.envelope import StoredEvent
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.vfolder import Mount, OwnerKind
from services.storage.control.state import StorageState
from tests.unit.scenario import at, envelope_of

SPEC = SessionSpec(image="img", kernels=(KernelSpec(resources=ResourceSlots(cpu_milli=1)),))


class Log:
    def __init__(self) -> None:
        self.state = StorageState()
        self.seq = 0
        self.versions: dict[str, int] = {}

    def given(self, aggregate_id: str, *events: Event) -> None:
        for event in events:
            self.versions[aggregate_id] = self.versions.get(aggregate_id, 0) + 1
            self.seq += 1
            envelope = envelope_of(aggregate_id, self.versions[aggregate_id], event, at(self.seq))
            self.state.apply(StoredEvent(self.seq, envelope))


def mount(folder_id: str, *, read_only: bool = False) -> Mount:
    path = f"/home/work/{folder_id}"
    return Mount(
        folder_id=folder_id, name=folder_id, volume="local", path=path, read_only=read_only
    )


def requested(*mounts: Mount) -> SessionRequested:
    return SessionRequested(spec=SPEC, kernel_ids=("k1",), mounts=mounts)


def test_a_folder_is_mounted_until_every_session_mounting_it_ended() -> None:
    log = Log()
    log.given("s1", requested(mount("f1"), mount("f2", read_only=True)))
    log.given("s2", requested(mount("f1", read_only=True)))
    mounts = log.state.mounts
    assert mounts.mounted("f1") and mounts.mounted("f2") and not mounts.mounted("f3")
    log.given("s1", SessionRequeued(reason="node lost", kernel_ids=("k2",), attempt=1))
    assert mounts.mounted("f2")  # a requeued session keeps its mounts
    log.given("s1", SessionTerminated(reason="done"))
    assert mounts.mounted("f1") and not mounts.mounted("f2")
    assert list(log.state.to_measure) == ["f1"]  # written read-write: measured; f2 was ro
    log.given("s2", SessionFailed(reason="broken"))
    assert not mounts.mounted("f1")
    assert list(log.state.to_measure) == ["f1"]  # s2 mounted it read-only


def test_a_cancelled_session_frees_its_mounts_and_one_without_mounts_is_not_kept() -> None:
    log = Log()
    log.given("s1", requested(mount("f1")))
    log.given("s2", requested())
    log.given("s1", SessionCancelled(reason="cancelled"))
    assert not log.state.mounts.mounted("f1")
    assert log.state.mounts.by_session == {}


def test_folder_changes_are_noted_but_measurements_are_not() -> None:
    log = Log()
    woken: list[int] = []
    log.state.wake = lambda: woken.append(1)
    created = VFolderCreated(
        name="data", owner_kind="user", owner_id="u1", domain="d1", volume="local"
    )
    log.given("f1", created)
    log.state.changed.clear()
    log.given("f1", VFolderUsageMeasured(bytes_used=10, files=1))
    assert log.state.changed == {} and len(woken) == 1
    assert log.state.folders.bytes_used((OwnerKind.USER, "u1")) == 10
