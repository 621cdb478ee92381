"""``jetyard restore``: a verified backup into an empty installation, position for position.

Refuses a backup whose seals do not verify (``check_backup``, before anything is written), and
an installation whose log is not empty (``write_back``). Every event is written back in order
to the subject it had, with its ``Jy-*`` headers and its bytes, each guarded by
``Nats-Expected-Last-Sequence`` so that it lands at the position it had: the chain, and so
every seal, holds on the restored log as on the original. The seals follow onto ``JY_SEALS``,
then the kept bucket entries. Writes are pipelined (a window of ``WINDOW`` unanswered), each
answer checked against the position it must have. Services and views start from nothing and
fold the restored log like any other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nats.js import api

from events.audit.backup_file import BackupError, BackupReader
from events.audit.chain import LogMessage
from events.audit.checks import verify_backup
from events.audit.log_io import stream_end
from events.audit.seals import Seal
from events.audit.verify import VerifyReport
from events.bus import Bus
from events.store import EXPECTED_HEADER
from schemas.subjects import EVENTS_STREAM, SEALS_STREAM, SEALS_SUBJECT

WINDOW = 256
EXPECTED_LAST = "Nats-Expected-Last-Sequence"


class RestoreError(ValueError):
    """A restore refused before it wrote, or stopped where the target differed."""


@dataclass(frozen=True)
class Restored:
    events: int
    seals: int
    entries: int
    report: VerifyReport


def check_backup(
    path: Path, keys: dict[str, Ed25519PublicKey], *, unsealed: bool = False
) -> VerifyReport:
    """The backup's verification, or ``RestoreError`` saying why it is refused."""
    report = verify_backup(path, keys)
    if not report.ok:
        assert report.problem is not None
        raise RestoreError(
            f"the backup does not verify (position {report.problem.position}: "
            f"{report.problem.text}); nothing was restored"
        )
    if report.unsealed and not unsealed:
        raise RestoreError(
            f"the backup's last {report.unsealed} events are not sealed; --unsealed restores "
            "them anyway"
        )
    return report


async def write_back(bus: Bus, path: Path, report: VerifyReport) -> Restored:
    """Write a backup ``check_backup`` passed into the (empty) installation on ``bus``."""
    for stream in (EVENTS_STREAM, SEALS_STREAM):
        if await stream_end(bus, stream) != 0:
            raise RestoreError(
                f"{stream} is not empty: a backup is restored into a new installation only"
            )
    with BackupReader(path) as reader:
        events = await _write_in_place(bus, reader.messages())
        seals = await _write_seals(bus, reader.seals)
        entries = 0
        for entry in reader.entries():
            kv = await bus.js.key_value(entry.bucket)
            await kv.put(entry.key, entry.value)
            entries += 1
    return Restored(events, seals, entries, report)


async def _write_in_place(bus: Bus, messages: Iterator[LogMessage]) -> int:
    window: list[tuple[int, asyncio.Future[api.PubAck]]] = []
    written = 0
    previous = 0
    for message in messages:
        if message.seq != previous + 1:
            raise RestoreError(
                f"the backup goes from position {previous} to {message.seq}: a log with gaps "
                "cannot be written back position for position"
            )
        headers = {**message.headers, EXPECTED_LAST: str(previous)}
        future = await bus.js.publish_async(
            message.subject, message.data, stream=EVENTS_STREAM, headers=headers
        )
        window.append((message.seq, future))
        previous = message.seq
        if len(window) >= WINDOW:
            written += await _settle(window)
    return written + await _settle(window)


async def _settle(window: list[tuple[int, asyncio.Future[api.PubAck]]]) -> int:
    done = 0
    for seq, future in window:
        try:
            ack = await future
        except Exception as exc:
            raise RestoreError(f"position {seq} could not be written back: {exc!r}") from exc
        if ack.seq != seq:
            raise RestoreError(f"position {seq} was stored at {ack.seq}")
        done += 1
    window.clear()
    return done


async def _write_seals(bus: Bus, seals: list[Seal]) -> int:
    for at, seal in enumerate(seals):
        ack = await bus.js.publish(
            SEALS_SUBJECT, seal.to_bytes(), stream=SEALS_STREAM,
            headers={EXPECTED_HEADER: str(at)},
        )  # fmt: skip
        if ack.seq != at + 1:
            raise BackupError(f"seal {seal.number} was stored at {ack.seq}")
    return len(seals)
