"""Helpers for the node agent tests: write a node ledger as the scheduler would, read what the
agent reported, and wait for a condition without fixed sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from commands.node.aggregate import Node
from commands.repository import load, pending_write
from events.envelope import Cause
from events.store import EventStore
from events.writes import AggregateRef
from schemas.devices import DeviceShare
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from tests.support import NOW

T = TypeVar("T")
SCHEDULER = Actor.service("scheduler")
CAPACITY = ResourceSlots.of(cpu=64, memory=256 << 30, gpu=0)


def scheduler_cause() -> Cause:
    command = new_id()
    return Cause(
        causation_id=command, correlation_id=command, actor=SCHEDULER, tenant=SYSTEM_TENANT
    )


async def change_ledger(
    store: EventStore,
    node_id: str,
    decide: Callable[[Node], object],
    *,
    register: Callable[[], Node] | None = None,
) -> None:
    """Load the node ledger (registering it first if needed, by ``register`` if given),
    decide, append: the scheduler's side of the contract, done by hand."""
    loaded = await load(store, Node, node_id)
    node = loaded.aggregate
    if node is None:
        new = register or (
            lambda: Node.register(node_id, f"host-{node_id}", "default", CAPACITY, NOW)
        )
        node = new()
    decide(node)
    write = pending_write((node, loaded.last_seq), scheduler_cause())
    if write is not None:
        await store.append(write)


def allocate(
    kernel_id: str,
    *,
    image: str,
    command: tuple[str, ...] | None = None,
    slots: ResourceSlots | None = None,
    env: dict[str, str] | None = None,
    devices: tuple[DeviceShare, ...] = (),
    hostname: str = "",
    numa_node: int | None = None,
) -> Callable[[Node], object]:
    gpus = sum(d.hundredths for d in devices)
    return lambda node: node.allocate(
        kernel_id,
        f"session-{kernel_id}",
        slots
        or ResourceSlots.of(cpu="0.5", memory=64 << 20).model_copy(update={"gpu_hundredths": gpus}),
        NOW,
        image=image,
        command=command,
        env=env,
        devices=devices,
        hostname=hostname,
        numa_node=numa_node,
    )


def stop(kernel_id: str) -> Callable[[Node], object]:
    return lambda node: node.request_stop(kernel_id, "user asked", NOW)


def release(kernel_id: str) -> Callable[[Node], object]:
    return lambda node: node.release(kernel_id, "node lost", NOW)


async def facts(store: EventStore, node_id: str) -> list[tuple[str, dict[str, Any]]]:
    """What the agent reported, in order: (event name, payload)."""
    history = await store.read(AggregateRef(AggregateType.AGENT, node_id))
    return [(e.name, e.envelope.payload) for e in history.events]


async def facts_about(store: EventStore, node_id: str, kernel_id: str) -> list[str]:
    return [
        name
        for name, payload in await facts(store, node_id)
        if payload.get("kernel_id") == kernel_id
    ]


async def eventually(
    check: Callable[[], Awaitable[T | None]], *, timeout: float = 10.0, what: str = "condition"
) -> T:
    """Poll ``check`` until it answers something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)
