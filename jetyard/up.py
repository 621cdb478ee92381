"""``jetyard up``: the whole system on one machine, embedded defaults, one command.

Starts a ``nats-server`` child (127.0.0.1, pidfile, parent-death signal, a token made on the
first start and kept owner-only in ``<data-dir>/nats.token``) on ``<data-dir>/nats``, declares
the streams, then runs every service as a child process (``jetyard serve <service>``) so
Python uses every core. It supervises them all: a server that dies is started again at once
on the same store, port and token (the services reconnect), a service after a pause that
doubles while it keeps dying at once; it says what is down and never gives up on a part.
Ctrl-C stops the services, then the server. A lock on the data directory keeps a second
``up`` off it; a server orphaned by a ``kill -9`` of an earlier ``up`` is found through its
pidfile and stopped first.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from events.bus import connect, ensure_streams
from jetyard.bootstrap import (
    AdminCredentials,
    bootstrap,
    cluster_id,
    nats_token,
    secrets_key,
)
from jetyard.natsserver import NatsServer
from jetyard.runtime import DataDirLock, stop_orphaned_server
from schemas.settings import NatsSettings

SERVICE_ORDER = ("projections", "tenancy", "scheduler", "agent", "gateway")
QUICK_DEATH_S = 5.0  # a service that dies sooner than this after starting is restarted...
MAX_RESTART_DELAY_S = 60.0  # ...after a pause that doubles each time, up to this


@dataclass
class UpOptions:
    data_dir: Path
    gateway_port: int = 8080
    nats_port: int = 0
    agent_backend: str = "auto"
    restart_delay_s: float = 1.0
    services: tuple[str, ...] = SERVICE_ORDER


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    # `up` blocks SIGINT/SIGTERM to receive them with sigtimedwait; a child inherits the
    # mask, and a service that cannot receive SIGTERM cannot be stopped cleanly.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


@dataclass
class Stack:
    options: UpOptions
    server: NatsServer | None = None
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)
    died_at: dict[str, float] = field(default_factory=dict)
    quick_deaths: dict[str, int] = field(default_factory=dict)
    lock: DataDirLock | None = None
    secrets_key: str = ""
    cluster_id: str = ""

    def env(self) -> dict[str, str]:
        assert self.server is not None and self.server.token is not None
        data = self.options.data_dir
        return {
            **os.environ,
            "JETYARD_NATS_URL": self.server.url,
            "JETYARD_NATS_TOKEN": self.server.token,
            "JETYARD_AGENT_DATA_DIR": str(data / "agent"),
            "JETYARD_AGENT_BACKEND": self.options.agent_backend,
            "JETYARD_AGENT_CLUSTER_ID": self.cluster_id,
            "JETYARD_PROJECTIONS_DATABASE_URL": os.environ.get(
                "JETYARD_PROJECTIONS_DATABASE_URL", f"sqlite+aiosqlite:///{data / 'views.db'}"
            ),
            "JETYARD_GATEWAY_PORT": str(self.options.gateway_port),
            "JETYARD_GATEWAY_SECRETS_KEY": self.secrets_key,
        }

    def start(self) -> None:
        data = self.options.data_dir
        self.lock = DataDirLock(data)
        self.lock.acquire()
        self.cluster_id = cluster_id(data)  # before the NATS store exists on a first start
        orphan = stop_orphaned_server(data / "nats" / "nats-server.pid")
        if orphan is not None:
            print(f"stopped nats-server {orphan} left running by an earlier jetyard up")
        self.server = NatsServer(
            data_dir=data / "nats", port=self.options.nats_port, token=nats_token(data)
        ).start()
        self.secrets_key = secrets_key(data)
        asyncio.run(self._declare())
        # For tools run by hand against this stack (`jetyard log`): `set -a; . nats.env`.
        env_file = data / "nats.env"
        env_file.touch(mode=0o600)
        env_file.write_text(
            f"JETYARD_NATS_URL={self.server.url}\nJETYARD_NATS_TOKEN={self.server.token}\n"
        )
        (data / "logs").mkdir(parents=True, exist_ok=True)
        (data / "run").mkdir(parents=True, exist_ok=True)
        for name in self.options.services:
            self._spawn(name)

    def bootstrap(self) -> AdminCredentials | None:
        """The first superadmin, on the first start (the tenancy service decides the commands)."""
        assert self.server is not None
        settings = NatsSettings(url=self.server.url, token=self.server.token)

        async def run() -> AdminCredentials | None:
            bus = await connect(settings, name="jetyard-bootstrap")
            try:
                return await bootstrap(bus, self.options.data_dir, self.secrets_key.encode())
            finally:
                await bus.close()

        return asyncio.run(run())

    def _spawn(self, name: str) -> None:
        data = self.options.data_dir
        log = open(data / "logs" / f"{name}.log", "ab")  # noqa: SIM115 (kept for the child)
        child = subprocess.Popen(
            [sys.executable, "-m", "jetyard.cli", "serve", name],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        log.close()
        self.children[name] = child
        self.started_at[name] = time.monotonic()
        (data / "run" / f"{name}.pid").write_text(f"{child.pid}\n")

    async def _declare(self) -> None:
        assert self.server is not None
        bus = await connect(
            NatsSettings(url=self.server.url, token=self.server.token), name="jetyard-up"
        )
        try:
            await ensure_streams(bus)
        finally:
            await bus.close()

    def supervise(self) -> str | None:
        """Restart what died: the ``nats-server`` at once (same store, config, port and
        token: the services reconnect by themselves), a service after a pause that doubles
        while it keeps dying at once (up to a minute). The stack keeps running and says what
        is down; it never gives up on a part."""
        self._supervise_nats()
        now = time.monotonic()
        for name, child in list(self.children.items()):
            if child.poll() is None:
                continue
            if name not in self.died_at:
                quick = now - self.started_at[name] < QUICK_DEATH_S
                self.quick_deaths[name] = self.quick_deaths.get(name, 0) + 1 if quick else 0
                self.died_at[name] = now
                log = self.options.data_dir / "logs" / f"{name}.log"
                print(
                    f"{name} exited with {child.returncode}; restarting in "
                    f"{self._delay(name):.0f}s (see {log})",
                    flush=True,
                )
            if now - self.died_at[name] >= self._delay(name):
                del self.died_at[name]
                self._spawn(name)
        return None

    def _delay(self, name: str) -> float:
        quick = self.quick_deaths.get(name, 0)
        return float(
            min(self.options.restart_delay_s * 2 ** max(quick - 1, 0), MAX_RESTART_DELAY_S)
        )

    def _supervise_nats(self) -> None:
        server = self.server
        if server is None or server.process is None or server.process.poll() is None:
            return
        print(f"nats-server exited with {server.process.returncode}; restarting", flush=True)
        try:
            server.start()
            print(f"nats-server is back on {server.url}", flush=True)
        except (RuntimeError, TimeoutError, OSError) as exc:
            print(f"nats-server did not come back ({exc}); trying again", flush=True)

    def stop(self, timeout: float = 15.0) -> None:
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children.values():
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if self.server is not None:
            self.server.stop()
        if self.lock is not None:
            self.lock.release()


def up(options: UpOptions) -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    stack = Stack(options)
    try:
        stack.start()
        assert stack.server is not None
        if "tenancy" in options.services:
            admin = stack.bootstrap()
            if admin is not None:
                print("First start: a superadmin was created. Shown once; also in")
                print(f"  {options.data_dir / 'admin.json'} (readable only by you):")
                print(f"  email       {admin.email}")
                print(f"  password    {admin.password}")
                print(f"  access key  {admin.access_key}")
                print(f"  secret key  {admin.secret_key}")
        print(f"Jetyard is up (data in {options.data_dir})")
        print(f"  GraphQL   http://127.0.0.1:{options.gateway_port}/graphql")
        print(f"  health    http://127.0.0.1:{options.gateway_port}/healthz")
        print(f"  NATS      {stack.server.url} (token in {options.data_dir / 'nats.token'})")
        print(f"  logs      {options.data_dir / 'logs'}")
        print("Ctrl-C stops everything.", flush=True)
        while True:
            received = signal.sigtimedwait({signal.SIGINT, signal.SIGTERM}, 1.0)
            if received is not None:
                print("stopping...", flush=True)
                return 0
            failed = stack.supervise()
            if failed is not None:
                print(f"jetyard up: {failed}", file=sys.stderr)
                return 1
    finally:
        stack.stop()
