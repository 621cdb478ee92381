"""Live output: each kernel's stdout and stderr, followed from the backend while it runs and
published in order to ``output.<session id>.<kernel id>`` in ``JY_OUTPUT``. Reads the last
message of such a subject (a direct get) to resume; writes those subjects (only the agent
running the kernel).

A message holds whole lines: up to 64 KiB, or what arrived within ``FLUSH_S`` of its first
line, so 10,000 quick lines cost a handful of publishes. Its headers say the number of its
first line, how many it holds, and where its last line lies in the engine's output (its time
in ns and how many published lines share that time). A follower that (re)starts (a new agent,
a lost connection, a publish whose outcome is unknown) reads the subject's last message, asks
the engine for the lines from that time on, and skips those already published: no line is
lost or published twice. Every publish expects the subject's last sequence, so two followers
of one kernel (an old incarnation not yet gone) cannot interleave: the loser reads again.
Where the published lines end is also kept on the node's disk (``output_positions.py``): when
the stream has dropped all of a kernel's messages (older than its age limit), the follower goes
on from there instead of numbering the output from line 0 again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

import nats.js.errors

from commands.activity_reports import ActivityReports
from events.bus import Bus
from events.cancelling import cancelling
from events.declarations import OUTPUT_BATCH_BYTES
from schemas.activity import ActivitySource
from schemas.subjects import (
    OUTPUT_LINE_HEADER,
    OUTPUT_LINES_HEADER,
    OUTPUT_MARK_HEADER,
    OUTPUT_STREAM,
    output_subject,
)
from services.node.backend import Backend, Container, OutputLine
from services.node.output_positions import Position, PositionFiles

log = logging.getLogger(__name__)

FLUSH_S = 0.1  # a line waits at most this long for others to share its message
RETRY_S = 1.0
FINISH_TIMEOUT_S = 10.0  # an ended kernel's last lines; its archive (jy-logs) has them anyway


START = Position(0, 0, 0, 0)


async def published(bus: Bus, subject: str) -> Position:
    try:
        last = await bus.js.get_last_msg(OUTPUT_STREAM, subject, direct=True)
    except nats.js.errors.NotFoundError:
        return START
    headers = last.headers or {}
    at_ns, _, same = headers[OUTPUT_MARK_HEADER].partition(":")
    line = int(headers[OUTPUT_LINE_HEADER]) + int(headers[OUTPUT_LINES_HEADER])
    return Position(line, int(at_ns), int(same), last.seq or 0)


class OutputPublisher:
    """One follower task per kernel with output still to publish. Every line it publishes is
    noted as the kernel's activity in ``activity`` (when given), which the agent reports."""

    def __init__(
        self, bus: Bus, backend: Backend, activity: ActivityReports | None = None,
        positions: PositionFiles | None = None,
    ) -> None:  # fmt: skip
        self._bus = bus
        self._backend = backend
        self._activity = activity
        self._positions = positions
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def follow(self, container: Container, *, fresh: bool = False) -> None:
        """Follow a running container's output, unless that is being done already. ``fresh``:
        this agent has just started it, so nothing of its output should be published yet and
        the first publish, which expects the subject to be empty, says so without a read
        first (if something was published after all, that publish is refused and the follower
        reads where the output ends, as on any resume)."""
        task = self._tasks.get(container.kernel_id)
        if (task is None or task.done()) and container.session_id:
            self._tasks[container.kernel_id] = asyncio.create_task(
                self._run(container, fresh), name=f"output-{container.kernel_id}"
            )

    async def finish(self, container: Container) -> None:
        """Publish the rest of an exited container's output (its follower ends once all is
        read); give up after ``FINISH_TIMEOUT_S`` (NATS away)."""
        self.follow(container)
        task = self._tasks.pop(container.kernel_id, None)
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), FINISH_TIMEOUT_S)
            if self._positions is not None:
                self._positions.forget(container.kernel_id)
        except TimeoutError:
            log.warning("output of kernel %s: its last lines were not published", task.get_name())
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._positions is not None:
            self._positions.flush()

    async def _run(self, container: Container, fresh: bool = False) -> None:
        subject = output_subject(container.session_id, container.kernel_id)
        while not cancelling():
            try:
                kept = self._positions.read(container.kernel_id) if self._positions else None
                at = START if fresh and kept is None else await published(self._bus, subject)
                fresh = False
                if kept is not None and at.seq == 0 and kept.line > at.line:
                    log.info("output of kernel %s: the stream has dropped it; going on from "
                             "line %d", container.kernel_id, kept.line)  # fmt: skip
                    at = kept
                await self._pump(container, subject, at)
                return
            except Exception as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                # Whatever failed, the log says what is published: start again from there.
                log.warning("output of kernel %s: %r; resuming", container.kernel_id, exc)
                await asyncio.sleep(RETRY_S)

    async def _pump(self, container: Container, subject: str, at: Position) -> None:
        positions, kernel = self._positions, container.kernel_id
        kept = None if positions is None else functools.partial(positions.write, kernel)
        batch = Batch(subject, at, kept)
        mark_ns, skip = (at.at_ns, at.same) if at.line else (-1, 0)
        lines = self._backend.follow(container.container_id, max(at.at_ns, 0))
        activity, session = self._activity, container.session_id
        loop = asyncio.get_running_loop()
        reading: asyncio.Future[OutputLine] | None = None
        try:
            while True:
                reading = reading or asyncio.ensure_future(anext(lines))
                wait = None if batch.due is None else max(0.0, batch.due - loop.time())
                done, _ = await asyncio.wait({reading}, timeout=wait)
                if not done:
                    await batch.publish(self._bus)
                    continue
                finished, reading = reading, None
                try:
                    line = finished.result()
                except StopAsyncIteration:
                    break
                if mark_ns >= 0:  # published before this follower began: skip
                    if line.at_ns < mark_ns:
                        continue
                    if line.at_ns == mark_ns and skip > 0:
                        skip -= 1
                        continue
                    mark_ns = -1
                if activity is not None:
                    activity.note(session, kernel, ActivitySource.OUTPUT, line.at_ns / 1e9)
                if batch.full_with(line):
                    await batch.publish(self._bus)
                batch.add(line, loop.time() + FLUSH_S)
            await batch.publish(self._bus)
        finally:
            if reading is not None:
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
            await lines.aclose()


class Batch:
    """The lines not yet published, and where the published ones end."""

    def __init__(
        self, subject: str, at: Position, published: Callable[[Position], None] | None = None
    ) -> None:
        self.subject = subject
        self.at = at
        self._published = published
        self.lines: list[str] = []
        self.size = 0
        self.due: float | None = None
        """When the first line has waited long enough (None: empty)."""

    def full_with(self, line: OutputLine) -> bool:
        return bool(self.lines) and self.size + len(line.text.encode()) + 1 > OUTPUT_BATCH_BYTES

    def add(self, line: OutputLine, due: float) -> None:
        self.lines.append(line.text)
        self.size += len(line.text.encode()) + 1
        self.due = self.due or due
        same = self.at.same + 1 if line.at_ns == self.at.at_ns else 1
        self.at = Position(self.at.line, line.at_ns, same, self.at.seq)

    async def publish(self, bus: Bus) -> None:
        if not self.lines:
            return
        headers = {
            OUTPUT_LINE_HEADER: str(self.at.line),
            OUTPUT_LINES_HEADER: str(len(self.lines)),
            OUTPUT_MARK_HEADER: f"{self.at.at_ns}:{self.at.same}",
            # The fence between two followers of one kernel: the loser gets 10071 and rereads.
            "Nats-Expected-Last-Subject-Sequence": str(self.at.seq),
        }
        payload = "".join(f"{text}\n" for text in self.lines).encode()
        ack = await bus.js.publish(self.subject, payload, stream=OUTPUT_STREAM, headers=headers)
        line = self.at.line + len(self.lines)
        self.at = Position(line, self.at.at_ns, self.at.same, ack.seq)
        self.lines, self.size, self.due = [], 0, None
        if self._published is not None:
            self._published(self.at)
