"""Stream set-up and the server checks, against real nats-servers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from events.bus import (
    Bus,
    ServerUnsuitableError,
    check_server_version,
    connect,
    ensure_streams,
)
from events.snapshots import Snapshot, SnapshotStore
from jetyard.runtime.natsserver import NatsServer, free_port
from schemas.settings import NatsSettings
from schemas.subjects import (
    COMMANDS_STREAM,
    EVENTS_STREAM,
    HEARTBEATS_BUCKET,
    OUTCOMES_STREAM,
    PARKED_STREAM,
    AggregateType,
)
from tests.support import ref


def test_old_servers_are_refused_with_the_reason() -> None:
    with pytest.raises(ServerUnsuitableError, match=r"2\.11\.9 is too old.*2\.12\.3"):
        check_server_version((2, 11, 9))
    check_server_version((2, 12, 3))
    check_server_version((3, 0, 0))


async def test_streams_have_the_designed_settings(bus: Bus) -> None:
    events = (await bus.js.stream_info(EVENTS_STREAM)).config
    assert events.subjects == ["ev.>"]
    assert events.deny_delete and events.deny_purge
    assert events.allow_atomic and events.allow_direct
    assert events.max_msg_size == 256 * 1024
    assert events.duplicate_window == 60
    assert not events.allow_msg_ttl
    commands = (await bus.js.stream_info(COMMANDS_STREAM)).config
    assert str(commands.retention) in {"workqueue", "RetentionPolicy.WORK_QUEUE"}
    assert commands.max_age == 86_400
    outcomes = (await bus.js.stream_info(OUTCOMES_STREAM)).config
    assert outcomes.max_msgs_per_subject == 1 and outcomes.max_age == 86_400
    assert (await bus.js.stream_info(PARKED_STREAM)).config.subjects == ["parked.>"]
    heartbeats = await bus.js.key_value(HEARTBEATS_BUCKET)
    status = await heartbeats.status()
    assert status.ttl == 3 * bus.settings.heartbeat_interval_s


async def test_declaring_twice_changes_nothing(bus: Bus) -> None:
    before = (await bus.js.stream_info(EVENTS_STREAM)).config
    await ensure_streams(bus)
    assert (await bus.js.stream_info(EVENTS_STREAM)).config == before


@pytest.fixture
def monitored_servers(tmp_path: Path) -> Iterator[tuple[NatsServer, NatsServer]]:
    lazy = NatsServer(data_dir=tmp_path / "lazy", monitor_port=free_port()).start()
    durable = NatsServer(
        data_dir=tmp_path / "durable", monitor_port=free_port(), sync_always=True
    ).start()
    yield lazy, durable
    lazy.stop()
    durable.stop()


async def test_production_mode_refuses_a_server_without_sync_always(
    monitored_servers: tuple[NatsServer, NatsServer],
) -> None:
    lazy, durable = monitored_servers
    with pytest.raises(ServerUnsuitableError, match="sync_always"):
        await connect(
            NatsSettings(url=lazy.url, monitor_url=lazy.monitor_url, production=True), name="t"
        )
    with pytest.raises(ServerUnsuitableError, match="MONITOR_URL"):
        await connect(NatsSettings(url=durable.url, production=True), name="t")
    accepted = await connect(
        NatsSettings(url=durable.url, monitor_url=durable.monitor_url, production=True), name="t"
    )
    await accepted.close()
    # Development mode does not ask.
    dev = await connect(NatsSettings(url=lazy.url), name="t")
    await dev.close()


async def test_a_token_protected_server_needs_the_token(tmp_path: Path) -> None:
    server = NatsServer(data_dir=tmp_path, token="s3cret").start()
    try:
        with pytest.raises(ConnectionError, match="Authorization Violation"):
            await connect(NatsSettings(url=server.url, connect_timeout_s=3.0), name="t")
        bus = await connect(NatsSettings(url=server.url, token="s3cret"), name="t")
        await ensure_streams(bus)
        await bus.close()
    finally:
        server.stop()


async def test_snapshots_keep_the_newest(bus: Bus) -> None:
    snapshots = await SnapshotStore.open(bus)
    aggregate = ref(AggregateType.NODE)
    assert await snapshots.load(aggregate) is None
    now = datetime(2026, 11, 21, tzinfo=UTC)

    def snap(version: int, seq: int) -> Snapshot:
        return Snapshot(
            aggregate_type=aggregate.type,
            aggregate_id=aggregate.id,
            version=version,
            seq=seq,
            taken_at=now,
            state={"v": version},
        )

    await snapshots.save(snap(10, 100))
    await snapshots.save(snap(5, 50))  # older: must not replace the newer one
    loaded = await snapshots.load(aggregate)
    assert loaded is not None and (loaded.version, loaded.seq, loaded.state) == (10, 100, {"v": 10})
