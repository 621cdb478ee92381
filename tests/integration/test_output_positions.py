"""A kernel's output after the stream has dropped all of it (its messages older than the age
limit): a follower that starts again goes on numbering from where it was, from the position
kept on the node's disk, instead of publishing the output again from line 0. Real nats-server;
the simulated backend's kernel prints what the test says."""

from __future__ import annotations

from pathlib import Path

import nats.js.errors

from events.bus import Bus
from schemas.ids import new_id
from schemas.subjects import OUTPUT_LINE_HEADER, OUTPUT_STREAM, output_subject
from services.node.backend import KernelSpec
from services.node.backend_simulated import SimulatedBackend
from services.node.output import OutputPublisher, published
from services.node.output_positions import PositionFiles
from tests.integration.node_support import eventually

IMAGE = "sim:1"


async def _published_lines(bus: Bus, subject: str, lines: int) -> bool:
    return (await published(bus, subject)).line >= lines


async def _messages(bus: Bus, subject: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each message of the subject now in the stream."""
    found: list[tuple[int, list[str]]] = []
    info = await bus.js.stream_info(OUTPUT_STREAM)
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await bus.js.get_msg(OUTPUT_STREAM, seq, direct=True)
        except nats.js.errors.NotFoundError:  # purged
            continue
        if msg.subject == subject:
            first = int((msg.headers or {})[OUTPUT_LINE_HEADER])
            found.append((first, (msg.data or b"").decode().splitlines()))
    return found


async def test_output_goes_on_from_the_kept_position_when_the_stream_dropped_it(
    bus: Bus, tmp_path: Path
) -> None:
    backend = SimulatedBackend(f"node-{new_id()[:8]}", [IMAGE])
    kernel, session = new_id(), new_id()
    container_id = await backend.start(KernelSpec(kernel, session, IMAGE, ("sleep", "600")))
    (container,) = [c for c in await backend.containers() if c.container_id == container_id]
    subject = output_subject(session, kernel)
    positions = PositionFiles(tmp_path / "output")

    async def follower_while_it_says(texts: list[str], lines: int) -> None:
        """A follower of the kernel (closed after) while it says ``texts``, until ``lines``
        lines in all are published."""
        follower = OutputPublisher(bus, backend, positions=positions)
        follower.follow(container)
        for text in texts:
            backend.say(kernel, text)
        await eventually(lambda: _published_lines(bus, subject, lines), what=f"{lines} lines")
        await follower.close()

    # The simulated kernel's own first line, then the five.
    await follower_while_it_says([f"before {n}" for n in range(5)], 6)
    assert positions.read(kernel) is not None

    await bus.js.purge_stream(OUTPUT_STREAM, subject=subject)  # what the age limit does
    await follower_while_it_says([f"after {n}" for n in range(3)], 9)

    messages = await _messages(bus, subject)
    lines = [line for _, batch in messages for line in batch]
    assert lines == ["after 0", "after 1", "after 2"]  # nothing published again
    assert messages[0][0] == 6  # numbered on from where the dropped output ended
    await backend.close()
