"""A three-node NATS JetStream cluster for tests (issue 27's control plane): three
``nats-server`` children on 127.0.0.1, each with its own store and a route to the others, the
streams declared at R3. A member is killed (SIGKILL) and started again on its own ports and
store, as a machine that died and came back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import nats.errors
import nats.js.errors

from jetyard.runtime.natsserver import NatsServer, free_port
from schemas.settings import NatsSettings

MEMBERS = ("n1", "n2", "n3")


@dataclass
class NatsCluster:
    servers: dict[str, NatsServer]

    @property
    def url(self) -> str:
        return ",".join(s.url for s in self.servers.values())

    def settings(self, **more: object) -> NatsSettings:
        return NatsSettings(url=self.url, replicas=3, request_timeout_s=5.0, **more)  # type: ignore[arg-type]

    def kill(self, name: str) -> None:
        self.servers[name].kill()

    def restart(self, name: str) -> None:
        self.servers[name].start()

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()

    async def leader_of(self, stream: str, *, timeout: float = 20.0) -> str:
        """The member leading ``stream`` now (waits while an election runs)."""
        deadline = asyncio.get_running_loop().time() + timeout
        alive = [s.url for s in self.servers.values() if s.process and s.process.poll() is None]
        nc = await nats.connect(alive, connect_timeout=2, max_reconnect_attempts=2)
        try:
            js = nc.jetstream(timeout=2)
            while True:
                with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
                    info = await js.stream_info(stream)
                    if info.cluster is not None and info.cluster.leader:
                        return str(info.cluster.leader)
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"stream {stream} has no leader after {timeout}s")
                await asyncio.sleep(0.2)
        finally:
            await nc.close()

    async def ready(self, *, timeout: float = 30.0) -> None:
        """Until JetStream answers through the cluster (its meta leader is elected)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                nc = await nats.connect(self.url.split(","), connect_timeout=2)
                try:
                    await nc.jetstream(timeout=2).account_info()
                    return
                finally:
                    await nc.close()
            except (nats.errors.Error, nats.js.errors.Error, TimeoutError, OSError):
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.3)


@contextlib.contextmanager
def nats_cluster(root: Path) -> Iterator[NatsCluster]:
    ports = {name: (free_port(), free_port()) for name in MEMBERS}
    servers = {
        name: NatsServer(
            data_dir=root / name,
            port=client,
            name=name,
            cluster_port=route,
            routes=tuple(r for other, (_, r) in ports.items() if other != name),
        )
        for name, (client, route) in ports.items()
    }
    cluster = NatsCluster(servers)
    try:
        for server in servers.values():
            server.start()
        yield cluster
    finally:
        cluster.stop()
