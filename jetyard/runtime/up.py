"""``jetyard up``: the whole system on one machine, embedded defaults, one command.

Starts a ``nats-server`` child (127.0.0.1, or the ``--listen`` address; pidfile, parent-death
signal; a token and a port
made on the first start and kept in ``<data-dir>/nats.token`` and ``nats.port``) on
``<data-dir>/nats``, declares the streams, then runs every service as a child process
(``jetyard serve <service>``) so Python uses every core. It says it is up only when every part
is healthy: the server answering, each service ready (connected and caught up: it writes
``<data-dir>/run/<service>.ready``), the gateway's, the storage data plane's and the app
proxy's ``/healthz`` 200 (``health``); until then it says what it waits for and why. The
storage service's key, volume and port are kept in the data directory too
(``storage_setup``), the app proxy's key and port (``appproxy_setup``), and the services'
metrics ports (``metrics_setup``: every ``/metrics`` is listed in
``<data-dir>/prometheus-targets.json``). It supervises them all (``supervisor``): a server that
dies is started again at once on the same store, port and token (the services reconnect), a
service after a pause that doubles while it keeps dying at once; it says what went down and
why, and when it is back, and never gives up on a part. Ctrl-C stops the services, then the
server, and says which sessions' containers keep running (``sessions_left``; with
``--stop-sessions`` it ends those sessions first). A lock on the data directory keeps a
second ``up`` off it; a server orphaned by a ``kill -9`` of an earlier ``up`` is found through
its pidfile and stopped first. This module is
the loop that watches the parts and says what it sees.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time

from events.bus import connect
from jetyard.runtime.bootstrap import AdminCredentials, bootstrap
from jetyard.runtime.health import with_log
from jetyard.runtime.sessions_left import end_sessions, left_running, said_left, sessions_of
from jetyard.runtime.storage_setup import VolumesError
from jetyard.runtime.supervisor import NATS, Stack, UpOptions
from schemas.settings import NatsSettings

TICK_S = 0.5
QUIET_START_S = 10.0  # a (re)start takes seconds: what `up` waits for is said after this...
SAY_AGAIN_S = 15.0  # ...and again this often while it stays missing
BOOTSTRAP_RETRY_S = 10.0
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def bootstrap_admin(stack: Stack, now: float) -> None:
    """The first superadmin, on the first start (the tenancy service decides the
    commands); printed once. A failure is said and tried again."""
    if stack.bootstrapped or now < stack.bootstrap_at:
        return
    assert stack.server is not None
    settings = NatsSettings(url=stack.server.url, token=stack.server.token)

    async def run() -> AdminCredentials | None:
        bus = await connect(settings, name="jetyard-bootstrap")
        try:
            return await bootstrap(bus, stack.options.data_dir, stack.secrets_key.encode())
        finally:
            await bus.close()

    try:
        admin = asyncio.run(run())
    except Exception as exc:  # whatever it was, it is said and tried again
        stack.bootstrap_at = now + BOOTSTRAP_RETRY_S
        print(f"creating the first superadmin failed ({exc!r}); trying again", flush=True)
        return
    stack.bootstrapped = True
    if admin is not None:
        print("First start: a superadmin was created. Shown once; also in")
        print(f"  {stack.options.data_dir / 'admin.json'} (readable only by you):")
        print(f"  email       {admin.email}")
        print(f"  password    {admin.password}")
        print(f"  access key  {admin.access_key}")
        print(f"  secret key  {admin.secret_key}", flush=True)


def say_missing(stack: Stack, missing: dict[str, str], now: float) -> None:
    """Say what `up` waits for: a part once, again when its reason changes or every
    15 s. Not while it (re)starts (that takes seconds), nor after it died: its death was
    said, with its log."""
    for part, why in missing.items():
        if part in stack.died_at or (part == NATS and stack.nats_retry_at is not None):
            continue
        if now - stack.started_at.get(part, 0.0) < QUIET_START_S:
            continue
        last_why, last_at = stack.said.get(part, ("", -SAY_AGAIN_S))
        if now - last_at >= SAY_AGAIN_S or (why != last_why and now - last_at >= 5):
            print(f"waiting for {part}: {why}", flush=True)
            stack.said[part] = (why, now)


def say_not_up(stack: Stack, missing: dict[str, str], waited: float) -> None:
    print(f"Jetyard is NOT up after {waited:.0f}s; missing:")
    for part, why in missing.items():
        print(with_log(f"  {part}: {why}", stack.log_of(part)))
    if not stack.bootstrapped:
        print("  the first superadmin: not made yet (why is said above)")
    print("It keeps trying, and says when everything is up. Ctrl-C stops it.", flush=True)


def say_back(stack: Stack, missing: dict[str, str]) -> None:
    for part in sorted(stack.down - set(missing)):
        print(f"{part} is back", flush=True)
        stack.down.discard(part)


def say_up(stack: Stack) -> None:
    assert stack.server is not None
    data, gateway = stack.options.data_dir, stack.gateway_url
    print(f"Jetyard is up (data in {data})")
    print(f"  console   {gateway}/console/")
    print(f"  GraphQL   {gateway}/graphql")
    print(f"  health    {gateway}/healthz")
    if stack.storage is not None and "storage" in stack.options.services:
        storage = stack.storage
        where = ", ".join(
            f"{name} ({config.backend})" for name, config in sorted(storage.volumes.items())
        )
        default = storage.default_volume
        print(f"  storage   {storage.url} (volumes: {where}; new folders on {default})")
    if stack.appproxy is not None and "appproxy" in stack.options.services:
        print(f"  apps      {stack.appproxy.url}/apps/<session>/<app>/ (startApp)")
    print(f"  NATS      {stack.server.url} (token in {data / 'nats.token'})")
    print(f"  metrics   {gateway}/metrics and every service's /metrics, listed")
    print(f"            in {data / 'prometheus-targets.json'} (docs/metrics.md)")
    print(f"  logs      {data / 'logs'}")
    for note in stack.port_notes:
        print(f"  note      {note}")
    say_join(stack)
    if stack.options.stop_sessions:
        print("Ctrl-C stops Jetyard and ends every running session (--stop-sessions).", flush=True)
    else:
        print("Ctrl-C stops Jetyard; sessions' containers keep running (--stop-sessions: end them)",
              flush=True)  # fmt: skip


def say_join(stack: Stack) -> None:
    """How another machine becomes a node: only when this one listens beyond loopback."""
    if stack.options.listen in LOOPBACK:
        print("  nodes     this machine only (`jetyard up --listen <address>` lets others join)")
        return
    print("  nodes     another machine joins with a token (shown once) from")
    print(f"              jetyard admin node token create --endpoint {stack.gateway_url}")
    print(f"            then, there: jetyard join {stack.gateway_url} --token <token>")


def up(options: UpOptions) -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    stack = Stack(options)
    try:
        try:
            stack.start()
        except VolumesError as exc:
            print(f"jetyard up: {exc}", file=sys.stderr, flush=True)
            return 2
        started = time.monotonic()
        stack.bootstrapped = "tenancy" not in options.services
        announced = timed_out = False
        while signal.sigtimedwait({signal.SIGINT, signal.SIGTERM}, TICK_S) is None:
            now = time.monotonic()
            stack.supervise()
            watched = [part for part in stack.parts() if not announced or part in stack.down]
            missing = stack.missing(watched)
            say_back(stack, missing)
            say_missing(stack, missing, now)
            if announced:
                continue
            if "tenancy" not in missing and NATS not in missing:
                bootstrap_admin(stack, now)
            if not missing and stack.bootstrapped:
                say_up(stack)
                announced = True
            elif not timed_out and now - started >= options.start_timeout_s:
                say_not_up(stack, missing, now - started)
                timed_out = True
        print("stopping...", flush=True)
        if options.stop_sessions:
            stop_sessions(stack)
        return 0
    finally:
        stack.stop()
        say_left(stack)


def stop_sessions(stack: Stack) -> None:
    """``--stop-sessions``: every session with a running container ended through the log
    before the services stop (their agent stops the containers)."""
    left = left_running(stack.cluster_id)
    sessions = sessions_of(left or [])
    if not sessions or stack.server is None:
        return
    print(f"ending {len(sessions)} session(s) (--stop-sessions)...", flush=True)
    settings = NatsSettings(url=stack.server.url, token=stack.server.token)
    try:
        end_sessions(settings, stack.cluster_id, sessions)
    except Exception as exc:  # whatever it was, the rest of the stop goes on; it is said
        print(f"ending the sessions failed ({exc!r})", flush=True)


def say_left(stack: Stack) -> None:
    """What keeps running now that Jetyard stopped (the sessions' containers), and how to
    end it."""
    try:
        left = left_running(stack.cluster_id)
    except Exception as exc:  # a question about Docker must not hide the stop
        print(f"could not ask Docker what is left running ({exc!r})", flush=True)
        return
    for line in said_left(left, str(stack.options.data_dir)):
        print(line, flush=True)
