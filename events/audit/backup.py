"""``jetyard backup``: a consistent, sealed copy of a running installation's log in one file
(``events.audit.backup_file``), and the bucket entries that live nowhere else.

Consistent: the file holds every position up to the last one a seal covers when the backup
starts reading (waiting, bounded, for the sealer to cover the log's end as read at the
start), so every event in it is sealed and ``jetyard audit verify --backup`` checks all of it.
Buckets kept: keypair secret keys and registry passwords (both encrypted with the secrets
key, which the backup does not hold), password hashes, and each person's key to their
personal data. Everything else in buckets is derived from the log or short-lived. Written to a
temporary file, owner-only, and renamed into place when complete.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import nats.js.errors

from events.audit.backup_file import (
    BackupError,
    BucketEntry,
    Header,
    bucket_line,
    header_line,
    message_line,
    seal_line,
)
from events.audit.log_io import last_seal, read_messages, read_seals, stream_end
from events.bus import Bus
from schemas.subjects import (
    CREDENTIALS_BUCKET,
    PEOPLE_BUCKET,
    REGISTRY_SECRETS_BUCKET,
    SECRETS_BUCKET,
)

KEPT_BUCKETS = (SECRETS_BUCKET, REGISTRY_SECRETS_BUCKET, CREDENTIALS_BUCKET, PEOPLE_BUCKET)
"""The buckets a restore needs: what they hold is in no event."""
SEALED_POLL_S = 0.2


async def sealed_end(bus: Bus, *, wait_s: float) -> int:
    """The last sealed position, once it reaches the log's end as read now."""
    end = await stream_end(bus)
    deadline = time.monotonic() + wait_s
    while True:
        found = await last_seal(bus)
        sealed = found[0].last if found is not None else 0
        if sealed >= end:
            return sealed
        if time.monotonic() >= deadline:
            raise BackupError(
                f"the log ends at position {end} but its seals cover {sealed} after "
                f"{wait_s:g} s: is the sealer running (`jetyard serve sealer`)? (--unsealed "
                "writes the backup anyway, its tail unsealed)"
            )
        await asyncio.sleep(SEALED_POLL_S)


async def write_backup(
    bus: Bus, path: Path, *, wait_s: float = 30.0, unsealed: bool = False
) -> tuple[Header, int]:
    """Write the backup; its header and the number of events written."""
    end = await stream_end(bus) if unsealed else await sealed_end(bus, wait_s=wait_s)
    seals = [s for s in await read_seals(bus) if s.last <= end]
    sealed = seals[-1].last if seals else 0
    header = Header(datetime.now(UTC).isoformat(), end, sealed, len(seals), KEPT_BUCKETS)
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    written = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(header_line(header))
            for seal in seals:
                out.write(seal_line(seal))
            async for batch in read_messages(bus, until=end):
                out.writelines(message_line(m) for m in batch)
                written += len(batch)
            for bucket in KEPT_BUCKETS:
                for entry in await _entries(bus, bucket):
                    out.write(bucket_line(entry))
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return header, written


async def _entries(bus: Bus, bucket: str) -> list[BucketEntry]:
    try:
        kv = await bus.js.key_value(bucket)
    except nats.js.errors.BucketNotFoundError:
        return []
    try:
        keys = await kv.keys()
    except nats.js.errors.NoKeysError:
        return []
    out = []
    for key in sorted(keys):
        try:
            entry = await kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            continue  # deleted meanwhile
        if entry.value is not None:
            out.append(BucketEntry(bucket, key, entry.value))
    return out
