"""A known event history for usage accounting (pure: no server), and what it must add up to.

Three people in two domains, three nodes, GPUs whole and shared, a node lost under two running
kernels (one session ends, a batch session is requeued onto another node and still runs), a
late start report from the lost node's fenced agent, a start reported twice, a kernel that
never started, and an agent whose clock lags the scheduler's. Times are seconds after ``T0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from events.catalogue import Event
from events.domain.agent import KernelStarted
from events.domain.node import NodeLost, ResourcesAllocated, ResourcesReleased
from events.domain.session import (
    SessionRequested,
    SessionRequeued,
    SessionStarted,
    SessionTerminated,
)
from events.envelope import Envelope, StoredEvent
from projections.usage.accounting import UsageLine
from schemas.devices import DeviceShare
from schemas.ids import new_id
from schemas.principal import Actor, Tenant
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner

T0 = datetime(2026, 3, 1, tzinfo=UTC)
GIB = 1 << 30
N1, N2, N3 = "node-1", "node-2", "node-3"


@dataclass(frozen=True)
class Cast:
    """Who the history is about, and a tag on every id it makes (sessions, kernels, nodes,
    resource groups), so that tests sharing one log each have their own."""

    people: dict[str, SessionOwner] = field(
        default_factory=lambda: {
            "alice": SessionOwner(
                access_key="AKALICE", user_id="u-alice", project_id="p-one", domain="d1"
            ),
            "bob": SessionOwner(
                access_key="AKBOB", user_id="u-bob", project_id="p-two", domain="d1"
            ),
            "carol": SessionOwner(
                access_key="AKCAROL", user_id="u-carol", project_id="p-three", domain="d2"
            ),
        }
    )
    tag: str = ""

    def id(self, name: str) -> str:
        return f"{name}{self.tag}"

    def key(self, symbol: str) -> str:
        """A key of the expected tables ("alice", "d1", "s3", "gpu"...) as reports say it."""
        if symbol in self.people:
            return self.people[symbol].user_id
        if symbol.startswith("project:"):
            return self.people[symbol.removeprefix("project:")].project_id
        if symbol in ("d1", "d2"):
            return self.people["alice" if symbol == "d1" else "carol"].domain
        return self.id(symbol)

    def device(self, node: str, index: int) -> tuple[str, str]:
        return self.id(node), f"GPU-{self.id(node)}-{index}"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def slots(cpu: str, gib: int, gpu: str = "0") -> ResourceSlots:
    return ResourceSlots.of(cpu=cpu, memory=gib * GIB, gpu=gpu)


class History:
    """Events in stream order, each with its aggregate's version and its own time. Ids are
    given untagged and tagged here."""

    def __init__(self, cast: Cast) -> None:
        self.cast = cast
        self.events: list[StoredEvent] = []
        self._versions: dict[tuple[AggregateType, str], int] = {}

    def add(self, kind: AggregateType, name: str, when: float, event: Event) -> None:
        aggregate_id = self.cast.id(name)
        version = self._versions.get((kind, aggregate_id), 0) + 1
        self._versions[(kind, aggregate_id)] = version
        cause = new_id()
        env = Envelope(
            event_id=new_id(), name=event.event_name, schema_version=event.schema_version,
            aggregate_type=kind, aggregate_id=aggregate_id, aggregate_version=version,
            occurred_at=at(when), causation_id=cause, correlation_id=cause,
            actor=Actor.service("tests"), tenant=Tenant(domain=self.cast.key("d1")),
            payload=event.model_dump(mode="json"),
        )  # fmt: skip
        self.events.append(StoredEvent(len(self.events) + 1, env))

    def request(
        self, sid: str, who: str, kernels: list[str], when: float, *,
        name: str | None = None, group: str = "default", batch: bool = False,
    ) -> None:  # fmt: skip
        spec = SessionSpec(
            image="busybox", kernels=tuple(KernelSpec(resources=slots("1", 1)) for _ in kernels),
            name=name, resource_group=self.cast.id(group),
            type=SessionType.BATCH if batch else SessionType.INTERACTIVE,
            requeue_on_node_loss=batch,
        )  # fmt: skip
        ids = tuple(self.cast.id(k) for k in kernels)
        owner = self.cast.people[who]
        self.add(
            AggregateType.SESSION, sid, when,
            SessionRequested(spec=spec, kernel_ids=ids, owner=owner),
        )  # fmt: skip

    def allocate(
        self, node: str, kernel: str, sid: str, held: ResourceSlots, when: float,
        *devices: tuple[int, int],
    ) -> None:  # fmt: skip
        """``devices``: (index, hundredths) of each GPU on ``node`` the kernel holds."""
        shares = tuple(
            DeviceShare(
                index=index,
                uuid=self.cast.device(node, index)[1],
                hundredths=hundredths,
                whole=hundredths == 100,
            )
            for index, hundredths in devices
        )
        allocated = ResourcesAllocated(
            kernel_id=self.cast.id(kernel), session_id=self.cast.id(sid), slots=held,
            devices=shares,
        )  # fmt: skip
        self.add(AggregateType.NODE, node, when, allocated)

    def started(self, node: str, kernel: str, sid: str, when: float) -> None:
        kernel_id = self.cast.id(kernel)
        started = KernelStarted(
            kernel_id=kernel_id, session_id=self.cast.id(sid), container_id=f"jy-{kernel_id}"
        )
        self.add(AggregateType.AGENT, node, when, started)

    def released(self, node: str, kernel: str, when: float, reason: str) -> None:
        released = ResourcesReleased(kernel_id=self.cast.id(kernel), reason=reason)
        self.add(AggregateType.NODE, node, when, released)


def known_history(cast: Cast | None = None) -> History:
    h = History(cast or Cast())
    session, node = AggregateType.SESSION, AggregateType.NODE
    # s1, alice: 2 CPU, 4 GiB and a whole GPU on node 1 for 100 s (10 -> 110).
    h.request("s1", "alice", ["k1"], 0, name="train")
    h.allocate(N1, "k1", "s1", slots("2", 4, "1"), 1, (0, 100))
    h.request("s2", "alice", ["k2"], 2, name="share")
    h.request("s3", "bob", ["k3a"], 3, batch=True)
    h.request("s4", "carol", ["k4a", "k4b"], 4, group="gpu")
    h.allocate(N2, "k4a", "s4", slots("4", 8, "1"), 4, (0, 100))
    h.allocate(N2, "k4b", "s4", slots("4", 8, "1"), 4, (1, 100))
    h.started(N2, "k4a", "s4", 5)
    h.started(N2, "k4b", "s4", 7)
    h.started(N1, "k1", "s1", 10)
    h.add(session, "s1", 10, SessionStarted(reason="started"))
    # s2, alice: half a CPU, 1 GiB and half of GPU 1 on node 1, from 30 until node 1 is lost.
    h.allocate(N1, "k2", "s2", slots("0.5", 1, "0.5"), 20, (1, 50))
    h.started(N1, "k2", "s2", 30)
    # s3, bob (batch, requeued on node loss): 1 CPU, 2 GiB on node 1 from 50.
    h.allocate(N1, "k3a", "s3", slots("1", 2), 40)
    h.started(N1, "k3a", "s3", 50)
    h.started(N1, "k1", "s1", 60)  # node 1's agent restarted and reported k1 again: no change
    # s5, bob: allocated on node 3, failed to start, released: nothing accrued.
    h.request("s5", "bob", ["k5"], 90)
    h.allocate(N3, "k5", "s5", slots("8", 8), 100)
    h.released(N3, "k5", 120, "kernel failed to start")
    h.released(N1, "k1", 110, "kernel exited")  # its release, written late: its own time counts
    h.add(session, "s1", 110, SessionTerminated(reason="kernel exited", exit_code=0))
    # Node 1 is lost at 230: both its kernels' slots are released there.
    h.add(node, N1, 230, NodeLost(reason="node-lost: heartbeat expired"))
    h.released(N1, "k2", 230, "node-lost")
    h.released(N1, "k3a", 230, "node-lost")
    h.add(session, "s2", 230, SessionTerminated(reason="node-lost"))
    requeued = SessionRequeued(reason="node-lost", kernel_ids=(h.cast.id("k3b"),), attempt=1)
    h.add(session, "s3", 230, requeued)
    h.started(N1, "k2", "s2", 235)  # the fenced agent's late report: the slots are gone
    # s3 again, on node 3 from 250, still running.
    h.allocate(N3, "k3b", "s3", slots("1", 2), 240)
    h.started(N3, "k3b", "s3", 250)
    h.released(N2, "k4a", 305, "kernel exited")
    h.released(N2, "k4b", 306, "kernel exited")
    # s6, carol: node 3's agent clock lags by 2 s: the start counts from the allocation.
    h.request("s6", "carol", ["k6"], 399, group="gpu")
    h.allocate(N3, "k6", "s6", slots("1", 1), 400)
    h.started(N3, "k6", "s6", 398)
    h.released(N3, "k6", 500, "kernel exited")
    return h


Devices = tuple[tuple[str, int, float, float], ...]
"""((node, GPU index, seconds, share-seconds), ...)"""
Row = tuple[str, float, float, float, int, Devices]
"""key, cpu core-s, memory GiB-s, gpu-s, sessions, devices"""

END = 1000.0
"""The whole range: [T0, T0 + 1000 s), asked at T0 + 1000 s (k3b still runs: 750 s)."""

ALICE_GPUS: Devices = ((N1, 0, 100.0, 100.0), (N1, 1, 200.0, 100.0))
CAROL_GPUS: Devices = ((N2, 0, 300.0, 300.0), (N2, 1, 299.0, 299.0))
EXPECTED: dict[str, list[Row]] = {
    "user": [
        # k1 100 s x (2, 4, 1) + k2 200 s x (0.5, 1, 0.5)
        ("alice", 300.0, 600.0, 200.0, 2, ALICE_GPUS),
        # k3a 180 s + k3b 750 s, x (1, 2); s5 never ran
        ("bob", 930.0, 1860.0, 0.0, 1, ()),
        # k4a 300 s + k4b 299 s, x (4, 8, 1); k6 100 s x (1, 1)
        ("carol", 2496.0, 4892.0, 599.0, 2, CAROL_GPUS),
    ],
    "project": [
        ("project:alice", 300.0, 600.0, 200.0, 2, ALICE_GPUS),
        ("project:bob", 930.0, 1860.0, 0.0, 1, ()),
        ("project:carol", 2496.0, 4892.0, 599.0, 2, CAROL_GPUS),
    ],
    "domain": [
        ("d1", 1230.0, 2460.0, 200.0, 3, ALICE_GPUS),
        ("d2", 2496.0, 4892.0, 599.0, 2, CAROL_GPUS),
    ],
    "resource_group": [
        ("default", 1230.0, 2460.0, 200.0, 3, ALICE_GPUS),
        ("gpu", 2496.0, 4892.0, 599.0, 2, CAROL_GPUS),
    ],
    "session": [
        ("s1", 200.0, 400.0, 100.0, 1, ALICE_GPUS[:1]),
        ("s2", 100.0, 200.0, 100.0, 1, ALICE_GPUS[1:]),
        ("s3", 930.0, 1860.0, 0.0, 1, ()),
        ("s4", 2396.0, 4792.0, 599.0, 1, CAROL_GPUS),
        ("s6", 100.0, 100.0, 0.0, 1, ()),
    ],
}

WINDOW: list[Row] = [
    # [T0 + 100, T0 + 200): k1 10 s, k2 100 s, k3a 100 s, k4a and k4b 100 s each.
    ("alice", 70.0, 140.0, 60.0, 2, ((N1, 0, 10.0, 10.0), (N1, 1, 100.0, 50.0))),
    ("bob", 100.0, 200.0, 0.0, 1, ()),
    ("carol", 800.0, 1600.0, 200.0, 1, ((N2, 0, 100.0, 100.0), (N2, 1, 100.0, 100.0))),
]

Line = tuple[str, float, float, float, int, tuple[tuple[str, str, float, float], ...]]
"""A report line as compared: key, the sums, sessions, ((node, device uuid, s, share-s), ...)"""


def as_reported(rows: list[Row], cast: Cast) -> list[Line]:
    """The expected rows with the cast's ids, in the order reports give them (by key)."""
    lines = [
        (
            cast.key(key), cpu, memory, gpu, sessions,
            tuple((*cast.device(node, index), s, share) for node, index, s, share in devices),
        )
        for key, cpu, memory, gpu, sessions, devices in rows
    ]  # fmt: skip
    return sorted(lines, key=lambda line: line[0])


def as_lines(lines: list[UsageLine]) -> list[Line]:
    """A report's lines as compared."""
    return [
        (
            line.key, line.cpu_core_seconds, line.memory_gib_seconds, line.gpu_seconds,
            line.sessions,
            tuple((d.node_id, d.device, d.seconds, d.share_seconds) for d in line.devices),
        )
        for line in lines
    ]  # fmt: skip
