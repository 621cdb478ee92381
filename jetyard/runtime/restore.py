"""``jetyard restore --data-dir DIR``: a backup into a new ``jetyard up`` data directory.

The directory is locked as ``jetyard up`` locks it, given the old installation's secrets key
(the backup's keypair secrets and registry passwords are sealed with it) and, if given, its
sealing key; its own NATS server is started on it, the backup written in
(``events.audit.restore``), and the server stopped. ``jetyard up --data-dir DIR`` then starts
the installation: its services and views fold the restored log from the start.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from events.audit.restore import Restored, RestoreError, check_backup, write_back
from events.audit.seals import load_signing_key, public_path
from events.audit.verify import VerifyReport
from events.bus import connect, ensure_streams
from jetyard.runtime.bootstrap import nats_token, owner_only
from jetyard.runtime.data_dir import SEAL_KEY_FILE, DataDirLock, kept_nats_port
from jetyard.runtime.natsserver import NatsServer
from schemas.settings import NatsSettings

SECRETS_KEY_FILE = "secrets.key"


def restore_into(
    data_dir: Path,
    backup: Path,
    keys: dict[str, Ed25519PublicKey],
    *,
    secrets_key: Path | None,
    seal_key: Path | None = None,
    unsealed: bool = False,
) -> Restored:
    report = check_backup(backup, keys, unsealed=unsealed)  # before anything is made
    if secrets_key is None and not (data_dir / SECRETS_KEY_FILE).exists():
        _keep_secrets_key(data_dir, None)  # refuses, saying what to give
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = DataDirLock(data_dir)
    lock.acquire()
    try:
        if (data_dir / "nats").exists():
            raise RestoreError(
                f"{data_dir} already holds an installation's log: restore into a new directory"
            )
        _keep_secrets_key(data_dir, secrets_key)
        if seal_key is not None:
            _keep_seal_key(data_dir, seal_key)
        port, _ = kept_nats_port(data_dir, 0)
        server = NatsServer(data_dir=data_dir / "nats", port=port, token=nats_token(data_dir))
        server.start()
        try:
            settings = NatsSettings(url=server.url, token=server.token)
            return asyncio.run(_restore(settings, backup, report))
        finally:
            server.stop()
    finally:
        lock.release()


async def _restore(settings: NatsSettings, backup: Path, report: VerifyReport) -> Restored:
    bus = await connect(settings, name="jetyard-restore")
    try:
        await ensure_streams(bus)
        return await write_back(bus, backup, report)
    finally:
        await bus.close()


def _keep_secrets_key(data_dir: Path, given: Path | None) -> None:
    kept = data_dir / SECRETS_KEY_FILE
    if given is None:
        if kept.exists():
            return
        raise RestoreError(
            "give the old installation's secrets key (--secrets-key OLD-DATA-DIR/secrets.key): "
            "the backup's keypair secrets and registry passwords are sealed with it"
        )
    text = given.read_text().strip()
    if kept.exists() and kept.read_text().strip() != text:
        raise RestoreError(f"{kept} exists and is another key than {given}")
    owner_only(kept, text + "\n")


def _keep_seal_key(data_dir: Path, given: Path) -> None:
    key = load_signing_key(given)  # one that cannot be read is refused before anything is kept
    kept = data_dir / SEAL_KEY_FILE
    if kept.exists():
        raise RestoreError(f"{kept} exists: the sealing key is never replaced in place")
    owner_only(kept, given.read_text())
    public = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    public_path(kept).write_bytes(public)
