"""A follower of a container this agent has just started publishes its first lines without
reading the subject first (it expects it empty); if output was published for that kernel after
all (an earlier incarnation's), the first publish is refused and the follower goes on from
where the published lines end: none twice, none lost, numbered on."""

from __future__ import annotations

from nats.aio.msg import Msg

from events.bus import Bus
from schemas.ids import new_id
from schemas.subjects import OUTPUT_LINE_HEADER, OUTPUT_STREAM, output_subject
from services.node.backend import Container, KernelSpec
from services.node.backend_simulated import SimulatedBackend
from services.node.output import OutputPublisher, published
from tests.integration.node_support import eventually

IMAGE = "python:3.12"


async def lines_of(bus: Bus, subject: str) -> list[tuple[int, str]]:
    """Every published message of the subject: its first line's number and its text."""
    info = await bus.js.stream_info(OUTPUT_STREAM, subjects_filter=subject)
    found, seq = [], 0
    for _ in range(info.state.subjects.get(subject, 0) if info.state.subjects else 0):
        msg = await bus.js.get_msg(OUTPUT_STREAM, seq=seq + 1, subject=subject, next=True)
        seq = msg.seq or 0
        found.append((int((msg.headers or {})[OUTPUT_LINE_HEADER]), (msg.data or b"").decode()))
    return found


async def started() -> tuple[SimulatedBackend, Container]:
    """A simulated machine with one kernel running (its start banner printed)."""
    backend = SimulatedBackend(f"node-{new_id()[:8]}", [IMAGE])
    session_id, kernel_id = new_id(), new_id()
    spec = KernelSpec(kernel_id=kernel_id, session_id=session_id, image=IMAGE, command=None)
    return backend, Container(kernel_id, session_id, await backend.start(spec), "running")


async def test_a_fresh_follower_meets_earlier_output_and_numbers_on(bus: Bus) -> None:
    backend, container = await started()
    subject = output_subject(container.session_id, container.kernel_id)

    kernel_id = container.kernel_id
    earlier = OutputPublisher(bus, backend)
    earlier.follow(container)
    backend.say(kernel_id, "one")

    async def first_lines_published() -> bool:
        return (await published(bus, subject)).line == 2  # the start banner and "one"

    await eventually(first_lines_published, what="the earlier follower's lines")
    await earlier.close()

    again = OutputPublisher(bus, backend)
    again.follow(container, fresh=True)  # as if just started: it expects nothing published
    backend.say(kernel_id, "two")

    async def all_published() -> bool:
        return (await published(bus, subject)).line == 3

    await eventually(all_published, what="the line after the refused publish")
    await again.close()
    texts = await lines_of(bus, subject)
    assert [line for line, _ in texts] == [0, 2]
    assert "".join(text for _, text in texts).splitlines()[1:] == ["one", "two"]


async def test_a_fresh_follower_publishes_without_reading_first(bus: Bus) -> None:
    backend, container = await started()
    subject = output_subject(container.session_id, container.kernel_id)
    reads: list[str] = []

    async def note(msg: Msg) -> None:
        reads.append(msg.subject)

    sub = await bus.nc.subscribe(f"$JS.API.DIRECT.GET.{OUTPUT_STREAM}.{subject}", cb=note)
    publisher, resumed = OutputPublisher(bus, backend), OutputPublisher(bus, backend)
    try:
        publisher.follow(container, fresh=True)

        async def banner_stored() -> bool:  # read without a direct get
            info = await bus.js.stream_info(OUTPUT_STREAM, subjects_filter=subject)
            return bool(info.state.subjects and info.state.subjects.get(subject))

        await eventually(banner_stored, what="the start banner")
        await bus.nc.flush()
        assert reads == []
        await publisher.close()

        # A follower of a container it did not just start reads where the output ends first.
        resumed.follow(container)

        async def read_first() -> bool:
            return bool(reads)

        await eventually(read_first, what="the resuming follower's read")
    finally:
        await publisher.close()
        await resumed.close()
        await sub.unsubscribe()
