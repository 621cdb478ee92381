"""The audit trail's costs over a big log (issue 29): sealing it, verifying it against its seals
(``jetyard audit verify``), replaying it through the invariants (``verify --invariants``), and
backing it up and verifying the backup, each in events per second next to reading the same
log raw in the same run.

Starts its own nats-server (file storage, R1, default sync) in a temporary directory, writes
``--events`` real session envelopes to ``JY_EVENTS`` (``bench.audit_log``: pairs of
``SessionRequested`` and ``SessionCancelled``, with the store's headers), then measures, one
after another in this process (asyncio, as the CLI runs):

  raw read      ``read_messages`` over the whole log, nothing else (the baseline)
  direct read   the same through batched direct gets, one wait per 1,024 (for comparison)
  push read     the same through an ordered push consumer with a callback (for comparison)
  seal          an in-process ``Sealer`` (fresh Ed25519 key, a seal per 1,000 events)
                catching up from the log's start until a seal covers its end
  verify        ``verify_log``: the seals' signatures and the chain over every message
  invariants    ``replay_log``: every event decoded into the invariant checker
  backup        ``write_backup`` to a file beside the server's data
  verify backup ``verify_backup`` of that file
  backup invariants  the file's events decoded and checked (``verify --backup --invariants``)

and the process's peak RSS after each. The last line is ``verify_events_per_s: N``.

Run:  python -m bench.audit                       (1,000,000 events)
      python -m bench.audit --events 100000      (a short form)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import resource
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from nats.aio.msg import Msg

from bench.audit_log import write_log
from events.audit.backup import write_backup
from events.audit.backup_file import BackupReader
from events.audit.checks import verify_backup, verify_log
from events.audit.invariants import check, replay_log
from events.audit.log_io import read_messages, stream_end
from events.audit.seals import trusted
from events.bus import Bus, connect, ensure_streams
from events.direct import MAX_BATCH, RawMessage
from events.store import decode
from jetyard.runtime.natsserver import NatsServer
from schemas.settings import NatsSettings
from schemas.subjects import EVENTS_STREAM, events_of
from services.sealer.service import Sealer
from services.sealer.settings import SealerSettings

SEAL_EVERY = 1000
DIRECT_GET = f"$JS.API.DIRECT.GET.{EVENTS_STREAM}"


@dataclass
class Phase:
    name: str
    events: int
    seconds: float
    peak_rss_mib: float
    note: str = ""

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class Run:
    """The phases measured so far, each timed (and profiled when asked)."""

    def __init__(self, profile: set[str], top: int) -> None:
        self.phases: list[Phase] = []
        self._profile, self._top = profile, top

    async def timed(self, name: str, work: Callable[[], Awaitable[tuple[int, str]]]) -> Phase:
        profiler = cProfile.Profile() if name in self._profile else None
        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        events, note = await work()
        if profiler is not None:
            profiler.disable()
        phase = Phase(name, events, time.perf_counter() - start, peak_rss_mib(), note)
        self.phases.append(phase)
        print(f"# {name}: {phase.events:,} events in {phase.seconds:.1f} s", flush=True)
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(self._top)
        return phase


async def raw_read(bus: Bus) -> tuple[int, str]:
    read = 0
    async for batch in read_messages(bus):
        read += len(batch)
    return read, ""


async def direct_read(bus: Bus) -> tuple[int, str]:
    """The same log through batched direct gets, each request's replies gathered by the
    inbox callback and awaited once (``events.direct`` awaits each reply on its own): what
    the audit's reads could cost without a consumer's per-message waits."""
    end, position, read, requests = await stream_end(bus), 0, 0, 0
    while position < end:
        batch = await _direct_batch(bus, position + 1)
        requests += 1
        if not batch:
            break
        read += sum(1 for m in batch if m.seq <= end)
        position = batch[-1].seq
    return read, f"{requests} requests of {MAX_BATCH}"


async def push_read(bus: Bus) -> tuple[int, str]:
    """The same log through an ordered push consumer whose callback takes each message (no
    await per message, as the pull ``fetch`` under ``read_messages`` does): for comparison."""
    end, read = await stream_end(bus), 0
    done = asyncio.Event()

    async def take(msg: Msg) -> None:
        nonlocal read
        seq = msg.metadata.sequence.stream
        if seq <= end:
            RawMessage(seq, msg.subject, msg.data, msg.headers or {})
            read += 1
        if seq >= end:
            done.set()

    sub = await bus.js.subscribe(
        events_of(), stream=EVENTS_STREAM, ordered_consumer=True, cb=take,
        pending_msgs_limit=65_536,
    )  # fmt: skip
    try:
        await done.wait()
    finally:
        await sub.unsubscribe()
    return read, "ordered_consumer=True, a callback"


async def _direct_batch(bus: Bus, start: int) -> list[RawMessage]:
    got: list[RawMessage] = []
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def deliver(msg: Msg) -> None:
        headers = msg.headers or {}
        if "Status" in headers:
            if not done.done():
                done.set_result(None)
            return
        got.append(
            RawMessage(int(headers["Nats-Sequence"]), headers["Nats-Subject"], msg.data, headers)
        )

    reply = await bus.replies.route(deliver)
    body = {"seq": start, "next_by_subj": events_of(), "batch": MAX_BATCH}
    try:
        await bus.nc.publish(DIRECT_GET, json.dumps(body).encode(), reply=reply)
        await asyncio.wait_for(done, 10.0)
    finally:
        bus.replies.drop(reply)
    return got


async def seal_all(bus: Bus, key: Ed25519PrivateKey, tmp: Path) -> tuple[int, str]:
    """Seal from the log's start until a seal covers the end as read now."""
    end = await stream_end(bus)
    settings = SealerSettings(key_file=tmp / "unused", every_events=SEAL_EVERY)
    sealer = Sealer(bus, settings, key)
    await sealer.resume()
    try:
        while sealer.chain.position < end:
            await sealer.step()
        if sealer.chain.count:
            await sealer.seal()
    finally:
        await sealer.close()
    assert sealer.last is not None and sealer.last.last == end, "the seals do not cover the end"
    return end, f"{sealer.written} seals"


async def verify(bus: Bus, keys: dict[str, Ed25519PublicKey]) -> tuple[int, str]:
    report = await verify_log(bus, keys)
    assert report.ok and report.unsealed == 0, report.summary()
    return report.events, f"{report.seals} seals verified"


async def invariants(bus: Bus) -> tuple[int, str]:
    report = await replay_log(bus, settled=True)
    return report.events, f"{len(report.violations)} violations"


async def backup(bus: Bus, path: Path) -> tuple[int, str]:
    _, written = await write_backup(bus, path, wait_s=5)
    size = (await asyncio.to_thread(path.stat)).st_size
    return written, f"{size / 2**20:,.0f} MiB"


async def verify_file(path: Path, keys: dict[str, Ed25519PublicKey]) -> tuple[int, str]:
    report = verify_backup(path, keys)
    assert report.ok, report.summary()
    return report.events, f"{report.seals} seals verified"


async def file_invariants(path: Path) -> tuple[int, str]:
    """As ``jetyard audit verify --backup --invariants`` checks a file: each event decoded."""
    with BackupReader(path) as reader:
        stored = (
            decode(RawMessage(m.seq, m.subject, m.data, dict(m.headers))) for m in reader.messages()
        )
        report = check(stored, settled=True)
    return report.events, f"{len(report.violations)} violations"


async def measure(args: argparse.Namespace, tmp: Path) -> Run:
    server = NatsServer(data_dir=tmp / "nats", token="bench").start()
    run = Run(set(args.profile), args.profile_top)
    try:
        bus = await connect(NatsSettings(url=server.url, token="bench"), name="bench-audit")
        await ensure_streams(bus)
        key = Ed25519PrivateKey.generate()
        keys = trusted([key.public_key()])
        path = tmp / "backup.jsonl"

        async def write() -> tuple[int, str]:
            return await write_log(bus, args.events), "publish_async, 2,000 in flight"

        await run.timed("write", write)
        await run.timed("raw read", lambda: raw_read(bus))
        await run.timed("direct read", lambda: direct_read(bus))
        await run.timed("push read", lambda: push_read(bus))
        await run.timed("seal", lambda: seal_all(bus, key, tmp))
        await run.timed("verify", lambda: verify(bus, keys))
        await run.timed("invariants", lambda: invariants(bus))
        await run.timed("backup", lambda: backup(bus, path))
        await run.timed("verify backup", lambda: verify_file(path, keys))
        if not args.skip_file_invariants:
            await run.timed("backup invariants", lambda: file_invariants(path))
        await bus.close()
    finally:
        server.stop()
    return run


def report(run: Run, events: int) -> None:
    by_name = {p.name: p for p in run.phases}
    base = by_name["raw read"].rate
    print(f"# audit bench: {events:,} events; nats-server file storage, R1; asyncio")
    print(f"{'phase':<18} {'events':>10} {'s':>7} {'events/s':>10} {'vs raw':>7} "
          f"{'peak RSS MiB':>12}  note")  # fmt: skip
    for p in run.phases:
        print(
            f"{p.name:<18} {p.events:>10,} {p.seconds:>7.1f} {p.rate:>10,.0f} "
            f"{p.rate / base:>7.2f} {p.peak_rss_mib:>12,.0f}  {p.note}"
        )
    both = by_name["verify"].seconds + by_name["invariants"].seconds
    print(f"verify --invariants (verify, then the replay): {events / both:,.0f} events/s")
    print(f"verify_events_per_s: {by_name['verify'].rate:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument(
        "--profile", action="append", default=[], metavar="PHASE",
        help="profile a phase with cProfile (repeatable): seal, verify, invariants, ...",
    )  # fmt: skip
    parser.add_argument("--profile-top", type=int, default=25, help="functions shown")
    parser.add_argument(
        "--skip-file-invariants", action="store_true", help="leave out the backup's invariants"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = asyncio.run(measure(args, Path(tmp)))
    report(run, args.events)


if __name__ == "__main__":
    main()
