"""Commands/s through FastStream's NATS pull subscribers next to the runner's raw nats-py
pull-fetch loop: reads ``cmd.session.create`` (``JY_COMMANDS``), writes ``out.<command id>``
(``JY_OUTCOMES``).

Every variant does the same work per command, the runner's minimum: parse the command model
(``parse_command``), store its outcome guarded with expected sequence 0 (``OutcomeLog``,
pipelined), then ack. Every variant uses the same durable consumer settings as
``CommandRunner`` (explicit ack, max deliver 5, back-off 5/15/30/60 s) and FastStream runs with
``AckPolicy.MANUAL`` (never its default, which terminates a message whose handler raised):

  raw            nats-py ``fetch(256)`` loop (``commands.runner``): parse, store, ack all
  fs-batch       FastStream ``PullSub(256, 1.0, batch=True)``: the same per batch; its JSON
                 decoding of every body switched off (the handler parses the bytes itself)
  fs-batch-50ms  the same with a 50 ms batch timeout instead of the runner's 1 s
  fs-batch+json  fs-batch with FastStream's default decoder (``json.loads`` of every body)
  fs-each        FastStream ``PullSub(256)``: one handler call per command (the calls of one
                 fetch run concurrently), no JSON decoding

N commands are stored first, then one consumer drains them: "steady" is commands/s between 10 %
and 90 % answered, "drain" is N over the time from the consumer's start to the last outcome
stored (start-up and the last, partial batch included). Then the idle consumer's pull requests
are counted, and lone commands, one at a time, measure the latency from send to outcome
stored. ``--probe`` also checks on the server what FastStream does with a nak with a delay,
the delivery count, and a failure under its default ack policy (``bench.faststream_probe``).

Starts its own nats-server (file storage, R1). Run:
  python -m bench.faststream_commands [--commands 20000] [--uvloop] [--probe]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import faststream
from faststream import Context
from faststream.message import StreamMessage
from faststream.nats import JStream, NatsBroker, PullSub
from faststream.nats.message import NatsBatchMessage, NatsMessage
from nats.aio.msg import Msg

from bench.command_work import SUBJECT, Work, command, consumer_config, send_all
from bench.faststream_probe import probe
from commands.bus import CommandBus
from commands.outcome_log import OutcomeLog
from events.bus import Bus, connect, ensure_streams
from jetyard.runtime.natsserver import NatsServer
from schemas.ids import new_id
from schemas.settings import NatsSettings
from schemas.subjects import COMMANDS_STREAM

BATCH = 256
FETCH_TIMEOUT_S = 1.0  # the runner's fetch timeout, and FastStream's batch timeout
SHORT_TIMEOUT_S = 0.05
IDLE_S = 2.0  # idle time over which pull requests are counted
LONE = 5  # lone commands timed per variant


@dataclass(frozen=True)
class Spec:
    """A FastStream subscriber: batch or one call per command, its fetch timeout, whether
    FastStream JSON-decodes each body."""

    batch: bool
    timeout: float = FETCH_TIMEOUT_S
    json_decode: bool = False


VARIANTS: dict[str, Spec | None] = {
    "raw": None,
    "fs-batch": Spec(batch=True),
    "fs-batch-50ms": Spec(batch=True, timeout=SHORT_TIMEOUT_S),
    "fs-batch+json": Spec(batch=True, json_decode=True),
    "fs-each": Spec(batch=False),
}


async def run_raw(bus: Bus, durable: str, work: Work, stop: asyncio.Event) -> None:
    """The runner's loop (``CommandRunner._run``), without its error paths."""
    await bus.js.add_consumer(COMMANDS_STREAM, consumer_config(durable))
    psub = await bus.js.pull_subscribe_bind(durable, stream=COMMANDS_STREAM)
    try:
        while not stop.is_set():
            try:
                msgs = await psub.fetch(BATCH, timeout=FETCH_TIMEOUT_S)
            except TimeoutError:
                continue
            await work.handle(msgs)
    finally:
        await psub.unsubscribe()


async def _undecoded(message: StreamMessage[Any]) -> Any:
    return message.body


async def run_faststream(
    url: str, durable: str, work: Work, stop: asyncio.Event, spec: Spec
) -> None:
    broker = NatsBroker(url, logger=None)  # no per-message log lines: FastStream's best case
    # declare=False: FastStream would otherwise add the stream with its own defaults and,
    # finding it, *update* it with them (faststream.nats.broker.broker.NatsBroker.start).
    stream = JStream(COMMANDS_STREAM, declare=False)
    config, manual = consumer_config(durable), faststream.AckPolicy.MANUAL
    # FastStream JSON-decodes every body by default, though the handler parses the bytes
    # with the command model itself: skip that (its best case) unless asked to measure it.
    decoder = None if spec.json_decode else _undecoded

    async def decide_batch(message: Annotated[NatsBatchMessage, Context("message")]) -> None:
        await work.handle(message.raw_message)

    async def decide_one(message: Annotated[NatsMessage, Context("message")]) -> None:
        await work.handle([message.raw_message])

    if spec.batch:
        pull = PullSub(BATCH, spec.timeout, batch=True)
        subscriber = broker.subscriber(
            SUBJECT, stream=stream, durable=durable, config=config, pull_sub=pull,
            ack_policy=manual, decoder=decoder,
        )  # fmt: skip
        subscriber(decide_batch)
    else:
        each = broker.subscriber(
            SUBJECT, stream=stream, durable=durable, config=config,
            pull_sub=PullSub(BATCH, spec.timeout), ack_policy=manual, decoder=decoder,
        )  # fmt: skip
        each(decide_one)
    await broker.start()
    try:
        await stop.wait()
    finally:
        await broker.stop()


async def pull_requests(bus: Bus, durable: str) -> float:
    """Pull requests per second a consumer sends while idle (each one crosses the server)."""
    seen = 0

    async def count(_: Msg) -> None:
        nonlocal seen
        seen += 1

    subject = f"$JS.API.CONSUMER.MSG.NEXT.{COMMANDS_STREAM}.{durable}"
    sub = await bus.nc.subscribe(subject, cb=count)
    await asyncio.sleep(IDLE_S)
    await sub.unsubscribe()
    return seen / IDLE_S


@dataclass(frozen=True)
class Result:
    steady: float  # commands/s from 10 % to 90 % of the stored commands answered
    drain: float  # commands/s over the whole drain, start-up and last batch included
    lone_ms: float  # median time from sending a lone command to its outcome stored
    idle: float  # pull requests/s the consumer sends while there is nothing to do

    def best(self, other: Result | None) -> Result:
        if other is None:
            return self
        return Result(
            max(self.steady, other.steady),
            max(self.drain, other.drain),
            min(self.lone_ms, other.lone_ms),
            min(self.idle, other.idle),
        )


async def measure(bus: Bus, url: str, variant: str, count: int) -> Result:
    """Drain ``count`` stored commands with one consumer, then time lone commands."""
    commands = CommandBus(bus)
    await send_all(commands, count)
    durable = f"bench-{variant}-{new_id()[:8]}"
    work, stop = Work(OutcomeLog(bus, timeout=10.0)), asyncio.Event()
    start = time.perf_counter()
    spec = VARIANTS[variant]
    if spec is None:
        task = asyncio.create_task(run_raw(bus, durable, work, stop))
    else:
        task = asyncio.create_task(run_faststream(url, durable, work, stop, spec))
    try:
        await work.reach(count)
        drain = count / (time.perf_counter() - start)
        idle = await pull_requests(bus, durable)
        latencies = []
        for _ in range(LONE):
            await asyncio.sleep(0.3)  # the consumer is idle, waiting in a fetch
            sent = time.perf_counter()
            lone = command(-1)
            await commands.send(lone)
            assert await commands.wait_outcome(lone.command_id, 10.0) is not None
            latencies.append((time.perf_counter() - sent) * 1000)
        await work.reach(count + LONE)
        # Every command answered and acked once: nothing pending, nothing redelivered (an ack
        # is not confirmed, so the server may count the last one a moment later).
        for _ in range(100):
            info = await bus.js.consumer_info(COMMANDS_STREAM, durable)
            if (info.num_pending, info.num_ack_pending, info.num_redelivered) == (0, 0, 0):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError(f"{variant}: not every command was acked once: {info}")
    finally:
        stop.set()
        await task
        await bus.js.delete_consumer(COMMANDS_STREAM, durable)
    return Result(work.steady_rate(count), drain, statistics.median(latencies), idle)


async def main(args: argparse.Namespace) -> dict[str, Result]:
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(data_dir=Path(tmp), sync_always=args.sync_always).start()
        try:
            bus = await connect(NatsSettings(url=server.url), name="bench")
            await ensure_streams(bus)
            await measure(bus, server.url, "raw", min(args.commands, 2000))  # warm-up
            results: dict[str, Result] = {}
            for _ in range(args.rounds):  # interleaved, so drift on a shared machine hits all
                for variant in VARIANTS:
                    result = await measure(bus, server.url, variant, args.commands)
                    results[variant] = result.best(results.get(variant))
            if args.probe:
                for line in await probe(bus, server.url):
                    print(line)
            await bus.close()
            return results
        finally:
            server.stop()


def cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--commands", type=int, default=20_000, help="commands per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best is kept")
    parser.add_argument("--sync-always", action="store_true", help="server fsyncs every write")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    parser.add_argument("--probe", action="store_true", help="check nak delay, delivery count")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop

        uvloop.install()
    results = asyncio.run(main(args))
    loop = "uvloop" if args.uvloop else "asyncio"
    sync = "always" if args.sync_always else "default"
    print(f"# {args.commands} commands, best of {args.rounds}, {loop}, sync {sync}")
    head = f"{'variant':<14} {'steady/s':>9} {'vs raw':>6} {'drain/s':>8} {'vs raw':>6}"
    print(f"{head} {'lone ms':>8} {'idle pulls/s':>12}")
    raw = results["raw"]
    for variant, r in results.items():
        print(
            f"{variant:<14} {r.steady:>9,.0f} {r.steady / raw.steady:>6.0%} {r.drain:>8,.0f} "
            f"{r.drain / raw.drain:>6.0%} {r.lone_ms:>8.1f} {r.idle:>12.1f}"
        )


if __name__ == "__main__":
    cli()
