"""Verifying a whole log against its seals, from NATS or from a backup file: the drivers of
``events.audit.verify.Verifier``. Reads only."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from events.audit.backup_file import BackupError, BackupReader
from events.audit.log_io import read_messages, read_seals
from events.audit.seals import Seal, SealError
from events.audit.verify import Problem, Verifier, VerifyReport
from events.bus import Bus


def _start(seals: list[Seal], number: int | None) -> Seal | None:
    if number is None:
        return None
    for seal in seals:
        if seal.number == number:
            return seal
    raise SealError(f"there is no seal {number} (the log has {len(seals)})")


async def verify_log(
    bus: Bus,
    keys: dict[str, Ed25519PublicKey],
    *,
    from_seal: int | None = None,
    anchor: str | None = None,
) -> VerifyReport:
    """The log on NATS, from its start (or from seal ``from_seal``, trusted by ``anchor``)."""
    seals = await read_seals(bus)
    start = _start(seals, from_seal)
    verifier = Verifier(seals, keys, start=start, anchor=anchor)
    async for batch in read_messages(bus, after=start.last if start else 0):
        for message in batch:
            if not verifier.message(message):
                return verifier.finish()
    return verifier.finish()


def verify_backup(
    path: Path,
    keys: dict[str, Ed25519PublicKey],
    *,
    from_seal: int | None = None,
    anchor: str | None = None,
) -> VerifyReport:
    """A backup file, read once."""
    with BackupReader(path) as reader:
        if reader.header.seals != len(reader.seals):
            raise BackupError(
                f"{path}: its header counts {reader.header.seals} seals, it holds "
                f"{len(reader.seals)}"
            )
        verifier = Verifier(
            reader.seals, keys, start=_start(reader.seals, from_seal), anchor=anchor
        )
        for message in reader.messages():
            if not verifier.message(message):
                break
        report = verifier.finish()
    if report.ok and report.sealed_to < reader.header.sealed_to:
        report.problem = Problem(
            report.sealed_to + 1, "missing",
            f"the backup says it is sealed up to position {reader.header.sealed_to}, its seals "
            f"cover {report.sealed_to}: seals removed",
        )  # fmt: skip
    return report
