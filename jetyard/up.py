"""``jetyard up``: the whole system on one machine, embedded defaults, one command.

Starts a ``nats-server`` child (127.0.0.1, pidfile, parent-death signal; a token and a port
made on the first start and kept in ``<data-dir>/nats.token`` and ``nats.port``) on
``<data-dir>/nats``, declares the streams, then runs every service as a child process
(``jetyard serve <service>``) so Python uses every core. It says it is up only when every part
is healthy: the server answering, each service ready (connected and caught up: it writes
``<data-dir>/run/<service>.ready``), the gateway's, the storage data plane's and the app
proxy's ``/healthz`` 200; until then it says what it waits for and why. The storage service's
key, volume and port are kept in the data directory too (``up_storage``), the app proxy's key
and port (``up_appproxy``), and the services' metrics ports (``up_metrics``: every ``/metrics``
is listed in ``<data-dir>/prometheus-targets.json``). It supervises them all: a server that
dies is started again at once on the same store, port and token (the services reconnect), a
service after a pause that doubles while it keeps dying at once; it says what went down and
why, and when it is back, and never gives up on a part. Ctrl-C stops the services, then the
server. A lock on the data directory keeps a second ``up`` off it; a server orphaned by a
``kill -9`` of an earlier ``up`` is found through its pidfile and stopped first.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from events.bus import connect, ensure_streams
from jetyard import stacks
from jetyard.bootstrap import (
    AdminCredentials,
    bootstrap,
    cluster_id,
    nats_token,
    secrets_key,
)
from jetyard.natsserver import NatsServer
from jetyard.runtime import (
    DataDirLock,
    kept_nats_port,
    last_lines,
    ready_file,
    ready_pid,
    stop_orphaned_server,
)
from jetyard.serve import READY_FILE_ENV
from jetyard.up_appproxy import AppProxySetup
from jetyard.up_metrics import MetricsSetup
from jetyard.up_storage import StorageSetup
from schemas.settings import NatsSettings

NATS = "nats-server"
SERVICE_ORDER = (
    "projections", "tenancy", "storage", "appproxy", "scheduler", "agent", "gateway",
)  # fmt: skip
QUICK_DEATH_S = 5.0  # a service that dies sooner than this after starting is restarted...
MAX_RESTART_DELAY_S = 60.0  # ...after a pause that doubles each time, up to this
TICK_S = 0.5
QUIET_START_S = 10.0  # a (re)start takes seconds: what `up` waits for is said after this...
SAY_AGAIN_S = 15.0  # ...and again this often while it stays missing
BOOTSTRAP_RETRY_S = 10.0


def _start_timeout_s() -> float:
    return float(os.environ.get("JETYARD_UP_START_TIMEOUT_S", "120"))


@dataclass
class UpOptions:
    data_dir: Path
    gateway_port: int = 8080
    nats_port: int = 0  # 0: the port kept in <data-dir>/nats.port (a free one the first time)
    agent_backend: str = "auto"
    restart_delay_s: float = 1.0
    services: tuple[str, ...] = SERVICE_ORDER
    start_timeout_s: float = field(default_factory=_start_timeout_s)


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    # `up` blocks SIGINT/SIGTERM to receive them with sigtimedwait; a child inherits the
    # mask, and a service that cannot receive SIGTERM cannot be stopped cleanly.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _ended(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with {returncode}"


def _with_log(text: str, log: Path) -> str:
    lines = last_lines(log)
    if not lines:
        return f"{text} ({log} is empty)"
    return f"{text}. The end of {log}:\n" + "\n".join(f"    {line}" for line in lines)


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
    said: dict[str, tuple[str, float]] = field(default_factory=dict)  # what `up` waits for
    bootstrapped: bool = False
    bootstrap_at: float = 0.0  # when to try the first superadmin again after a failure
    nats_retry_at: float | None = None  # when to try again to start a server that died
    storage: StorageSetup | None = None
    appproxy: AppProxySetup | None = None
    metrics: MetricsSetup | None = None

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
            "JETYARD_GATEWAY_PORT": str(self.options.gateway_port),
            "JETYARD_GATEWAY_SECRETS_KEY": self.secrets_key,
            READY_FILE_ENV: str(ready_file(data, name)),
        }

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
        self.server = NatsServer(data_dir=data / "nats", port=port, token=nats_token(data))
        self.server.start()
        self.secrets_key = secrets_key(data)
        self.storage, warning = StorageSetup.of(data)
        if warning is not None:
            print(f"WARNING: {warning}", flush=True)
        self.appproxy, warning = AppProxySetup.of(data)
        if warning is not None:
            print(f"WARNING: {warning}", flush=True)
        self.metrics, warnings = MetricsSetup.of(data)
        for warning in warnings:
            print(f"WARNING: {warning}", flush=True)
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
                gateway_url=f"http://127.0.0.1:{self.options.gateway_port}",
                nats_url=self.server.url,
                views_url=self.env("projections")["JETYARD_PROJECTIONS_DATABASE_URL"],
            )
        )
        for name in self.options.services:
            self._spawn(name)

    def bootstrap(self, now: float) -> None:
        """The first superadmin, on the first start (the tenancy service decides the
        commands); printed once. A failure is said and tried again."""
        if self.bootstrapped or now < self.bootstrap_at:
            return
        assert self.server is not None
        settings = NatsSettings(url=self.server.url, token=self.server.token)

        async def run() -> AdminCredentials | None:
            bus = await connect(settings, name="jetyard-bootstrap")
            try:
                return await bootstrap(bus, self.options.data_dir, self.secrets_key.encode())
            finally:
                await bus.close()

        try:
            admin = asyncio.run(run())
        except Exception as exc:  # whatever it was, it is said and tried again
            self.bootstrap_at = now + BOOTSTRAP_RETRY_S
            print(f"creating the first superadmin failed ({exc!r}); trying again", flush=True)
            return
        self.bootstrapped = True
        if admin is not None:
            print("First start: a superadmin was created. Shown once; also in")
            print(f"  {self.options.data_dir / 'admin.json'} (readable only by you):")
            print(f"  email       {admin.email}")
            print(f"  password    {admin.password}")
            print(f"  access key  {admin.access_key}")
            print(f"  secret key  {admin.secret_key}", flush=True)

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
            return self._nats_problem()
        child = self.children[part]
        if child.poll() is not None:
            return f"{_ended(child.returncode)}; restarting"
        if ready_pid(ready_file(self.options.data_dir, part)) != child.pid:
            return f"not ready yet (see {self.log_of(part)})"
        if part == "gateway":
            return self._gateway_problem()
        if part == "storage":
            assert self.storage is not None
            return self._health_problem(f"{self.storage.url}/healthz")
        if part == "appproxy":
            assert self.appproxy is not None
            return self._health_problem(f"{self.appproxy.url}/healthz")
        return None

    def _health_problem(self, url: str) -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return None if response.status == 200 else f"{url} answers {response.status}"
        except urllib.error.HTTPError as exc:
            return f"{url} answers {exc.code}"
        except OSError as exc:
            return f"not answering on {url} yet ({exc})"

    def _nats_problem(self) -> str | None:
        server = self.server
        assert server is not None and server.process is not None
        if server.process.poll() is not None:
            return f"{_ended(server.process.returncode)}; restarting"
        try:
            with socket.create_connection(("127.0.0.1", server.port), 1.0):
                return None
        except OSError as exc:
            return f"not answering on {server.url} ({exc})"

    def _gateway_problem(self) -> str | None:
        url = f"http://127.0.0.1:{self.options.gateway_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return None if response.status == 200 else f"{url} answers {response.status}"
        except urllib.error.HTTPError as exc:  # 503: not caught up, or NATS unreachable
            try:
                body = json.loads(exc.read())
            except ValueError:
                return f"{url} answers {exc.code}"
            if body.get("status") == "catching-up":
                return (
                    f"{url} says the views are catching up "
                    f"(at {body.get('views_position')} of {body.get('log_end')})"
                )
            return f"{url} says {body.get('status')}: {body.get('error')}"
        except OSError as exc:
            return f"not answering on {url} yet ({exc})"

    def missing(self, parts: Iterable[str]) -> dict[str, str]:
        found = {part: self.problem(part) for part in parts}
        return {part: why for part, why in found.items() if why is not None}

    def say_missing(self, missing: dict[str, str], now: float) -> None:
        """Say what `up` waits for: a part once, again when its reason changes or every
        15 s. Not while it (re)starts (that takes seconds), nor after it died: its death was
        said, with its log."""
        for part, why in missing.items():
            if part in self.died_at or (part == NATS and self.nats_retry_at is not None):
                continue
            if now - self.started_at.get(part, 0.0) < QUIET_START_S:
                continue
            last_why, last_at = self.said.get(part, ("", -SAY_AGAIN_S))
            if now - last_at >= SAY_AGAIN_S or (why != last_why and now - last_at >= 5):
                print(f"waiting for {part}: {why}", flush=True)
                self.said[part] = (why, now)

    def say_not_up(self, missing: dict[str, str], waited: float) -> None:
        print(f"Jetyard is NOT up after {waited:.0f}s; missing:")
        for part, why in missing.items():
            print(_with_log(f"  {part}: {why}", self.log_of(part)))
        if not self.bootstrapped:
            print("  the first superadmin: not made yet (why is said above)")
        print("It keeps trying, and says when everything is up. Ctrl-C stops it.", flush=True)

    def say_back(self, missing: dict[str, str]) -> None:
        for part in sorted(self.down - set(missing)):
            print(f"{part} is back", flush=True)
            self.down.discard(part)

    def metrics_urls(self) -> dict[str, str]:
        """Each running service's ``/metrics`` URL."""
        assert self.metrics is not None and self.storage is not None
        assert self.appproxy is not None
        listeners = {
            "gateway": f"http://127.0.0.1:{self.options.gateway_port}",
            "storage": self.storage.url,
            "appproxy": self.appproxy.url,
        }
        urls = self.metrics.urls(listeners)
        return {s: url for s, url in urls.items() if s in self.options.services}

    def say_up(self) -> None:
        assert self.server is not None
        data, port = self.options.data_dir, self.options.gateway_port
        print(f"Jetyard is up (data in {data})")
        print(f"  console   http://127.0.0.1:{port}/console/")
        print(f"  GraphQL   http://127.0.0.1:{port}/graphql")
        print(f"  health    http://127.0.0.1:{port}/healthz")
        if self.storage is not None and "storage" in self.options.services:
            print(f"  storage   {self.storage.url} (folders under {self.storage.volume_root})")
        if self.appproxy is not None and "appproxy" in self.options.services:
            print(f"  apps      {self.appproxy.url}/apps/<session>/<app>/ (startApp)")
        print(f"  NATS      {self.server.url} (token in {data / 'nats.token'})")
        print(f"  metrics   http://127.0.0.1:{port}/metrics and every service's /metrics, listed")
        print(f"            in {data / 'prometheus-targets.json'} (docs/metrics.md)")
        print(f"  logs      {data / 'logs'}")
        print("Ctrl-C stops everything.", flush=True)

    # ---- supervision -----------------------------------------------------------------------

    def supervise(self) -> None:
        """Restart what died: the ``nats-server`` at once (same store, config, port and
        token: the services reconnect by themselves), a service after a pause that doubles
        while it keeps dying at once (up to a minute). The stack keeps running and says what
        is down and why; it never gives up on a part."""
        self._supervise_nats()
        now = time.monotonic()
        for name, child in list(self.children.items()):
            if child.poll() is None:
                continue
            if name not in self.died_at:
                quick = now - self.started_at[name] < QUICK_DEATH_S
                self.quick_deaths[name] = self.quick_deaths.get(name, 0) + 1 if quick else 0
                self.died_at[name] = now
                self.down.add(name)
                said = f"{name} {_ended(child.returncode)}; restarting in {self._delay(name):.0f}s"
                print(_with_log(said, self.log_of(name)), flush=True)
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
            said = f"{NATS} {_ended(server.process.returncode)}; restarting"
            print(_with_log(said, self.log_of(NATS)), flush=True)
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


def up(options: UpOptions) -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    stack = Stack(options)
    try:
        stack.start()
        started = time.monotonic()
        stack.bootstrapped = "tenancy" not in options.services
        announced = timed_out = False
        while signal.sigtimedwait({signal.SIGINT, signal.SIGTERM}, TICK_S) is None:
            now = time.monotonic()
            stack.supervise()
            watched = [part for part in stack.parts() if not announced or part in stack.down]
            missing = stack.missing(watched)
            stack.say_back(missing)
            stack.say_missing(missing, now)
            if announced:
                continue
            if "tenancy" not in missing and NATS not in missing:
                stack.bootstrap(now)
            if not missing and stack.bootstrapped:
                stack.say_up()
                announced = True
            elif not timed_out and now - started >= options.start_timeout_s:
                stack.say_not_up(missing, now - started)
                timed_out = True
        print("stopping...", flush=True)
        return 0
    finally:
        stack.stop()
