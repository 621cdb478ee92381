"""The projection tests' cluster: writes through the real aggregates and the event store in one
tenant domain, a scenario over it, and the views dumped for comparison."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from commands.agent import Agent
from commands.aggregate import Aggregate
from commands.node.aggregate import Node
from commands.repository import pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore
from events.writes import AggregateRef
from projections.base import positions
from projections.queries import NodeView
from projections.runner import Projector
from projections.views import VIEWS
from schemas.ids import new_id, node_id_for_host
from schemas.principal import Actor, ActorKind, Tenant
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.tenancy import SessionOwner
from tests.support import NOW

CAPACITY = ResourceSlots(cpu_milli=16_000, memory_bytes=64 * 2**30, gpu_hundredths=400)
SLOTS = ResourceSlots(cpu_milli=2000, memory_bytes=4 * 2**30, gpu_hundredths=100)


class Cluster:
    """Writes through the real aggregates and the event store, in one tenant domain."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.domain = f"d-{new_id()[:8]}"
        self.guards: dict[AggregateRef, int] = {}
        self.seqs: list[int] = []
        self.clock = NOW
        self.owner = self.user("alice")

    def user(self, name: str) -> SessionOwner:
        """Someone in this cluster's domain, with ids unique to the test."""
        tag = new_id()[:8]
        return SessionOwner(
            access_key=f"AK{name}{tag}", user_id=f"u-{name}-{tag}", project_id="p1",
            domain=self.domain,
        )  # fmt: skip

    async def save(self, aggregate: Aggregate) -> None:
        cause = Cause(
            causation_id=new_id(),
            correlation_id=new_id(),
            actor=Actor(kind=ActorKind.USER, id="alice"),
            tenant=Tenant(domain=self.domain, project="p1"),
        )
        write = pending_write((aggregate, self.guards.get(aggregate.ref, 0)), cause)
        assert write is not None
        committed = await self.store.append(write)
        self.guards[aggregate.ref] = committed.last_seqs[aggregate.ref]
        self.seqs.extend(committed.seqs)

    def now(self) -> Any:
        self.clock += timedelta(seconds=1)
        return self.clock

    async def node(self) -> Node:
        host = f"host-{new_id()}"
        agent = Agent.register(
            node_id_for_host(host), epoch=1, hostname=host, backend="simulated",
            capacity=CAPACITY, images=("busybox",), now=self.now(),
        )  # fmt: skip
        await self.save(agent)
        node = Node.register(node_id_for_host(host), host, "default", CAPACITY, self.now())
        await self.save(node)
        return node

    async def session(
        self,
        name: str | None = None,
        owner: SessionOwner | None = None,
        *,
        legacy: bool = False,
        admit: bool = False,
    ) -> Session:
        """A session of ``owner`` (alice if not given), or one from before tenancy (no owner)."""
        spec = SessionSpec(image="busybox", kernels=(KernelSpec(resources=SLOTS),), name=name)
        whose = None if legacy else owner or self.owner
        session = Session.request(new_id(), spec, self.now(), owner=whose)
        if admit:
            session.admit("admitted", self.now())
        await self.save(session)
        return session

    async def place(self, session: Session, node: Node) -> None:
        kernel = session.kernel_ids[0]
        session.schedule({kernel: node.id}, "placed", self.now())
        node.allocate(kernel, session.id, SLOTS, self.now(), image="busybox")
        await self.save(session)
        await self.save(node)

    async def end(self, session: Session, node: Node, exit_code: int) -> None:
        kernel = session.kernel_ids[0]
        session.terminate("user asked", self.now())
        node.request_stop(kernel, "terminating", self.now())
        await self.save(session)
        await self.save(node)
        session.kernel_exited(kernel, exit_code, "kernel exited", self.now())
        node.release(kernel, "session ended", self.now())
        await self.save(session)
        await self.save(node)


async def scenario(cluster: Cluster) -> dict[str, Any]:
    """Two nodes (one cordoned), a finished, a cancelled and a running session."""
    n1, n2 = await cluster.node(), await cluster.node()
    n2.cordon("maintenance", cluster.now())
    await cluster.save(n2)
    done, cancelled, running = [await cluster.session(f"s{i}", admit=i != 1) for i in range(3)]
    await cluster.place(done, n1)
    done.kernel_started(done.kernel_ids[0], cluster.now())
    await cluster.save(done)
    await cluster.end(done, n1, exit_code=3)
    cancelled.note_pending_reason("fits nowhere: gpu", cluster.now())
    cancelled.terminate("user asked", cluster.now())
    await cluster.save(cancelled)
    await cluster.place(running, n1)
    running.begin_preparing("pulling image", cluster.now())
    running.kernel_started(running.kernel_ids[0], cluster.now())
    await cluster.save(running)
    return {"n1": n1, "n2": n2, "done": done, "cancelled": cancelled, "running": running}


async def dump(engine: AsyncEngine, *, with_positions: bool = True) -> dict[str, list[Any]]:
    """Every row of every view table (and the positions), in primary-key order."""
    tables = [t for v in VIEWS for t in v.metadata("").sorted_tables]
    if with_positions:
        tables.append(positions)
    async with engine.connect() as conn:
        return {
            t.name: [tuple(r) for r in await conn.execute(select(t).order_by(*t.primary_key))]
            for t in tables
        }


async def caught_up(engine: AsyncEngine, bus: Bus) -> Projector:
    projector = Projector(engine, bus)
    await projector.start()
    await projector.catch_up(timeout=0.5)
    return projector


def by_id(views: list[NodeView]) -> dict[str, NodeView]:
    return {v.id: v for v in views}
