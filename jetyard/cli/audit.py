"""``jetyard audit`` (``verify``, ``seals``, ``keygen``), ``jetyard backup`` and ``jetyard
restore``: the sealed log, checked, copied and written back (docs/audit.md). They read the log
on NATS (the stack as ``jetyard log`` finds it, ``jetyard.cli.operator_target``) or, for
``verify --backup``, a backup file with nothing else: an auditor needs the file and the
sealer's public key, no credentials. ``restore`` starts its own NATS server on a new data
directory (``jetyard.runtime.restore``).

``verify`` exits 0 when the log is what its seals say (and, with ``--invariants``, breaks no
promise), 1 naming the first position where it is not, 2 when it could not check."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from events.audit.backup import write_backup
from events.audit.backup_file import BackupReader
from events.audit.checks import verify_backup, verify_log
from events.audit.log_io import read_seals
from events.audit.seals import (
    SealError,
    key_id,
    load_public_key,
    new_key_files,
    public_path,
    trusted,
)
from events.audit.verify import VerifyReport
from events.bus import Bus, connect
from jetyard.cli import audit_log, audit_state
from jetyard.cli.operator_target import data_dir, nats_settings, with_nats_options
from jetyard.runtime.data_dir import SEAL_KEY_FILE

COMMANDS = ("audit", "backup", "restore")


def _keys(args: argparse.Namespace) -> dict[str, Ed25519PublicKey]:
    paths = [Path(p) for p in args.public_key or []]
    if not paths:
        here = public_path(data_dir(args) / SEAL_KEY_FILE)
        if not here.exists():
            raise SealError(
                f"no public key given (--public-key) and {here} does not exist: verify needs "
                "the sealer's public key, from a source you trust"
            )
        paths = [here]
    return trusted([load_public_key(p) for p in paths])


def _print_report(report: VerifyReport, as_json: bool) -> None:
    if as_json:
        problem = report.problem
        print(json.dumps({
            "ok": report.ok, "events": report.events, "seals": report.seals,
            "sealed_to": report.sealed_to, "unsealed": report.unsealed, "head": report.head,
            "last_seal": report.last_seal, "notes": report.notes,
            "problem": None if problem is None else {
                "position": problem.position, "kind": problem.kind, "text": problem.text,
            },
        }))  # fmt: skip
        return
    print(report.summary())
    for note in report.notes:
        print(f"note: {note}")
    if report.ok and report.last_seal:
        print(f"last seal digest (anchor it outside the cluster): {report.last_seal}")


async def _with_bus(args: argparse.Namespace, name: str) -> Bus:
    return await connect(nats_settings(args), name=name)


async def _verify(args: argparse.Namespace) -> int:
    keys = _keys(args)
    if args.backup:
        report = verify_backup(
            Path(args.backup), keys, from_seal=args.from_seal, anchor=args.anchor
        )
    else:
        bus = await _with_bus(args, "jetyard-audit-verify")
        try:
            report = await verify_log(bus, keys, from_seal=args.from_seal, anchor=args.anchor)
        finally:
            await bus.close()
    _print_report(report, args.json)
    if not report.ok:
        return 1
    if args.invariants:
        return await _invariants(args)
    return 0


async def _invariants(args: argparse.Namespace) -> int:
    from events.audit.invariants import check, replay_log
    from events.direct import RawMessage
    from events.store import decode

    if args.backup:
        with BackupReader(Path(args.backup)) as reader:
            stored = (
                decode(RawMessage(m.seq, m.subject, m.data, dict(m.headers)))
                for m in reader.messages()
            )
            result = check(stored, settled=False)
    else:
        bus = await _with_bus(args, "jetyard-audit-invariants")
        try:
            result = await replay_log(bus, settled=False)
        finally:
            await bus.close()
    for violation in result.violations:
        print(json.dumps({"seq": violation.seq, "rule": violation.rule, "text": violation.text}))
    print(result.summary())
    return 0 if result.ok else 1


async def _seals(args: argparse.Namespace) -> int:
    bus = await _with_bus(args, "jetyard-audit-seals")
    try:
        seals = await read_seals(bus)
    finally:
        await bus.close()
    for seal in seals[-args.last :] if args.last else seals:
        print(json.dumps({
            "number": seal.number, "first": seal.first, "last": seal.last,
            "count": seal.count, "sealed_at": seal.sealed_at.isoformat(),
            "key_id": seal.key_id, "digest": seal.digest(),
        }))  # fmt: skip
    if not seals:
        print("no seals yet: is the sealer running (`jetyard serve sealer`)?", file=sys.stderr)
    return 0


async def _backup(args: argparse.Namespace) -> int:
    bus = await _with_bus(args, "jetyard-backup")
    try:
        header, written = await write_backup(
            bus, Path(args.file), wait_s=args.wait, unsealed=args.unsealed
        )
    finally:
        await bus.close()
    print(
        f"wrote {args.file}: {written} events (positions 1 to {header.log_end}), "
        f"{header.seals} seals (sealed to {header.sealed_to}), buckets "
        f"{', '.join(header.buckets)}"
    )
    print(
        "not in it: folder contents, containers and images, and the secrets key "
        "(docs/audit.md, Backup and restore)"
    )
    return 0


def _restore(args: argparse.Namespace) -> int:
    from jetyard.runtime.restore import restore_into

    paths = [Path(p) for p in args.public_key or []]
    if not paths and args.seal_key:
        paths = [public_path(Path(args.seal_key))]
    if not paths:
        raise SealError("give the sealer's public key (--public-key) to verify the backup with")
    restored = restore_into(
        Path(args.data_dir).expanduser(), Path(args.file),
        trusted([load_public_key(p) for p in paths]),
        secrets_key=Path(args.secrets_key) if args.secrets_key else None,
        seal_key=Path(args.seal_key) if args.seal_key else None, unsealed=args.unsealed,
    )  # fmt: skip
    print(
        f"verified and restored {restored.events} events, {restored.seals} seals and "
        f"{restored.entries} bucket entries into {args.data_dir}"
    )
    print(f"start it: jetyard up --data-dir {args.data_dir}")
    return 0


def _keygen(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.exists():
        raise SealError(f"{path} exists: a sealing key is never replaced in place")
    public = new_key_files(path)
    print(f"wrote {path} (private, owner-only) and {public_path(path)} (key id {key_id(public)})")
    print("give the private key to the sealer alone, the public key to auditors")
    return 0


def add_parser(sub: Any) -> None:
    audit = sub.add_parser(
        "audit", help="the log through the gateway (log, refusals); the sealed log (verify...)"
    )
    actions = audit.add_subparsers(dest="action", required=True)
    audit_log.add_parsers(actions)
    audit_state.add_parser(actions)
    verify = with_nats_options(
        actions.add_parser(
            "verify",
            help="check the log (or a backup) against its seals; name the first position "
            "where it differs",
        )
    )
    verify.add_argument("--backup", metavar="FILE", help="check this backup file instead")
    verify.add_argument(
        "--public-key", action="append", metavar="PEM",
        help="a sealer's public key (repeat for rotated keys; default: the stack's "
        "seal.key.pub)",
    )  # fmt: skip
    verify.add_argument(
        "--from-seal", type=int, metavar="N",
        help="start from seal N, trusted (give its digest with --anchor)",
    )  # fmt: skip
    verify.add_argument(
        "--anchor", metavar="DIGEST",
        help="a seal digest kept outside the cluster: it must be in the chain",
    )  # fmt: skip
    verify.add_argument(
        "--invariants", action="store_true",
        help="also replay the log and check what the system promises (docs/audit.md)",
    )  # fmt: skip
    verify.add_argument("--json", action="store_true", help="the report as one JSON object")
    keygen = actions.add_parser(
        "keygen", help="make a sealing key: PATH (private) and PATH.pub (for auditors)"
    )
    keygen.add_argument("path", metavar="PATH")
    seals = with_nats_options(actions.add_parser("seals", help="the seals, as JSON lines"))
    seals.add_argument("--last", type=int, metavar="N", help="only the last N")
    backup = with_nats_options(
        sub.add_parser("backup", help="write a sealed copy of the log (and kept buckets) to FILE")
    )
    backup.add_argument("file", metavar="FILE")
    backup.add_argument(
        "--wait", type=float, default=30.0,
        help="seconds to wait for the sealer to cover the log's end (default 30)",
    )  # fmt: skip
    backup.add_argument(
        "--unsealed", action="store_true", help="do not wait: the tail may be unsealed"
    )
    restore = sub.add_parser(
        "restore",
        help="verify a backup and write it into a new `jetyard up` data directory",
    )
    restore.add_argument("file", metavar="FILE")
    restore.add_argument(
        "--data-dir", required=True, help="the new installation's data directory (empty)"
    )
    restore.add_argument(
        "--secrets-key", metavar="FILE",
        help="the old installation's secrets key (its <data-dir>/secrets.key)",
    )  # fmt: skip
    restore.add_argument(
        "--seal-key", metavar="FILE",
        help="go on sealing with the old sealing key (default: a new key; verify then takes "
        "both public keys)",
    )  # fmt: skip
    restore.add_argument(
        "--public-key", action="append", metavar="PEM",
        help="the public key(s) the backup's seals are checked with (default: --seal-key's)",
    )  # fmt: skip
    restore.add_argument(
        "--unsealed", action="store_true", help="restore a backup whose tail is not sealed"
    )


def run(args: argparse.Namespace) -> int:
    if args.command == "restore":
        return _restore(args)
    if args.command == "backup":
        return asyncio.run(_backup(args))
    if args.action in ("log", "refusals"):
        return audit_log.run(args)
    if args.action == "state":
        return audit_state.run(args)
    if args.action == "keygen":
        return _keygen(args)
    action = {"verify": _verify, "seals": _seals}[args.action]
    return asyncio.run(action(args))
