"""The parts of ``jetyard up`` and their state: starting them (the data directory's lock,
the NATS server child, the streams, each service a ``jetyard serve`` child), whether each is
healthy (``jetyard.runtime.health``), restarting what died, and stopping them all. Declares
the streams; reads and writes no subject otherwise."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from events.bus import connect, ensure_streams
from jetyard import stacks
from jetyard.runtime import walk_image
from jetyard.runtime.appproxy_setup import AppProxySetup
from jetyard.runtime.bootstrap import cluster_id, nats_token, secrets_key
from jetyard.runtime.data_dir import (
    DataDirLock,
    kept_nats_port,
    ready_file,
    ready_pid,
    seal_key,
    stop_orphaned_server,
)
from jetyard.runtime.health import ended, gateway_problem, http_problem, nats_problem, with_log
from jetyard.runtime.metrics_setup import MetricsSetup
from jetyard.runtime.natsserver import NatsServer
from jetyard.runtime.serve import READY_FILE_ENV, STOPPED_FOR_GOOD
from jetyard.runtime.storage_setup import StorageSetup
from schemas.settings import NatsSettings

NATS = "nats-server"
SERVICE_ORDER = (
    "projections", "tenancy", "storage", "appproxy", "scheduler", "agent", "serving",
    "sealer", "gateway",
)  # fmt: skip
QUICK_DEATH_S = 5.0  # a service that dies sooner than this after starting is restarted...
MAX_RESTART_DELAY_S = 60.0  # ...after a pause that doubles each time, up to this


def _start_timeout_s() -> float:
    return float(os.environ.get("JETYARD_UP_START_TIMEOUT_S", "120"))


@dataclass
class UpOptions:
    data_dir: Path
    gateway_port: int = 8080
    nats_port: int = 0  # 0: the port kept in <data-dir>/nats.port (a free one the first time)
    agent_backend: str = "auto"
    restart_delay_s: float = 1.0
    stop_sessions: bool = False
    """End every running session (through the log) before stopping (``--stop-sessions``)."""
    listen: str = "127.0.0.1"
    """Where NATS and the gateway listen (``--listen``): another machine joins through it."""
    services: tuple[str, ...] = SERVICE_ORDER
    start_timeout_s: float = field(default_factory=_start_timeout_s)


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    # `up` blocks SIGINT/SIGTERM to receive them with sigtimedwait; a child inherits the
    # mask, and a service that cannot receive SIGTERM cannot be stopped cleanly.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


FOR_GOOD = "stopped for good (a restart would change nothing: its log says why); not restarted"


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
    down: set[str] = field(default_factory=set)  # said to be down, not yet said to be back
    for_good: set[str] = field(default_factory=set)
    """Parts that exited ``STOPPED_FOR_GOOD`` (the agent of a removed node): not restarted."""
    said: dict[str, tuple[str, float]] = field(default_factory=dict)  # what `up` waits for
    bootstrapped: bool = False
    bootstrap_at: float = 0.0  # when to try the first superadmin again after a failure
    nats_retry_at: float | None = None  # when to try again to start a server that died
    storage: StorageSetup | None = None
    appproxy: AppProxySetup | None = None
    metrics: MetricsSetup | None = None
    port_notes: list[str] = field(default_factory=list)
    """Why a port the README names (storage 6021, app proxy 6022) is another one here."""

    def env(self, name: str) -> dict[str, str]:
        assert self.server is not None and self.server.token is not None
        assert self.storage is not None and self.appproxy is not None
        data = self.options.data_dir
        return {
            **os.environ,
            **self.storage.env(),
            **self.appproxy.env(),
            **(self.metrics.env() if self.metrics is not None else {}),
            "JETYARD_NATS_URL": self.server.url,
            "JETYARD_NATS_TOKEN": self.server.token,
            "JETYARD_AGENT_DATA_DIR": str(data / "agent"),
            "JETYARD_AGENT_BACKEND": self.options.agent_backend,
            "JETYARD_AGENT_CLUSTER_ID": self.cluster_id,
            "JETYARD_PROJECTIONS_DATABASE_URL": os.environ.get(
                "JETYARD_PROJECTIONS_DATABASE_URL", f"sqlite+aiosqlite:///{data / 'views.db'}"
            ),
            "JETYARD_GATEWAY_HOST": self.options.listen,
            "JETYARD_GATEWAY_PORT": str(self.options.gateway_port),
            # What POST /join hands a new machine: this server, where it listens.
            "JETYARD_GATEWAY_JOIN_NATS_URL": os.environ.get(
                "JETYARD_GATEWAY_JOIN_NATS_URL", self.server.url
            ),
            "JETYARD_GATEWAY_SECRETS_KEY": self.secrets_key,
            "JETYARD_GATEWAY_HISTORY_DIR": str(data / "history"),
            "JETYARD_SEALER_KEY_FILE": str(seal_key(data)),
            READY_FILE_ENV: str(ready_file(data, name)),
        }

    @property
    def gateway_url(self) -> str:
        return f"http://{self.options.listen}:{self.options.gateway_port}"

    def log_of(self, part: str) -> Path:
        if part == NATS:
            return self.options.data_dir / "nats" / "nats-server.log"
        return self.options.data_dir / "logs" / f"{part}.log"

    def start(self) -> None:
        data = self.options.data_dir
        self.lock = DataDirLock(data)
        self.lock.acquire()
        self.cluster_id = cluster_id(data)  # before the NATS store exists on a first start
        if (data / "nats").exists():
            # A stack that ran before agents kept their node id: its agent keeps the id it
            # had (services.node.identity), so its containers are not orphaned.
            (data / "agent").mkdir(mode=0o700, exist_ok=True)
        orphan = stop_orphaned_server(data / "nats" / "nats-server.pid")
        if orphan is not None:
            print(f"stopped nats-server {orphan} left running by an earlier jetyard up")
        port, warning = kept_nats_port(data, self.options.nats_port)
        if warning is not None:
            print(f"WARNING: {warning}", flush=True)
        self.server = NatsServer(
            data_dir=data / "nats", port=port, token=nats_token(data), host=self.options.listen
        )
        self.server.start()
        self.secrets_key = secrets_key(data)
        self.storage, storage_note = StorageSetup.of(data)
        self.appproxy, appproxy_note = AppProxySetup.of(data)
        self.metrics, metrics_notes = MetricsSetup.of(data)
        self.port_notes = [n for n in (storage_note, appproxy_note) if n is not None]
        for note in (*self.port_notes, *metrics_notes):
            print(f"note: {note}", flush=True)
        self.metrics.write_targets(data, self.metrics_urls())
        asyncio.run(self._declare())
        # For tools run by hand against this stack (`jetyard log`) and agents on other
        # machines: `set -a; . nats.env`.
        env_file = data / "nats.env"
        env_file.touch(mode=0o600)
        env_file.write_text(
            f"JETYARD_NATS_URL={self.server.url}\nJETYARD_NATS_TOKEN={self.server.token}\n"
        )
        (data / "logs").mkdir(parents=True, exist_ok=True)
        (data / "run").mkdir(parents=True, exist_ok=True)
        # How `jetyard log`, `projections rebuild`... find this stack (jetyard/stacks.py).
        stacks.register(
            stacks.StackRecord(
                data_dir=str(data.resolve()),
                pid=os.getpid(),
                gateway_url=self.gateway_url,
                nats_url=self.server.url,
                views_url=self.env("projections")["JETYARD_PROJECTIONS_DATABASE_URL"],
            )
        )
        if "agent" in self.options.services and self.options.agent_backend != "simulated":
            walk_image.ensure(say=lambda line: print(line, flush=True))  # before it reports
        for name in self.options.services:
            self._spawn(name)

    def _spawn(self, name: str) -> None:
        data = self.options.data_dir
        ready_file(data, name).unlink(missing_ok=True)  # a SIGKILLed child leaves it behind
        log = open(self.log_of(name), "ab")  # noqa: SIM115 (kept for the child)
        child = subprocess.Popen(
            [sys.executable, "-m", "jetyard.cli", "serve", name],
            env=self.env(name),
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

    # ---- health ----------------------------------------------------------------------------

    def parts(self) -> tuple[str, ...]:
        return (NATS, *self.options.services)

    def problem(self, part: str) -> str | None:
        """Why a part is not healthy, or None when it is."""
        if part == NATS:
            assert self.server is not None
            return nats_problem(self.server)
        child = self.children[part]
        if part in self.for_good:
            return FOR_GOOD
        if child.poll() is not None:
            return f"{ended(child.returncode)}; restarting"
        if ready_pid(ready_file(self.options.data_dir, part)) != child.pid:
            return f"not ready yet (see {self.log_of(part)})"
        if part == "gateway":
            return gateway_problem(self.options.gateway_port, self.options.listen)
        if part == "storage":
            assert self.storage is not None
            return http_problem(f"{self.storage.url}/healthz")
        if part == "appproxy":
            assert self.appproxy is not None
            return http_problem(f"{self.appproxy.url}/healthz")
        return None

    def missing(self, parts: Iterable[str]) -> dict[str, str]:
        found = {part: self.problem(part) for part in parts}
        return {part: why for part, why in found.items() if why is not None}

    def metrics_urls(self) -> dict[str, str]:
        """Each running service's ``/metrics`` URL."""
        assert self.metrics is not None and self.storage is not None
        assert self.appproxy is not None
        listeners = {
            "gateway": self.gateway_url,
            "storage": self.storage.url,
            "appproxy": self.appproxy.url,
        }
        urls = self.metrics.urls(listeners)
        return {s: url for s, url in urls.items() if s in self.options.services}

    # ---- supervision -----------------------------------------------------------------------

    def supervise(self) -> None:
        """Restart what died: the ``nats-server`` at once (same store, config, port and
        token: the services reconnect by themselves), a service after a pause that doubles
        while it keeps dying at once (up to a minute). The stack keeps running and says what
        is down and why; it never gives up on a part, but for one that says a restart could change
        nothing (``STOPPED_FOR_GOOD``: the agent of a node removed from the cluster)."""
        self._supervise_nats()
        now = time.monotonic()
        for name, child in list(self.children.items()):
            if child.poll() is None or name in self.for_good:
                continue
            if child.returncode == STOPPED_FOR_GOOD:
                # Its node was removed from the cluster, or its configuration cannot be used:
                # starting it again would stop again.
                self.for_good.add(name)
                self.down.add(name)
                print(with_log(f"{name} {FOR_GOOD}", self.log_of(name)), flush=True)
                continue
            if name not in self.died_at:
                quick = now - self.started_at[name] < QUICK_DEATH_S
                self.quick_deaths[name] = self.quick_deaths.get(name, 0) + 1 if quick else 0
                self.died_at[name] = now
                self.down.add(name)
                said = f"{name} {ended(child.returncode)}; restarting in {self._delay(name):.0f}s"
                print(with_log(said, self.log_of(name)), flush=True)
            if now - self.died_at[name] >= self._delay(name):
                del self.died_at[name]
                self._spawn(name)

    def _delay(self, name: str) -> float:
        quick = self.quick_deaths.get(name, 0)
        return float(
            min(self.options.restart_delay_s * 2 ** max(quick - 1, 0), MAX_RESTART_DELAY_S)
        )

    def _supervise_nats(self) -> None:
        server = self.server
        if server is None or server.process is None or server.process.poll() is None:
            return
        now = time.monotonic()
        if self.nats_retry_at is None:
            said = f"{NATS} {ended(server.process.returncode)}; restarting"
            print(with_log(said, self.log_of(NATS)), flush=True)
        elif now < self.nats_retry_at:
            return
        try:
            server.start()
        except (RuntimeError, TimeoutError, OSError) as exc:
            self.nats_retry_at = now + self.options.restart_delay_s
            print(f"{NATS} did not come back ({exc}); trying again", flush=True)
            return
        self.nats_retry_at = None
        print(f"{NATS} is back on {server.url}", flush=True)

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
        stacks.unregister(self.options.data_dir, os.getpid())
        if self.lock is not None:
            self.lock.release()
