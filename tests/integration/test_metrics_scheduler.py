"""The scheduler's ``/metrics`` on its own listener, on the real nats-server, in a resource
group of the test's own: what the scrape says of sessions, the queue, the node and its GPUs is
what the log says (aggregates loaded back from the store), placements are timed, the events it
appended are counted, and its command consumer's lag is what waits for it."""

from __future__ import annotations

import httpx

from commands.bus import CommandBus
from commands.node.aggregate import Node
from commands.repository import load
from events.bus import Bus
from events.store import EventStore
from httpserver.metrics import metrics_listener
from schemas.ids import session_id_for
from schemas.session import SessionStatus
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    create,
    eventually,
    node_of,
    session_in,
    slots,
)
from tests.integration.test_scheduler_gpus import group_owner, request, share
from tests.metrics_support import Scraped


async def scrape(url: str) -> Scraped:
    async with httpx.AsyncClient() as client:
        page = await client.get(url)
    assert page.status_code == 200
    return Scraped(page.text)


async def test_the_scrape_says_what_the_log_says(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    group, owner = await group_owner(store)
    scheduler = await start_scheduler()
    agent = FakeAgent(store, slots(cpu=16, mem=64, gpu=2), (image,), group=group)
    await agent.register()
    await node_of(store, agent)
    async with metrics_listener(scheduler.metrics, "127.0.0.1", 0, "scheduler") as url:
        assert url is not None
        before = await scrape(url)
        whole = await request(bus, image, slots(cpu=1, mem=1, gpu=1), owner, group)
        half = await request(bus, image, share(50), owner, group)
        waiting = await request(bus, image, slots(cpu=1, mem=1, gpu=2), owner, group)
        for session_id in (whole, half):
            await session_in(store, session_id, SessionStatus.SCHEDULED)
        await scheduler.settle()
        await eventually(lambda: _queued(scheduler.published, group, waiting))
        page = await scrape(url)

    in_group = {"resource_group": group}
    assert page.get("jetyard_sessions", status="SCHEDULED", **in_group) == 2
    assert page.get("jetyard_sessions", status="PENDING", **in_group) == 1
    assert page.total("jetyard_sessions", **in_group) == 3
    assert page.get("jetyard_queue_length", **in_group) == 1
    assert page.get("jetyard_queue_oldest_wait_seconds", **in_group) > 0
    node = (await load(store, Node, agent.id)).aggregate
    assert node is not None
    gpus = page.where("jetyard_gpu_allocated", node=agent.id)
    use = node.device_use()
    assert {dict(k)["index"]: v for k, v in gpus.items()} == {
        str(i): 1.0 if whole_held else shared / 100 for i, (whole_held, shared) in use.items()
    }
    assert sum(gpus.values()) == node.allocated.gpu_hundredths / 100 == 1.5
    labels = {"node": agent.id, "hostname": agent.hostname, **in_group}
    assert page.get("jetyard_node_allocated", **labels, resource="gpu") == 1.5
    assert page.get("jetyard_nodes", state="schedulable", **in_group) == 1
    assert page.get("jetyard_scheduling_latency_seconds_count", **in_group) == 2
    appended = "jetyard_events_appended_total"
    assert page.get(appended, aggregate="session") > (
        before.value(appended, aggregate="session") or 0
    )
    # Nothing waits for it: both command consumers are answered, the fold is at the end.
    for durable in (scheduler.runner.durable, scheduler.node_runner.durable):
        assert page.get("jetyard_consumer_lag", consumer=durable, kind="commands") == 0
    assert page.get("jetyard_consumer_lag", consumer="scheduler", kind="fold") == 0


async def test_commands_waiting_for_a_stopped_scheduler_are_its_lag(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    group, owner = await group_owner(store)
    scheduler = await start_scheduler()
    await scheduler.runner.stop()  # it takes no more commands; they wait on its consumer
    commands = CommandBus(bus)
    sent = [create(image, slots(), owner, resource_group=group) for _ in range(3)]
    for cmd in sent:
        await commands.send(cmd)
    async with metrics_listener(scheduler.metrics, "127.0.0.1", 0, "scheduler") as url:
        assert url is not None
        page = await scrape(url)
    assert page.get("jetyard_consumer_lag", consumer=scheduler.runner.durable, kind="commands") == 3
    assert session_id_for(sent[0].command_id) not in scheduler.state.sessions
    # A replica on the same consumer answers them (nothing is left for another test's).
    await start_scheduler()
    for cmd in sent:  # refused: no agent has the image; answered all the same
        assert await commands.wait_outcome(cmd.command_id, timeout=10) is not None


async def _queued(published: dict[str, list[str]], group: str, session_id: str) -> bool | None:
    return True if published.get(group) == [session_id] else None
