"""The sessions view's pure ``apply``: rows and status history from session events, owners and
admission, idempotent; and its batch apply on an in-memory SQLite database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from events.catalogue import Event
from events.domain.session import (
    SessionAdmitted,
    SessionCancelled,
    SessionCreating,
    SessionFailed,
    SessionKernelExited,
    SessionKernelStarted,
    SessionPendingReasonChanged,
    SessionPreparing,
    SessionRequested,
    SessionRequeued,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from events.envelope import StoredEvent
from events.writes import AggregateRef
from projections.base import UnreadableEventError
from projections.db import create_engine, writing
from projections.sessions import tables as session_tables
from projections.sessions import view as sessions
from projections.sessions.tables import SessionRecord, StatusEntry
from projections.sessions.view import apply
from schemas.fair_share import FairShareStanding
from schemas.ids import kernel_id_for
from schemas.principal import Actor, ActorKind, Tenant
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode, KernelSpec, SessionSpec, SessionStatus, SessionType
from schemas.tenancy import SessionOwner
from tests.support import NOW, envelope, ref

OWNER = Actor(kind=ActorKind.USER, id="user-7")
TENANT = Tenant(domain="lab", project="vision")
SPEC = SessionSpec(
    image="cuda:12",
    kernels=(
        KernelSpec(resources=ResourceSlots(cpu_milli=2000, memory_bytes=2**30, gpu_hundredths=50)),
    ),
    command=("python", "train.py"),
    name="train-1",
)
OWNED = SessionOwner(access_key="AKTEST7", user_id="u-7", project_id="p-vision", domain="lab")


def stored(seq: int, session: AggregateRef, version: int, event: Event) -> StoredEvent:
    env = envelope(session, version, name=event.event_name, payload=event.model_dump(mode="json"))
    at = NOW + timedelta(seconds=version)
    return StoredEvent(
        seq, env.model_copy(update={"actor": OWNER, "tenant": TENANT, "occurred_at": at})
    )


def requested(
    seq: int, session: AggregateRef, owner: SessionOwner | None = None, spec: SessionSpec = SPEC
) -> StoredEvent:
    kernels = tuple(kernel_id_for(session.id, i) for i in range(len(spec.kernels)))
    return stored(seq, session, 1, SessionRequested(spec=spec, kernel_ids=kernels, owner=owner))


def fold(events: list[StoredEvent]) -> tuple[SessionRecord | None, list[StatusEntry]]:
    row: SessionRecord | None = None
    history: list[StatusEntry] = []
    for event in events:
        row, entry = apply(row, event)
        if entry is not None:
            history.append(entry)
    return row, history


def test_requested_creates_a_pending_row_with_what_was_asked() -> None:
    session = ref()
    row, entry = apply(None, requested(10, session))
    assert row is not None and entry is not None
    assert (row.id, row.created_seq, row.last_seq) == (session.id, 10, 10)
    assert (row.status, row.status_reason) == (SessionStatus.PENDING, "requested")
    assert (row.name, row.image, row.type, row.resource_group) == (
        "train-1",
        "cuda:12",
        "interactive",
        "default",
    )
    assert (row.cpu_milli, row.memory_bytes, row.gpu_hundredths) == (2000, 2**30, 50)
    assert row.command == ("python", "train.py")
    assert row.kernel_ids == (kernel_id_for(session.id, 0),)
    assert (row.project, row.owner_kind, row.owner_id) == ("vision", "user", "user-7")
    # From before tenancy: no owner, so no scopes, and admitted at once (as the aggregate is).
    assert (row.access_key, row.user_id, row.project_id, row.domain) == (None,) * 4
    assert (row.priority, row.admitted) == (10, True)
    assert (row.depends_on, row.starts_at, row.timeout_s, row.result) == ((), None, None, None)
    assert (row.cluster_mode, row.kernel_count) == ("single-node", 1)
    assert row.created_at == row.updated_at == NOW + timedelta(seconds=1)
    assert entry == StatusEntry(session.id, 10, SessionStatus.PENDING, "requested", row.created_at)


def test_an_owned_session_has_its_scopes_and_waits_for_admission() -> None:
    session = ref()
    urgent = SPEC.model_copy(update={"priority": 70})
    row, _ = apply(None, requested(3, session, OWNED, urgent))
    assert row is not None
    assert (row.access_key, row.user_id, row.project_id, row.domain) == (
        "AKTEST7",
        "u-7",
        "p-vision",
        "lab",
    )
    assert (row.priority, row.admitted) == (70, False)

    row, entry = apply(row, stored(4, session, 2, SessionAdmitted()))
    assert row is not None and entry is not None
    # Still PENDING with a new reason, and a line in the timeline like any reason change.
    assert (row.status, row.status_reason, row.admitted, row.last_seq) == (
        SessionStatus.PENDING,
        "admitted",
        True,
        4,
    )
    assert entry == StatusEntry(session.id, 4, SessionStatus.PENDING, "admitted", row.updated_at)
    assert apply(row, stored(4, session, 2, SessionAdmitted())) == (row, None)


def test_every_status_change_is_recorded_with_its_reason() -> None:
    session = ref()
    kernel = kernel_id_for(session.id, 0)
    changes: list[Event] = [
        SessionPendingReasonChanged(reason="fits nowhere: gpu"),
        SessionScheduled(placements={kernel: "node-a"}, reason="placed"),
        SessionPreparing(reason="pulling image"),
        SessionCreating(reason="creating container"),
        SessionStarted(reason="kernel started"),
        SessionTerminating(reason="user asked"),
        SessionTerminated(reason="kernel exited", exit_code=3),
    ]
    events = [requested(1, session)]
    events += [stored(10 + i, session, 2 + i, e) for i, e in enumerate(changes)]
    row, history = fold(events)
    assert row is not None
    assert (row.status, row.status_reason, row.exit_code) == (
        SessionStatus.TERMINATED,
        "kernel exited",
        3,
    )
    assert row.node_ids == ("node-a",)
    assert (row.created_seq, row.last_seq) == (1, 16)
    assert row.updated_at == NOW + timedelta(seconds=8)
    assert [(h.seq, h.status, h.reason) for h in history] == [
        (1, SessionStatus.PENDING, "requested"),
        (10, SessionStatus.PENDING, "fits nowhere: gpu"),
        (11, SessionStatus.SCHEDULED, "placed"),
        (12, SessionStatus.PREPARING, "pulling image"),
        (13, SessionStatus.CREATING, "creating container"),
        (14, SessionStatus.RUNNING, "kernel started"),
        (15, SessionStatus.TERMINATING, "user asked"),
        (16, SessionStatus.TERMINATED, "kernel exited"),
    ]


BATCH = SPEC.model_copy(
    update={
        "type": SessionType.BATCH,
        "kernels": SPEC.kernels * 3,
        "cluster_mode": ClusterMode.MULTI_NODE,
        "depends_on": ("dep-1", "dep-2"),
        "starts_at": NOW + timedelta(hours=2),
        "timeout_s": 600,
    }
)


def test_a_batch_cluster_session_keeps_what_was_asked_and_its_result() -> None:
    session = ref()
    kernels = [kernel_id_for(session.id, i) for i in range(3)]
    row, _ = apply(None, requested(1, session, spec=BATCH))
    assert row is not None
    assert (row.depends_on, row.starts_at, row.timeout_s) == (
        ("dep-1", "dep-2"),
        NOW + timedelta(hours=2),
        600,
    )
    assert (row.cluster_mode, row.kernel_count, row.type) == ("multi-node", 3, "batch")
    assert row.cpu_milli == 3 * 2000  # the whole session's request
    changes: list[Event] = [
        SessionScheduled(placements=dict.fromkeys(kernels, "n1"), reason="placed"),
        *(SessionKernelStarted(kernel_id=k) for k in kernels),
        SessionStarted(reason="all 3 kernels started"),
        SessionKernelExited(kernel_id=kernels[0], exit_code=0, reason="exited"),
        SessionTerminating(reason="main1: exited"),
    ]
    row, history = fold(
        [requested(1, session, spec=BATCH)]
        + [stored(2 + i, session, 2 + i, e) for i, e in enumerate(changes)]
    )
    assert row is not None
    # Kernel events change no status: the timeline has the session's changes only.
    assert [h.status for h in history] == [
        SessionStatus.PENDING,
        SessionStatus.SCHEDULED,
        SessionStatus.RUNNING,
        SessionStatus.TERMINATING,
    ]
    assert (row.status, row.result, row.exit_code) == (SessionStatus.TERMINATING, None, None)

    done = stored(20, session, 20, SessionTerminated(reason="main1: exited", exit_code=0))
    ended, _ = apply(row, done)
    assert ended is not None and (ended.result, ended.exit_code) == ("success", 0)
    failed = stored(20, session, 20, SessionTerminated(reason="main1: exited", exit_code=2))
    ended, _ = apply(row, failed)
    assert ended is not None and (ended.result, ended.exit_code) == ("failure", 2)


def test_cancelled_and_failed_sessions_end_with_their_reason() -> None:
    cancelled, failed = ref(), ref()
    row, _ = fold(
        [requested(1, cancelled), stored(2, cancelled, 2, SessionCancelled(reason="user asked"))]
    )
    assert row is not None and (row.status, row.status_reason, row.result) == (
        SessionStatus.CANCELLED,
        "user asked",
        None,
    )
    row, _ = fold([requested(3, failed), stored(4, failed, 2, SessionFailed(reason="never fits"))])
    assert row is not None and (row.status, row.status_reason) == (
        SessionStatus.ERROR,
        "never fits",
    )
    assert row.exit_code is None and row.node_ids == ()
    assert row.result == "failure"


def test_a_requeued_session_waits_again_with_its_new_kernels() -> None:
    session = ref()
    kernel = kernel_id_for(session.id, 0)
    requeued = SessionRequeued(
        reason="node-lost: ...; requeue 1 of 3", kernel_ids=("k-2",), attempt=1
    )
    row, history = fold(
        [
            requested(1, session),
            stored(2, session, 2, SessionScheduled(placements={kernel: "n-1"}, reason="placed")),
            stored(3, session, 3, SessionStarted(reason="started")),
            stored(4, session, 4, requeued),
            stored(5, session, 5, SessionScheduled(placements={"k-2": "n-2"}, reason="placed")),
        ]
    )
    assert row is not None and row.status is SessionStatus.SCHEDULED
    assert (row.kernel_ids, row.node_ids) == (("k-2",), ("n-2",))
    assert [h.status for h in history][-2:] == [SessionStatus.PENDING, SessionStatus.SCHEDULED]
    assert history[-2].reason.endswith("requeue 1 of 3")


def test_an_event_already_applied_changes_nothing() -> None:
    session = ref()
    first = requested(5, session)
    failed = stored(9, session, 2, SessionFailed(reason="boom"))
    row, _ = fold([first, failed])
    # Redelivered, or older than what the row has seen: same row, no history entry.
    for again in (first, failed, stored(7, session, 2, SessionCancelled(reason="late"))):
        assert apply(row, again) == (row, None)


def test_changes_to_a_session_never_created_are_ignored() -> None:
    assert apply(None, stored(3, ref(), 2, SessionStarted(reason="kernel started"))) == (None, None)


async def test_batch_apply_writes_rows_and_history_once_on_sqlite() -> None:
    engine = create_engine("sqlite+aiosqlite://")
    t = session_tables.tables()
    one, two, three = ref(), ref(), ref()
    batch = [
        requested(1, one),
        requested(2, two, OWNED),
        stored(
            3,
            one,
            2,
            SessionScheduled(placements={kernel_id_for(one.id, 0): "n1"}, reason="placed"),
        ),
        stored(4, two, 2, SessionCancelled(reason="user asked")),
        stored(5, one, 3, SessionStarted(reason="kernel started")),
        requested(6, three, OWNED, BATCH),
        stored(7, three, 2, SessionAdmitted()),
    ]
    try:
        async with writing(engine) as conn:
            await conn.run_sync(t.metadata.create_all)
        for _ in range(2):  # the second time is a redelivery: nothing may change
            async with writing(engine) as conn:
                await sessions.apply_batch(conn, "", batch)
            async with engine.connect() as conn:
                rows = {r.id: r for r in await conn.execute(select(t.sessions))}
                history = (await conn.execute(select(t.history).order_by(t.history.c.seq))).all()
            assert {k: (r.status, r.node_ids, r.last_seq) for k, r in rows.items()} == {
                one.id: ("RUNNING", ["n1"], 5),
                two.id: ("CANCELLED", [], 4),
                three.id: ("PENDING", [], 7),
            }
            assert [(h.session_id, h.seq, h.status) for h in history] == [
                (one.id, 1, "PENDING"),
                (two.id, 2, "PENDING"),
                (one.id, 3, "SCHEDULED"),
                (two.id, 4, "CANCELLED"),
                (one.id, 5, "RUNNING"),
                (three.id, 6, "PENDING"),
                (three.id, 7, "PENDING"),
            ]
            assert rows[one.id].created_at.tzinfo is not None  # aware on SQLite too
            back = session_tables.from_row(rows[three.id])
            assert (back.depends_on, back.starts_at, back.timeout_s, back.kernel_count) == (
                ("dep-1", "dep-2"),
                NOW + timedelta(hours=2),
                600,
                3,
            )
            assert {k: (r.domain, r.user_id, r.priority, r.admitted) for k, r in rows.items()} == {
                one.id: (None, None, 10, True),
                two.id: ("lab", "u-7", 10, False),
                three.id: ("lab", "u-7", 10, True),
            }
    finally:
        await engine.dispose()


async def test_an_event_the_view_cannot_read_fails_the_batch_naming_it() -> None:
    # The projector then applies the batch one event at a time and quarantines this one
    # (tests/integration/test_poison_events.py); the view never skips it silently.
    engine = create_engine("sqlite+aiosqlite://")
    t = session_tables.tables()
    good, bad = ref(), ref()
    broken = StoredEvent(2, envelope(bad, 1, name="SessionRequested", payload={"spec": "?"}))
    try:
        async with engine.begin() as conn:
            await conn.run_sync(t.metadata.create_all)
        with pytest.raises(UnreadableEventError, match="cannot read SessionRequested"):
            async with writing(engine) as conn:
                await sessions.apply_batch(conn, "", [requested(1, good), broken])
    finally:
        await engine.dispose()


async def test_a_waiting_sessions_fair_share_is_kept_while_it_waits_and_read_back() -> None:
    session = ref()
    standing = FairShareStanding(domain=0.81, project=0.81, user=0.76)
    events = [
        requested(1, session, OWNED),
        stored(2, session, 2, SessionAdmitted()),
        stored(
            3, session, 3, SessionPendingReasonChanged(reason="r; fair share", fair_share=standing)
        ),
    ]
    row, _ = fold(events)
    assert row is not None and row.fair_share == standing
    placed = SessionScheduled(placements={kernel_id_for(session.id, 0): "n1"}, reason="placed")
    after, _ = fold([*events, stored(4, session, 4, placed)])
    assert after is not None and after.fair_share is None  # said only while it waits
    engine = create_engine("sqlite+aiosqlite://")
    t = session_tables.tables()
    try:
        async with writing(engine) as conn:
            await conn.run_sync(t.metadata.create_all)
            await sessions.apply_batch(conn, "", events)
        async with engine.connect() as conn:
            (stored_row,) = (await conn.execute(select(t.sessions))).all()
        assert session_tables.from_row(stored_row).fair_share == standing
    finally:
        await engine.dispose()
