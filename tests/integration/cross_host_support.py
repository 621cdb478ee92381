"""Two GPU servers on a lab network (``tests/netns_support``), each a network namespace with its
own Docker engine and its own agent (``jetyard serve agent``, a process of that host), a NATS
server and a scheduler in the root namespace (on the lab as its "head"), and a third host with
neither: the outside. Used by ``test_cross_host.py`` and ``bench/cross_host.py``.

Each node offers 2 CPUs, so a session of two 1.5-CPU kernels is spread over both nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from commands.bus import CommandBus
from commands.messages import TerminateSession
from commands.node.aggregate import Node
from commands.repository import load
from commands.session.aggregate import Session
from events.bus import Bus, connect, ensure_streams
from events.store import EventStore
from jetyard.runtime.natsserver import NatsServer, free_port
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import ClusterMode, SessionStatus
from schemas.settings import NatsSettings
from schemas.tenancy import KeypairPolicyLimits, SessionOwner
from schemas.vfolder import MountRequest
from services.scheduler.service import Scheduler
from services.scheduler.settings import SchedulerSettings
from tests.integration.scheduler_support import eventually, requested, slots
from tests.netns_support import Engine, Host, Lab, lab
from tests.tenancy_support import make_tenancy

IMAGE = "jetyard-busybox:latest"
BIG = slots(cpu=1.5, mem=0.25)
"""A kernel of which one fits a node (2 CPUs): a session of two is spread."""
SMALL = slots(cpu=0.25, mem=0.125)
VENV_BIN = Path(sys.executable).parent


@dataclass
class Server:
    """One server of the lab: its host, engine, and agent process (restartable)."""

    host: Host
    engine: Engine
    node_id: str
    env: dict[str, str]
    agent: subprocess.Popen[bytes] | None = None

    def start_agent(self) -> None:
        log = open(self.engine.root / f"agent-{len(self.host.processes)}.log", "ab")  # noqa: SIM115
        self.agent = self.host.popen(
            [str(VENV_BIN / "jetyard"), "serve", "agent"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill_agent(self) -> None:
        """SIGKILL: the agent stops nothing on its way out."""
        assert self.agent is not None
        self.agent.send_signal(signal.SIGKILL)
        self.agent.wait(10)

    def stop_agent(self) -> None:
        if self.agent is not None and self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(20)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait()

    def docker(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.engine.docker(*argv, check=check)

    async def exec(self, container: str, script: str, *, detach: bool = False) -> tuple[int, str]:
        """``sh -c script`` in a container of this node: exit code, output (off the event
        loop: the scheduler runs on it)."""
        argv = ["exec", *(["-d"] if detach else []), container, "sh", "-c", script]
        done = await asyncio.to_thread(self.docker, *argv, check=False)
        return done.returncode, done.stdout + done.stderr

    async def leftovers(self) -> dict[str, list[str]]:
        return await asyncio.to_thread(self._leftovers)

    def _leftovers(self) -> dict[str, list[str]]:
        """Jetyard's containers, networks and VXLAN devices on this node."""
        containers = self.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
        networks = self.docker("network", "ls", "--format", "{{.Name}}").stdout.split()
        links = self.host.run(["ip", "-o", "link", "show", "type", "vxlan"]).stdout
        rules = self.host.run(["iptables", "-S", "DOCKER-USER"]).stdout
        return {
            "containers": [c for c in containers if c.startswith("jy-")],
            "networks": [n for n in networks if n.startswith("jy-net-")],
            "vxlans": [w.rstrip(":@") for w in links.split() if w.startswith("jyv")],
            "rules": [r for r in rules.splitlines() if "jetyard:" in r],
        }


@dataclass
class CrossHost:
    net: Lab
    nodes: list[Server]
    outside: Host
    bus: Bus
    store: EventStore
    owner: SessionOwner
    cluster_id: str
    sessions: list[str] = field(default_factory=list)

    async def session(
        self, need: Any = BIG, *, kernels: int = 2, command: Sequence[str] = ("sleep", "600"),
        mounts: tuple[MountRequest, ...] = (),
    ) -> Session:  # fmt: skip
        """A multi-node session, once RUNNING."""
        session_id = await requested(
            self.bus, IMAGE, self.owner, need, kernels=kernels,
            cluster_mode=ClusterMode.MULTI_NODE, command=tuple(command), mounts=mounts,
        )  # fmt: skip
        self.sessions.append(session_id)
        return await running(self.store, session_id)

    async def terminate(self, session_id: str) -> None:
        cmd = TerminateSession(
            actor=Actor.service("tests"), tenant=SYSTEM_TENANT, session_id=session_id
        )
        outcome = await CommandBus(self.bus).execute(cmd, timeout=10)
        assert outcome is not None and outcome.accepted, outcome

    def node_of(self, session: Session, index: int) -> tuple[Server, str]:
        """The node kernel ``index`` (0: main1) runs on, and its container's name."""
        kernel_id = session.kernel_ids[index]
        node_id = session.placements[kernel_id]
        node = next(n for n in self.nodes if n.node_id == node_id)
        return node, f"jy-{kernel_id}"

    async def address_of(self, session: Session, index: int) -> str:
        """The kernel's address on its session's network, as its engine says."""
        node, container = self.node_of(session, index)
        shown = await asyncio.to_thread(
            node.docker,
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container,
        )  # fmt: skip
        return shown.stdout.strip()


async def running(store: EventStore, session_id: str, timeout: float = 60) -> Session:
    async def check() -> Session | None:
        session = (await load(store, Session, session_id)).aggregate
        if session is not None and session.status.is_terminal:
            raise AssertionError(f"session {session_id} ended: {session.reason}")
        return session if session is not None and session.status is SessionStatus.RUNNING else None

    return await eventually(check, timeout, f"session {session_id} running")


async def ended(store: EventStore, session_id: str, timeout: float = 60) -> Session:
    return await eventually(
        lambda: _ended(store, session_id), timeout, f"session {session_id} ended"
    )


async def _ended(store: EventStore, session_id: str) -> Session | None:
    session = (await load(store, Session, session_id)).aggregate
    return session if session is not None and session.status.is_terminal else None


def _agent_env(
    nats_url: str, engine: Engine, node_id: str, cluster_id: str, data_dir: Path,
    volumes: dict[str, Path],
) -> dict[str, str]:  # fmt: skip
    return {
        "JETYARD_AGENT_VOLUMES": json.dumps({name: str(root) for name, root in volumes.items()}),
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        "JETYARD_NATS_URL": nats_url,
        "JETYARD_AGENT_BACKEND": "docker",
        "JETYARD_AGENT_DOCKER_URL": engine.url,
        "JETYARD_AGENT_NODE_ID": node_id,
        "JETYARD_AGENT_HOSTNAME": node_id,
        "JETYARD_AGENT_CLUSTER_ID": cluster_id,
        "JETYARD_AGENT_DATA_DIR": str(data_dir),
        "JETYARD_AGENT_CPU": "2",
        "JETYARD_AGENT_MEMORY_BYTES": str(2 << 30),
        "JETYARD_AGENT_STOP_TIMEOUT_S": "1",
        "JETYARD_AGENT_RESYNC_INTERVAL_S": "0.5",
    }


@contextlib.asynccontextmanager
async def cross_host(
    root: Path, volumes: dict[str, Path] | None = None
) -> AsyncIterator[CrossHost]:
    """The lab of two servers and an outsider, every agent registered and a tenancy made.
    ``volumes``: storage volumes both servers have, at the same path (as a shared file system
    mounted on every machine: the hosts share this machine's files)."""
    with lab(root) as net:
        server = NatsServer(data_dir=root / "nats", host=net.address, port=free_port()).start()
        try:
            async with _on(net, server, root, volumes or {}) as world:
                yield world
        finally:
            server.stop()


@contextlib.asynccontextmanager
async def _on(
    net: Lab, server: NatsServer, root: Path, volumes: dict[str, Path]
) -> AsyncIterator[CrossHost]:
    settings = NatsSettings(url=server.url, request_timeout_s=10.0)
    bus = await connect(settings, name="cross-host")
    scheduler: Scheduler | None = None
    nodes: list[Server] = []
    try:
        await ensure_streams(bus)
        store = EventStore(bus)
        cluster_id = f"x{new_id()[:8]}"
        engines = await asyncio.gather(
            *(asyncio.to_thread(_engine, net.host(name)) for name in ("a", "b"))
        )
        outside = net.host("c")
        for engine in engines:
            node_id = f"xh-{engine.host.name}-{net.tag}"
            data = engine.root / "agent"
            env = _agent_env(server.url, engine, node_id, cluster_id, data, volumes)
            nodes.append(Server(engine.host, engine, node_id, env))
        scheduler = Scheduler(
            bus,
            SchedulerSettings(
                durable=f"scheduler-xh-{new_id()[:8]}",
                poll_timeout_s=0.25,
                command_fetch_timeout_s=0.2,
            ),
        )
        await scheduler.start()
        limits = KeypairPolicyLimits(max_containers_per_session=4)
        owner = (await make_tenancy(store, limits=limits)).owner
        for node in nodes:
            node.start_agent()
        for node in nodes:
            await eventually(partial(_registered, store, node.node_id), 60, node.node_id)
        yield CrossHost(net, nodes, outside, bus, store, owner, cluster_id)
    finally:
        for node in nodes:
            node.stop_agent()
        if scheduler is not None:
            await scheduler.stop()
        await bus.close()


def _engine(host: Host) -> Engine:
    engine = host.dockerd()
    engine.load_image(IMAGE)
    return engine


async def _registered(store: EventStore, node_id: str) -> bool:
    return (await load(store, Node, node_id)).aggregate is not None


async def probe(host: Host, address: str, port: int, timeout: float = 3) -> str:
    """A TCP connection from ``host`` to ``address:port``: "refused", "timeout", "unreachable"
    or what the other end said ("answer:…")."""
    script = (
        "import socket\n"
        "try:\n"
        f"    s = socket.create_connection(({address!r}, {port}), timeout={timeout})\n"
        "    print('answer:' + s.recv(64).decode(errors='replace').strip())\n"
        "except ConnectionRefusedError: print('refused')\n"
        "except TimeoutError: print('timeout')\n"
        "except OSError as e: print('unreachable', e)\n"
    )
    done = await asyncio.to_thread(host.run, [sys.executable, "-c", script], check=False)
    return done.stdout.strip()
