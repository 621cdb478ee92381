"""The sealer on a real nats-server: it seals every event of the log, a backup of the log
verifies, and each tampering of the exported file is found at its position. Two sealers make
one chain; a restarted one goes on from its last seal."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from events.audit.backup import write_backup
from events.audit.backup_file import BackupError
from events.audit.checks import verify_backup, verify_log
from events.audit.log_io import last_seal, read_seals, stream_end
from events.audit.seals import SealError, trusted
from events.bus import Bus
from events.domain.session import SessionRequested
from events.envelope import Envelope
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.runtime.natsserver import NatsServer
from schemas.ids import event_id_for, new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.settings import NatsSettings
from schemas.subjects import SEALS_STREAM, SEALS_SUBJECT, AggregateType
from services.sealer.service import Sealer
from services.sealer.settings import SealerSettings
from tests.integration.scheduler_support import eventually
from tests.nats_support import bus_with_streams, nats_server_in, settings_of

KEY = Ed25519PrivateKey.generate()
KEYS = trusted([KEY.public_key()])


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with nats_server_in(tmp_path_factory) as server:
        yield server


@pytest.fixture(scope="module")
def nats_settings(nats_server: NatsServer) -> NatsSettings:
    return settings_of(nats_server)


@pytest.fixture(scope="module")
async def bus(nats_settings: NatsSettings) -> AsyncIterator[Bus]:
    async with bus_with_streams(nats_settings, "tests-audit") as connected:
        yield connected


def settings(tmp: Path, every: int = 40) -> SealerSettings:
    return SealerSettings(key_file=tmp / "unused", every_events=every, every_s=0.3)


@contextlib.asynccontextmanager
async def sealing(bus: Bus, tmp: Path, every: int = 40) -> AsyncIterator[Sealer]:
    sealer = Sealer(bus, settings(tmp, every), KEY)
    stop = asyncio.Event()
    task = asyncio.create_task(sealer.run(stop))
    try:
        yield sealer
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await sealer.close()


async def write_events(bus: Bus, count: int) -> None:
    """``count`` new sessions' ``SessionRequested``, written side by side."""
    store = EventStore(bus)
    spec = SessionSpec(image="img", kernels=(KernelSpec(resources=ResourceSlots(cpu_milli=100)),))

    async def one() -> None:
        ref, cause = AggregateRef(AggregateType.SESSION, new_id()), new_id()
        requested = SessionRequested(spec=spec, kernel_ids=(new_id(),))
        envelope = Envelope(
            event_id=event_id_for(cause, ref.type.value, ref.id, 1),
            name=requested.event_name, schema_version=requested.schema_version,
            aggregate_type=ref.type, aggregate_id=ref.id, aggregate_version=1,
            occurred_at=datetime.now(UTC), causation_id=cause, correlation_id=cause,
            actor=Actor.service("tests"), tenant=SYSTEM_TENANT,
            payload=requested.model_dump(mode="json"),
        )  # fmt: skip
        await store.append(Write(ref, 0, (envelope,)))

    await asyncio.gather(*(one() for _ in range(count)))


async def sealed_to_end(bus: Bus, timeout: float = 20.0) -> int:
    end = await stream_end(bus)

    async def covered() -> bool:
        found = await last_seal(bus)
        return found is not None and found[0].last >= end

    await eventually(covered, timeout, f"a seal covers position {end}")
    return end


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def event_line(text: list[str], seq: int) -> int:
    return next(i for i, line in enumerate(text) if json.loads(line).get("seq") == seq)


def tampered(path: Path, name: str, text: list[str]) -> Path:
    out = path.with_name(name)
    out.write_text("".join(text))
    return out


async def test_a_backup_verifies_and_each_tampering_is_found_at_its_position(
    bus: Bus, tmp_path: Path
) -> None:
    async with sealing(bus, tmp_path):
        await write_events(bus, 130)
        end = await sealed_to_end(bus)
    online = await verify_log(bus, KEYS)
    assert online.ok, online.summary()
    assert (online.events, online.sealed_to, online.unsealed) == (end, end, 0)
    path = tmp_path / "backup.jsonl"
    header, written = await write_backup(bus, path, wait_s=5)
    assert (header.log_end, header.sealed_to, written) == (end, end, end)
    assert path.stat().st_mode & 0o777 == 0o600
    clean = verify_backup(path, KEYS)
    assert clean.ok and clean.events == end, clean.summary()

    text, target = lines(path), end // 2
    at = event_line(text, target)

    record_ = json.loads(text[at])
    data = bytearray(base64.b64decode(record_["data"]))
    data[10] ^= 0x20
    one_byte = [*text]
    one_byte[at] = json.dumps({**record_, "data": base64.b64encode(bytes(data)).decode()}) + "\n"
    removed = text[:at] + text[at + 1 :]
    swapped = [*text]
    swapped[at], swapped[at + 1] = text[at + 1], text[at]
    forged = json.dumps({**record_, "data": base64.b64encode(b'{"forged": 1}').decode()})
    inserted = [*text[:at], forged + "\n", *text[at:]]
    cases = {
        "one-byte": (one_byte, "changed"),
        "removed": (removed, "missing"),
        "swapped": (swapped, "missing"),
        "inserted": (inserted, "changed"),
    }
    for name, (body, kind) in cases.items():
        report = verify_backup(tampered(path, name, body), KEYS)
        assert report.problem is not None, name
        assert (report.problem.position, report.problem.kind) == (target, kind), name

    seals = await read_seals(bus)
    second = seals[1]
    forged_seal = second.model_copy(update={"head": "f" * 64})
    seal_at = next(i for i, line in enumerate(text) if '"seal"' in line and '"number": 2,' in line)
    replaced = [*text]
    replaced[seal_at] = json.dumps({"seal": forged_seal.model_dump(mode="json")}) + "\n"
    report = verify_backup(tampered(path, "seal", replaced), KEYS)
    assert report.problem is not None
    assert (report.problem.position, report.problem.kind) == (second.first, "seal")

    dropped_last_seal = [line for i, line in enumerate(text) if i != len(seals)]
    with pytest.raises(BackupError, match="counts"):
        verify_backup(tampered(path, "dropped", dropped_last_seal), KEYS)

    wrong_key = verify_backup(path, trusted([Ed25519PrivateKey.generate().public_key()]))
    assert wrong_key.problem is not None and wrong_key.problem.kind == "seal"


async def test_two_sealers_make_one_chain_and_a_restarted_one_goes_on(
    bus: Bus, tmp_path: Path
) -> None:
    async with sealing(bus, tmp_path, every=15) as one, sealing(bus, tmp_path, every=15) as two:
        await write_events(bus, 60)
        await sealed_to_end(bus)
    assert one.written + two.written >= 4
    numbers = [seal.number for seal in await read_seals(bus)]
    assert numbers == list(range(1, len(numbers) + 1))
    before = numbers[-1]
    await write_events(bus, 20)  # while no sealer runs
    async with sealing(bus, tmp_path, every=15) as again:
        end = await sealed_to_end(bus)
        assert again.last is not None and again.last.number > before
    report = await verify_log(bus, KEYS)
    assert report.ok and report.sealed_to == end, report.summary()


async def test_verifying_from_a_trusted_seal_reads_only_what_follows(
    bus: Bus, tmp_path: Path
) -> None:
    async with sealing(bus, tmp_path):
        await write_events(bus, 45)
        end = await sealed_to_end(bus)
    seals = await read_seals(bus)
    anchor = seals[-2]
    report = await verify_log(bus, KEYS, from_seal=anchor.number, anchor=anchor.digest())
    assert report.ok, report.summary()
    assert report.events == end - anchor.last
    with pytest.raises(SealError, match="no seal"):
        await verify_log(bus, KEYS, from_seal=10_000)


async def test_a_forged_message_on_the_seal_subject_stops_the_sealer_and_is_named(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    with nats_server_in(tmp_path_factory) as server:
        async with bus_with_streams(settings_of(server), "tests-audit-forged") as own:
            await write_events(own, 3)
            await own.js.publish(SEALS_SUBJECT, b'{"number": "not a seal"}', stream=SEALS_STREAM)
            with pytest.raises(SealError, match=f"{SEALS_STREAM} position 1: not a seal"):
                await Sealer(own, settings(tmp_path), KEY).resume()
            with pytest.raises(SealError, match="not a seal"):
                await verify_log(own, KEYS)
