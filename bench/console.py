"""The web console at scale (issue 15): first paint and "data painted" of the pages that grow
with the cluster, and how long a status change takes from its event to an open page's DOM, on a
cluster of 1,000 simulated nodes and 10,000 sessions, next to baselines from the same run.

Layout: ``jetyard up --agent-backend simulated`` on a temporary data directory (nats-server,
projections on SQLite, tenancy, storage, app proxy, scheduler, this machine's agent and the
gateway, each its own process), plus ``bench.sched_agents`` with N simulated agents of
``--gpus`` GPUs in one more process. The bench sends ``CreateSession`` commands owned by the
superadmin (the mix of ``bench.sched_cluster``, named ``bench-00001``...), waits until every
placed session runs and the views have caught up, then drives Debian's headless Chromium
through Playwright, signed in with the superadmin's password as ``tests/browser`` does.

Pages (``--loads`` full loads each, in one tab, after leaving to a static file and letting the
gateway settle): "My sessions" ``#/sessions``, Operate > Cluster, Operate > Queue. For each
load: first-contentful-paint, the moment the page's data is in the DOM (a MutationObserver
installed before the page's scripts run) and the frame after it ("data painted"), the GraphQL
requests' timings, long tasks, the renderer's script/layout/style time (CDP
``Performance.getMetrics``), the gateway's CPU, and the moment every subscription a page
opened had its first answer ("live"; the sessions list's one feed answers only on a change).
Baselines: a tiny ``data:`` page and the console's sign-in page in the same browser, and the
very queries the pages send (read from their modules) timed with httpx.

Status changes (``--changes`` each): ``terminateSession`` on a RUNNING session while (a) its
own page, (b) the sessions list (its RUNNING rows, all following one ``sessionsChanged``
feed), (c) the Cluster page is open (sessions holding GPUs on cards on or near the screen);
a MutationObserver in the page notes ``Date.now()`` when the new status shows (for the Cluster
page: when the session's hold leaves its node's GPU map) and once the frame after it has been
produced ("painted"). Compared with the event's ``occurred_at`` and with the moment a plain
core-NATS subscriber in this process received the event (the baseline). The Cluster page is
also left alone for 20 s first: the queries it sends by itself and what they cost.

Run:  python -m bench.console                                  (1,000 agents, 10,000 sessions)
      python -m bench.console --agents 100 --sessions 1000     (a quick form)
Needs Chromium (``apt-get install chromium``, or ``scripts/ensure-chromium`` as root, or
``JETYARD_CHROMIUM=/path``). Prints progress on stderr and every figure as JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from nats.aio.msg import Msg
from playwright.async_api import BrowserContext, CDPSession, Page, async_playwright

from bench.sched_agents import IMAGE
from bench.sched_cluster import resources, session_mix
from bench.sched_watch import wait_nodes
from commands.bus import CommandBus
from commands.messages import CreateSession
from events.bus import Bus, connect
from events.store import EventStore
from events.tail import Tail
from jetyard.natsserver import free_port
from schemas.ids import session_id_for
from schemas.principal import Actor, ActorKind, Tenant
from schemas.session import KernelSpec, SessionSpec
from schemas.settings import NatsSettings
from schemas.subjects import events_of
from schemas.tenancy import SessionOwner, project_id_for
from tests.browser.support import chromium_binary

Popen = subprocess.Popen[bytes]
ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "services" / "gateway" / "console" / "static" / "js"
PAGES = {"sessions": "#/sessions", "cluster": "#/operate/cluster", "queue": "#/operate/queue"}
TERMINATE = "mutation T($id: ID!) { terminateSession(id: $id) { status message } }"
FOLLOWED = frozenset({"SessionScheduled", "SessionPendingReasonChanged", "SessionStarted"})


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ---- what the pages ask, read from their modules --------------------------------------------


def js_template(module: str, name: str) -> str:
    """A query as the console's module builds it: the template literal named ``name`` with its
    ``${CONST}`` parts filled from the same file's constants."""
    source = (JS / module).read_text()
    found = re.search(rf"const {name} = `(.*?)`;", source, re.S)
    if found is None:
        raise RuntimeError(f"{module} has no template {name}: the bench must follow the page")

    def constant(match: re.Match[str]) -> str:
        value = re.search(rf"const {match[1]} = (\d+|\"[^\"]*\");", source)
        if value is None:
            raise RuntimeError(f"{module}: no constant {match[1]}")
        return value[1].strip('"')

    return re.sub(r"\$\{(\w+)\}", constant, found[1])


# ---- the stack ------------------------------------------------------------------------------


def _die_with_parent() -> None:
    # A bench killed with SIGKILL must not leave a stack behind: SIGTERM when we die.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Stack:
    """``jetyard up`` and the simulated agents on a temporary directory, removed at the end."""

    agents: int
    gpus: int
    rate_limit: int
    keep: bool = False
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="jy-console-")))
    port: int = field(default_factory=free_port)
    up: Popen | None = None
    sim: Popen | None = None

    @property
    def data(self) -> Path:
        return self.tmp / "data"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 240.0) -> None:
        self.up = self._spawn(
            "up",
            ["jetyard.cli", "up", "--data-dir", str(self.data), "--gateway-port", str(self.port),
             "--agent-backend", "simulated"],
            {"JETYARD_GATEWAY_RATE_LIMIT": str(self.rate_limit)},
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if self.up.poll() is not None or time.monotonic() > deadline:
                tail = (self.tmp / "up.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"jetyard up did not come up; it said:\n{tail}")
            time.sleep(0.5)
        self.sim = self._spawn(
            "agents",
            ["bench.sched_agents", str(self.agents), "--gpus", str(self.gpus)],
            self.nats_env(),
        )

    def _spawn(self, name: str, module: list[str], env: dict[str, str]) -> Popen:
        """``python -m module...`` with its output in ``<tmp>/<name>.log``."""
        out = os.open(self.tmp / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            return subprocess.Popen(
                [sys.executable, "-m", *module], cwd=ROOT, env={**os.environ, **env},
                stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
            )  # fmt: skip
        finally:
            os.close(out)

    def _healthy(self) -> bool:
        try:
            ok = httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
        return ok and (self.data / "admin.json").exists()

    def nats_env(self) -> dict[str, str]:
        lines = (self.data / "nats.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def nats(self) -> NatsSettings:
        env = self.nats_env()
        return NatsSettings(
            url=env["JETYARD_NATS_URL"], token=env["JETYARD_NATS_TOKEN"], request_timeout_s=10.0
        )

    def admin(self) -> dict[str, str]:
        found: dict[str, str] = json.loads((self.data / "admin.json").read_text())
        return found

    def pids(self) -> dict[str, int]:
        """The processes whose CPU the bench reads."""
        found: dict[str, int] = {}
        with contextlib.suppress(OSError, ValueError):
            found["nats-server"] = int((self.data / "nats" / "nats-server.pid").read_text())
        for name in ("gateway", "projections", "scheduler"):
            with contextlib.suppress(OSError, ValueError):
                found[name] = int((self.data / "run" / f"{name}.pid").read_text())
        if self.sim is not None:
            found["agents"] = self.sim.pid
        return found

    def stop(self) -> None:
        for child in (self.sim, self.up):
            if child is not None and child.poll() is None:
                child.send_signal(signal.SIGINT if child is self.up else signal.SIGTERM)
        for child in (self.sim, self.up):
            if child is None:
                continue
            try:
                child.wait(60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for name, text in self.logs().items():
            if "Traceback" in text:
                first = text[text.index("Traceback") :].splitlines()
                end = next((i for i, x in enumerate(first[1:], 1) if not x.startswith(" ")), 0)
                log(f"{name}: {text.count('Traceback')} tracebacks in its log; the first ends")
                log("\n".join(first[max(1, end - 6) : end + 1]))
        if self.keep:
            log(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def logs(self) -> dict[str, str]:
        paths = [self.tmp / "agents.log", *sorted((self.data / "logs").glob("*.log"))]
        return {p.stem: p.read_text(errors="replace") for p in paths if p.exists()}


class Cpu:
    """CPU seconds of the stack's processes between two readings."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.began = time.monotonic()

    def used(self) -> dict[str, float]:
        return {n: round(cpu_seconds(p) - self.start[n], 3) for n, p in self.pids.items()}

    def share(self) -> dict[str, float]:
        """% of a core per process since the first reading."""
        spent = max(time.monotonic() - self.began, 1e-6)
        return {n: round(s / spent * 100, 1) for n, s in self.used().items()}


async def settle(pids: dict[str, int], *, limit_pct: float = 25.0, max_s: float = 30.0) -> float:
    """Wait until the gateway and the server are near idle (the last page's subscriptions gone)."""
    watched = {k: v for k, v in pids.items() if k in ("gateway", "nats-server")}
    began = time.monotonic()
    while time.monotonic() - began < max_s:
        cpu = Cpu(watched)
        await asyncio.sleep(0.5)
        if sum(cpu.share().values()) < limit_pct:
            break
    return time.monotonic() - began


# ---- the workload ---------------------------------------------------------------------------


@dataclass
class Sessions:
    """Every session sent, and its status as the log says (PENDING, SCHEDULED or RUNNING)."""

    status: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    last_change: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def count(self, status: str) -> int:
        return sum(1 for s in self.status.values() if s == status)

    def undecided(self) -> int:
        return self.count("SENT")


async def follow_sessions(bus: Bus, from_seq: int, seen: Sessions, stop: asyncio.Event) -> None:
    tail = Tail(bus, from_seq=from_seq, subjects=[events_of("session")], names=FOLLOWED)
    rank = {"SENT": 0, "PENDING": 1, "SCHEDULED": 2, "RUNNING": 3}
    new = {"SessionPendingReasonChanged": "PENDING", "SessionScheduled": "SCHEDULED",
           "SessionStarted": "RUNNING"}  # fmt: skip
    while not stop.is_set():
        for message in await tail.fetch_raw(0.5):
            session_id = message.subject.rsplit(".", 1)[1]
            status = new[message.headers.get("Jy-Event", "")]
            if rank[status] > rank[seen.status.get(session_id, "SENT")]:
                seen.status[session_id] = status
            seen.last_change = time.monotonic()
            seen.changed.set()
    await tail.close()


async def populate(
    stack: Stack, bus: Bus, args: argparse.Namespace
) -> tuple[dict[str, Any], Sessions]:
    """Send the sessions as the superadmin's, and wait until every placed one runs."""
    admin = stack.admin()
    project = project_id_for("default", "default")
    owner = SessionOwner(
        access_key=admin["access_key"], user_id=admin["user_id"], project_id=project,
        domain="default",
    )  # fmt: skip
    actor = Actor(kind=ActorKind.KEYPAIR, id=admin["access_key"])
    tenant = Tenant(domain="default", project=project)
    store, commands = EventStore(bus), CommandBus(bus)
    seen, stop = Sessions(last_change=time.monotonic()), asyncio.Event()
    start = await store.stream_last_seq() + 1
    watcher = asyncio.create_task(follow_sessions(bus, start, seen, stop))
    began = time.monotonic()
    sends: set[asyncio.Task[object]] = set()
    for index, size in enumerate(session_mix(args.sessions, args.seed)):
        spec = SessionSpec(
            image=IMAGE, name=f"bench-{index + 1:05d}",
            kernels=(KernelSpec(resources=resources(size)),),
        )  # fmt: skip
        cmd = CreateSession(actor=actor, tenant=tenant, spec=spec, owner=owner)
        session_id = session_id_for(cmd.command_id)
        seen.status[session_id] = "SENT"
        seen.order.append(session_id)
        sends.add(asyncio.create_task(commands.send(cmd)))
        if len(sends) >= 256:
            _, sends = await asyncio.wait(sends, return_when=asyncio.FIRST_COMPLETED)
        while seen.undecided() > 1000 and time.monotonic() - seen.last_change < 10:
            seen.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(seen.changed.wait(), 1.0)
        if (index + 1) % 2000 == 0:
            log(f"sent {index + 1} sessions; {seen.count('RUNNING')} running")
    await asyncio.gather(*sends)
    sent_s = time.monotonic() - began
    # Settled: nothing undecided or starting, and nothing changed for a while.
    deadline = time.monotonic() + args.max_wait_s
    while time.monotonic() < deadline:
        busy = seen.undecided() + seen.count("SCHEDULED")
        if busy == 0 and time.monotonic() - seen.last_change > args.quiet_s:
            break
        if busy and time.monotonic() - seen.last_change > 30:
            break  # nothing moves any more: say what is left
        await asyncio.sleep(0.2)
    stop.set()
    await watcher
    return {
        "sessions sent": len(seen.order),
        "sent in (s)": round(sent_s, 1),
        "settled after (s)": round(time.monotonic() - began, 1),
        "running": seen.count("RUNNING"),
        "waiting (PENDING)": seen.count("PENDING"),
        "placed, not running yet": seen.count("SCHEDULED"),
        "undecided": seen.undecided(),
    }, seen


# ---- GraphQL as the superadmin --------------------------------------------------------------


@dataclass
class Gql:
    client: httpx.AsyncClient
    token: str = ""

    async def login(self, email: str, password: str) -> None:
        answer = await self.call(
            "mutation L($e: String!, $p: String!) { login(email: $e, password: $p) { token } }",
            e=email, p=password,
        )  # fmt: skip
        self.token = answer["login"]["token"]

    async def timed(self, query: str, **variables: Any) -> tuple[dict[str, Any], float, int]:
        """The data, the seconds from send to the whole answer, and its size in bytes."""
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        began = time.perf_counter()
        response = await self.client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=headers
        )
        spent = time.perf_counter() - began
        body = response.json()
        if response.status_code != 200 or body.get("errors"):
            raise RuntimeError(f"GraphQL answered {response.status_code}: {response.text[:500]}")
        data: dict[str, Any] = body["data"]
        return data, spent, len(response.content)

    async def call(self, query: str, **variables: Any) -> dict[str, Any]:
        return (await self.timed(query, **variables))[0]


async def views_caught_up(gql: Gql, bus: Bus, timeout: float = 600.0) -> float:
    """Until the views (``cluster.seq``) hold every event stored when asked."""
    target = await EventStore(bus).stream_last_seq()
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        seq = int((await gql.call("{ cluster { seq } }"))["cluster"]["seq"])
        if seq >= target:
            return time.monotonic() - began
        await asyncio.sleep(1.0)
    raise TimeoutError(f"the views stayed behind log position {target} for {timeout:.0f}s")


async def raw_queries(gql: Gql, loads: int) -> dict[str, Any]:
    """The pages' own queries, as the pages send them, timed from here (no browser)."""
    sessions_query = js_template("pages/sessions.js", "QUERY")
    cluster_query = js_template("op/cluster.js", "CLUSTER")
    out: dict[str, list[float]] = {
        "sessions: the first page (s)": [],
        "cluster (s)": [],
        "cluster { seq } alone: the resolver's work, no list sent (s)": [],
    }
    sizes: dict[str, Any] = {}
    for _ in range(loads):
        data, seconds, length = await gql.timed(sessions_query, after=None)
        out["sessions: the first page (s)"].append(seconds)
        sizes["sessions: rows, bytes"] = [len(data["sessions"]["edges"]), length]
        data, seconds, length = await gql.timed(cluster_query)
        out["cluster (s)"].append(seconds)
        _, alone, _ = await gql.timed("query Seq { cluster { seq } }")
        out["cluster { seq } alone: the resolver's work, no list sent (s)"].append(alone)
        cluster = data["cluster"]
        sizes["cluster: bytes"] = length
        sizes["cluster: rows"] = {k: len(v) for k, v in cluster.items() if isinstance(v, list)}
    return {k: summary(v) for k, v in out.items()} | sizes


def summary(values: list[float]) -> dict[str, float]:
    """n, median, p95 (nearest rank: of 20 samples the 19th), min and max."""
    ordered = sorted(values)
    if not ordered:
        return {}
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[math.ceil(len(ordered) * 0.95) - 1], 3),
        "min": round(ordered[0], 3),
        "max": round(ordered[-1], 3),
    }


# ---- the browser ----------------------------------------------------------------------------

# Installed before any page script: when the page's data is in the DOM (and the frame after),
# long tasks, and the live socket's subscriptions and their first answers.
PROBE = r"""
(() => {
  const bench = { ready: null, painted: null, longTasks: 0, longTaskMs: 0,
    ws: { subscribed: 0, answered: 0, errors: 0, nexts: 0, lastSubscribe: null,
          lastFirstAnswer: null, live: [], refused: [], reasons: {} } };
  window.__bench = bench;
  const text = (id) => document.getElementById(id)?.textContent ?? "";
  const READY = [
    [/^#\/sessions$/, () => /in all/.test(text("session-summary"))],
    [/^#\/sessions\/[^/?]+$/, () => document.querySelector("#session-status [data-status]")],
    [/^#\/operate\/cluster/, () => /log position/.test(text("op-updated"))],
    [/^#\/operate\/queue/, () => text("op-updated") !== ""],
    [/^#\/sign-in/, () => document.querySelector("#sign-in-password") !== null],
  ];
  const found = READY.find(([pattern]) => pattern.test(location.hash));
  if (found) {
    const observer = new MutationObserver(() => {
      if (bench.ready !== null || !found[1]()) return;
      bench.ready = performance.now();
      observer.disconnect();
      requestAnimationFrame(() => setTimeout(() => { bench.painted = performance.now(); }, 0));
    });
    observer.observe(document, { childList: true, subtree: true, characterData: true });
  }
  try {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        bench.longTasks += 1;
        bench.longTaskMs += entry.duration;
      }
    }).observe({ type: "longtask", buffered: true });
  } catch {}
  const Native = window.WebSocket;
  const answered = new Set();
  const about = new Map(); // subscription id -> the session it follows (its variables' id)
  const answer = (id, ok) => {
    if (answered.has(id)) return;
    answered.add(id);
    (ok ? bench.ws.live : bench.ws.refused).push(about.get(id) ?? null);
    bench.ws.answered = answered.size;
    bench.ws.lastFirstAnswer = performance.now();
  };
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        let m;
        try { m = JSON.parse(event.data); } catch { return; }
        if (m.type !== "next" && m.type !== "error") return;
        // A refusal comes as "error", or as a "next" with errors and no data (then "complete").
        const errors = m.type === "error" ? m.payload : m.payload?.data ? null : m.payload?.errors;
        if (m.type === "next") bench.ws.nexts += 1;
        if (!errors) { answer(m.id, true); return; }
        if (answered.has(m.id)) bench.ws.live = bench.ws.live.filter((s) => s !== about.get(m.id));
        bench.ws.errors += 1;
        answer(m.id, false);
        const reason = String(errors?.[0]?.message ?? "?").slice(0, 80);
        bench.ws.reasons[reason] = (bench.ws.reasons[reason] ?? 0) + 1;
      });
    }
    send(data) {
      try {
        const m = JSON.parse(data);
        if (m.type === "subscribe") {
          about.set(m.id, m.payload.variables?.id);
          bench.ws.subscribed += 1;
          bench.ws.lastSubscribe = performance.now();
        }
      } catch {}
      super.send(data);
    }
  };
})();
"""

# Read once the data is painted: paint and navigation timing, the GraphQL requests, the DOM.
READ_PAGE = r"""
() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const fcp = performance.getEntriesByName("first-contentful-paint")[0];
  const all = performance.getEntriesByType("resource");
  const gql = all.filter((e) => e.name.endsWith("/graphql"));
  const files = all.filter((e) => !e.name.endsWith("/graphql"));
  const sum = (items, f) => items.reduce((total, e) => total + f(e), 0);
  return {
    fcp: fcp ? fcp.startTime : null,
    domContentLoaded: nav ? nav.domContentLoadedEventEnd : null,
    files: files.length,
    filesDone: Math.max(0, ...files.map((e) => e.responseEnd)),
    graphql: gql.length,
    graphqlFirstStart: gql.length ? Math.min(...gql.map((e) => e.startTime)) : null,
    graphqlLastEnd: gql.length ? Math.max(...gql.map((e) => e.responseEnd)) : null,
    graphqlWaitMs: sum(gql, (e) => e.responseStart - e.requestStart),
    graphqlDownloadMs: sum(gql, (e) => e.responseEnd - e.responseStart),
    graphqlBytes: sum(gql, (e) => e.encodedBodySize),
    domElements: document.getElementsByTagName("*").length,
    summaryText: document.querySelector("#page .summary")?.textContent ?? null,
    firstRow: document.querySelector("#page tr[data-session] a")?.textContent ?? null,
    bench: window.__bench,
  };
}
"""

RENDERER = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


async def renderer_metrics(cdp: CDPSession) -> dict[str, float]:
    found = await cdp.send("Performance.getMetrics")
    return {m["name"]: float(m["value"]) for m in found["metrics"] if m["name"] in RENDERER}


@dataclass
class Browser:
    context: BrowserContext
    page: Page
    cdp: CDPSession
    base: str
    loads: int = 0

    async def blank(self) -> None:
        # A static file of the same origin: the console's socket closes, the tab (and its
        # sessionStorage, where the sign-in lives) stays.
        await self.page.goto(f"{self.base}/console/img/jetyard.svg")

    async def load(self, route: str, pids: dict[str, int], *, live: bool) -> dict[str, Any]:
        """One full load of the console at ``route``, measured."""
        await self.blank()
        settled = await settle(pids)
        before = await renderer_metrics(self.cdp)
        cpu = Cpu(pids)
        self.loads += 1
        await self.page.goto(f"{self.base}/console/?load={self.loads}{route}", wait_until="commit")
        await self.page.wait_for_function(
            "() => window.__bench && window.__bench.painted !== null", timeout=180_000
        )
        painted_cpu = cpu.used()
        read: dict[str, Any] = await self.page.evaluate(READ_PAGE)
        out: dict[str, Any] = {
            "settle before (s)": round(settled, 1),
            "first contentful paint (ms)": read["fcp"],
            "data in DOM (ms)": read["bench"]["ready"],
            "data painted (ms)": read["bench"]["painted"],
            "DOMContentLoaded (ms)": read["domContentLoaded"],
            "console files loaded by (ms)": read["filesDone"],
            "GraphQL requests": read["graphql"],
            "GraphQL first sent (ms)": read["graphqlFirstStart"],
            "GraphQL last answered (ms)": read["graphqlLastEnd"],
            "GraphQL waiting for the first byte, summed (ms)": read["graphqlWaitMs"],
            "GraphQL downloading, summed (ms)": read["graphqlDownloadMs"],
            "GraphQL bytes": read["graphqlBytes"],
            "DOM elements": read["domElements"],
            "the page says": read["summaryText"],
            "its first row": read["firstRow"],
        } | {f"CPU s to data painted: {k}": v for k, v in painted_cpu.items()}
        if live:
            out |= await self._live(cpu)
        bench = await self.page.evaluate("() => window.__bench")
        after = await renderer_metrics(self.cdp)
        out["long tasks"] = bench["longTasks"]
        out["long tasks (ms)"] = round(bench["longTaskMs"])
        out = {k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}
        for k in RENDERER:
            if k in after:  # a negative difference: the renderer was swapped, not comparable
                out[f"renderer {k} (ms)"] = round((after[k] - before.get(k, 0.0)) * 1000)
        return out

    async def _live(self, cpu: Cpu) -> dict[str, Any]:
        """Until every subscription the page opened had its first answer."""
        try:
            await self.page.wait_for_function(
                """() => { const w = window.__bench.ws;
                           return w.subscribed > 0 && w.answered >= w.subscribed; }""",
                timeout=180_000, polling=100,
            )  # fmt: skip
        except Exception as exc:  # Playwright's timeout: report how far it got
            log(f"the page never had every subscription answered: {exc!r:.200}")
        ws = await self.page.evaluate("() => window.__bench.ws")
        return {
            "subscriptions opened": ws["subscribed"],
            "subscriptions answered": ws["answered"],
            "subscriptions refused": ws["errors"],
            "subscriptions refused, by reason": ws["reasons"],
            "status messages received": ws["nexts"],
            "last subscription sent (ms)": ws["lastSubscribe"],
            "every subscription answered (ms)": ws["lastFirstAnswer"],
        } | {f"CPU s to every subscription answered: {k}": v for k, v in cpu.used().items()}


async def sign_in(page: Page, base: str, email: str, password: str) -> None:
    await page.goto(f"{base}/console/#/sign-in")
    await page.fill("#sign-in-password input[name=email]", email)
    await page.fill("#sign-in-password input[name=password]", password)
    await page.click("#sign-in-password button[type=submit]")
    await page.wait_for_selector("#sessions", timeout=180_000)


async def baselines(context: BrowserContext, base: str, loads: int) -> dict[str, Any]:
    """The same browser on a tiny static page, and on the console's sign-in page (the shell,
    its modules and a form; no data)."""
    tiny, sign_in_page = [], []
    page = await context.new_page()
    for _ in range(loads):
        await page.goto("data:text/html,<!doctype html><title>t</title><h1>hello</h1>")
        await page.wait_for_function(
            "() => performance.getEntriesByName('first-contentful-paint').length > 0"
        )
        tiny.append(await page.evaluate(
            "() => performance.getEntriesByName('first-contentful-paint')[0].startTime"
        ))  # fmt: skip
        await page.goto(f"{base}/console/?load={len(tiny)}#/sign-in", wait_until="commit")
        await page.wait_for_function("() => window.__bench && window.__bench.painted !== null")
        read = await page.evaluate(READ_PAGE)
        sign_in_page.append((read["fcp"], read["bench"]["painted"]))
        await page.goto("about:blank")
    await page.close()
    return {
        "tiny data: page, first contentful paint (ms)": summary(tiny),
        "sign-in page, first contentful paint (ms)": summary([f for f, _ in sign_in_page]),
        "sign-in page, form painted (ms)": summary([p for _, p in sign_in_page]),
    }


def page_summary(loads: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and spread of each timing over the loads after the first (cold caches)."""
    keys = [k for k, v in loads[0].items() if isinstance(v, int | float)]
    warm = loads[1:] or loads
    out: dict[str, Any] = {
        k: summary([float(load[k]) for load in warm if load.get(k) is not None]) for k in keys
    }
    out["first (cold) load"] = {k: loads[0][k] for k in keys}
    out |= {k: v for k, v in loads[-1].items() if isinstance(v, str)}
    out["every load"] = loads
    return out


# ---- status changes -------------------------------------------------------------------------


@dataclass
class Seen:
    """What the plain NATS subscriber saw of one aggregate's events: name -> (occurred_at in
    epoch ms, received in epoch ms)."""

    events: dict[str, tuple[float, float]] = field(default_factory=dict)

    async def handler(self, msg: Msg) -> None:
        received = time.time() * 1000
        name = (msg.headers or {}).get("Jy-Event", "")
        body = json.loads(msg.data)
        occurred = datetime.fromisoformat(body["occurred_at"]).timestamp() * 1000
        self.events.setdefault(name, (occurred, received))


STATUS_EVENT = {"TERMINATING": "SessionTerminating", "TERMINATED": "SessionTerminated"}


@dataclass
class Latencies:
    """Per status: DOM time - occurred_at, DOM time - NATS receipt; and the baseline."""

    dom: dict[str, list[float]] = field(default_factory=dict)
    after_nats: dict[str, list[float]] = field(default_factory=dict)
    nats: dict[str, list[float]] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, label: str, event: tuple[float, float] | None, shown: float | None) -> None:
        if event is None or shown is None:
            self.missed[label] = self.missed.get(label, 0) + 1
            return
        occurred, received = event
        self.dom.setdefault(label, []).append(shown - occurred)
        self.after_nats.setdefault(label, []).append(shown - received)
        self.nats.setdefault(label, []).append(received - occurred)

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for label in self.dom:
            out[f"{label}: from the event (ms)"] = summary(self.dom[label])
            out[f"{label}: from the NATS subscriber (ms)"] = summary(self.after_nats[label])
            if "painted" not in label:  # the same events as the label without it
                out[f"{label}: baseline, event -> NATS subscriber (ms)"] = summary(self.nats[label])
        out["not seen in time (or no event)"] = self.missed
        out["samples, from the event (ms)"] = {
            label: [round(v, 1) for v in values] for label, values in self.dom.items()
        }
        return out


async def subscribed(bus: Bus, subject: str) -> tuple[Seen, Callable[[], Awaitable[None]]]:
    seen = Seen()
    sub = await bus.nc.subscribe(subject, cb=seen.handler)
    await bus.nc.flush()
    return seen, sub.unsubscribe


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False


# The list is painted and its one feed (sessionsChanged, from the page's log position) asked.
LIVE = """() => window.__bench && window.__bench.painted !== null
  && window.__bench.ws.subscribed > 0"""

# The RUNNING rows: every row follows the one feed.
FOLLOWED_ROWS = """() => [...document.querySelectorAll("#sessions tr[data-session]")]
    .filter((tr) => tr.querySelector("[data-status=RUNNING]"))
    .map((tr) => tr.dataset.session)"""

# The watchers note Date.now() when a status shows in the DOM ("STATUS") and once the frame
# after it has been produced ("STATUS painted": style, layout and paint of that change done).
NOTE = """(seen, key) => {
  if (key in seen) return;
  seen[key] = Date.now();
  requestAnimationFrame(() => setTimeout(() => { seen[`${key} painted`] = Date.now(); }, 0));
}"""

WATCH_SESSION_PAGE = f"""() => {{
  const note = {NOTE};
  const seen = window.__seenStatus = {{}};
  const badge = document.getElementById("session-status");
  new MutationObserver(() => {{
    const status = badge.querySelector("[data-status]")?.dataset.status;
    if (status) note(seen, status);
  }}).observe(badge, {{ childList: true, subtree: true }});
}}"""

WATCH_LIST = f"""() => {{
  const note = {NOTE};
  const seen = window.__seenRows = {{}};
  window.__watchRows = new Set();
  const body = document.querySelector("#sessions tbody");
  new MutationObserver((records) => {{
    for (const record of records) for (const node of record.addedNodes) {{
      const id = node.dataset?.session;
      if (!id || !window.__watchRows.has(id)) continue;
      const status = node.querySelector("[data-status]")?.dataset.status;
      if (status) note(seen[id] ??= {{}}, status);
    }}
  }}).observe(body, {{ childList: true, subtree: true }});
}}"""

WATCH_CLUSTER = f"""() => {{
  const note = {NOTE};
  const gone = window.__gone = {{}};
  window.__watchGone = new Set();
  const grid = document.getElementById("op-nodes");
  new MutationObserver(() => {{
    for (const id of window.__watchGone) {{
      const hold = grid.querySelector(`.op-gpu-seg[data-session="${{id}}"]`);
      if (!hold) note(gone[id] ??= {{}}, "gone");
    }}
  }}).observe(grid, {{ childList: true, subtree: true }});
}}"""


def add_change(found: Latencies, seen: Seen, dom: dict[str, float]) -> None:
    for status, event in STATUS_EVENT.items():
        found.add(status, seen.events.get(event), dom.get(status))
        found.add(f"{status}, painted", seen.events.get(event), dom.get(f"{status} painted"))


@dataclass
class Changes:
    """Terminates running sessions one at a time while a page is open."""

    browser: Browser
    gql: Gql
    bus: Bus
    running: list[str]
    """RUNNING sessions not touched yet; taken from the end."""
    pids: dict[str, int]
    timeout_s: float = 15.0

    def take(self, among: set[str] | None = None) -> str:
        for index in range(len(self.running) - 1, -1, -1):
            if among is None or self.running[index] in among:
                return self.running.pop(index)
        raise RuntimeError("no RUNNING session left to terminate")

    async def terminate(self, session_id: str) -> float:
        began = time.perf_counter()
        answer = await self.gql.call(TERMINATE, id=session_id)
        if answer["terminateSession"]["status"] not in ("ACCEPTED", "accepted"):
            log(f"terminate {session_id}: {answer['terminateSession']}")
        return (time.perf_counter() - began) * 1000

    async def session_page(self, count: int) -> dict[str, Any]:
        page, found = self.browser.page, Latencies()
        answers = []
        for _ in range(count):
            session_id = self.take()
            await self.browser.blank()
            self.browser.loads += 1
            await page.goto(
                f"{self.browser.base}/console/?load={self.browser.loads}#/sessions/{session_id}"
            )
            # Its history replays from the first event: wait until it reached RUNNING again.
            await page.wait_for_selector("#history tr[data-status=RUNNING]", timeout=60_000)
            await page.wait_for_selector("#session-status [data-status=RUNNING]")
            await page.evaluate(WATCH_SESSION_PAGE)
            seen, stop = await subscribed(self.bus, f"ev.session.{session_id}")
            answers.append(await self.terminate(session_id))

            async def shown() -> bool:
                return bool(await page.evaluate(
                    "() => 'TERMINATED painted' in window.__seenStatus"
                ))  # fmt: skip

            await wait_for(shown, self.timeout_s)
            dom: dict[str, float] = await page.evaluate("() => window.__seenStatus")
            await stop()
            add_change(found, seen, dom)
        return found.report() | {"terminateSession answered (ms)": summary(answers)}

    async def sessions_list(self, count: int, max_loads: int = 8) -> dict[str, Any]:
        """The RUNNING rows of the list's first page, terminated one by one (the list is
        loaded again if one page has too few)."""
        page, found, tried = self.browser.page, Latencies(), 0
        loads: list[dict[str, Any]] = []
        while len(loads) < max_loads and tried < count:
            await self.browser.blank()
            await settle(self.pids)
            self.browser.loads += 1
            await page.goto(f"{self.browser.base}/console/?load={self.browser.loads}#/sessions")
            await page.wait_for_function(LIVE, timeout=300_000, polling=200)
            followed = set(await page.evaluate(FOLLOWED_ROWS))
            ws = await page.evaluate("() => window.__bench.ws")
            loads.append({
                "subscriptions opened": ws["subscribed"],
                "refused, by reason": ws["reasons"],
                "RUNNING rows followed live": len(followed),
            })  # fmt: skip
            if not followed:
                break
            await page.evaluate(WATCH_LIST)
            while followed and tried < count:
                tried += 1
                session_id = self.take(followed)
                followed.discard(session_id)
                await page.evaluate("(id) => window.__watchRows.add(id)", session_id)
                seen, stop = await subscribed(self.bus, f"ev.session.{session_id}")
                await self.terminate(session_id)

                async def shown(session_id: str = session_id) -> bool:
                    return bool(await page.evaluate(
                        "(id) => 'TERMINATED painted' in (window.__seenRows[id] ?? {})",
                        session_id,
                    ))  # fmt: skip

                await wait_for(shown, self.timeout_s)
                dom: dict[str, float] = await page.evaluate(
                    "(id) => window.__seenRows[id] ?? {}", session_id
                )
                await stop()
                add_change(found, seen, dom)
                await asyncio.sleep(0.3)
        return found.report() | {"loads of the list": loads}

    async def cluster_page(self, count: int) -> dict[str, Any]:
        page, found = self.browser.page, Latencies()
        await self.browser.blank()
        self.browser.loads += 1
        await page.goto(f"{self.browser.base}/console/?load={self.browser.loads}#/operate/cluster")
        await page.wait_for_function(
            "() => window.__bench && window.__bench.painted !== null", timeout=300_000
        )
        idle = await self.left_alone(page)
        await page.evaluate(WATCH_CLUSTER)
        # Sessions holding a GPU (a CPU-only kernel shows only in an opened card's table) on
        # the cards on or near the screen: the page follows those; a card further away is
        # drawn again when it comes near.
        await page.evaluate("() => document.getElementById('op-nodes').scrollIntoView()")
        on_gpus = set(await page.evaluate(
            "() => [...document.querySelectorAll('#op-nodes .op-gpu-seg[data-session]')]"
            ".filter((e) => e.getBoundingClientRect().top < innerHeight + 1000)"
            ".map((e) => e.dataset.session)"
        ))  # fmt: skip
        for _ in range(count):
            session_id = self.take(on_gpus)
            await page.wait_for_selector(f'#op-nodes .op-gpu-seg[data-session="{session_id}"]',
                                         state="attached", timeout=60_000)  # fmt: skip
            await page.evaluate("(id) => window.__watchGone.add(id)", session_id)
            seen, stop = await subscribed(self.bus, f"ev.session.{session_id}")
            await self.terminate(session_id)

            async def shown(session_id: str = session_id) -> bool:
                return bool(await page.evaluate(
                    "(id) => 'gone painted' in (window.__gone[id] ?? {})", session_id
                ))  # fmt: skip

            await wait_for(shown, 2 * self.timeout_s)
            gone: dict[str, float] = await page.evaluate(
                "(id) => window.__gone[id] ?? {}", session_id
            )
            await stop()
            event = seen.events.get("SessionTerminated")
            found.add("TERMINATED: kernel off its node", event, gone.get("gone"))
            found.add("TERMINATED: kernel off its node, painted", event, gone.get("gone painted"))
            await asyncio.sleep(0.3)
        return found.report() | {"left alone": idle}

    async def left_alone(self, page: Page, seconds: float = 20.0) -> dict[str, Any]:
        """The open page with nothing done: how often it asks for the whole cluster again
        (a ``clusterChanges`` tick each time a node, agent or session event lands), and what
        that costs the gateway and the browser."""
        counts = """() => ({ ticks: window.__bench.ws.nexts, queries: performance
            .getEntriesByType("resource").filter((e) => e.name.endsWith("/graphql")).length })"""
        before, cpu = await page.evaluate(counts), Cpu(self.pids)
        renderer = await renderer_metrics(self.browser.cdp)
        await asyncio.sleep(seconds)
        after = await page.evaluate(counts)
        busy = await renderer_metrics(self.browser.cdp)
        return {
            "seconds": seconds,
            "clusterChanges ticks": after["ticks"] - before["ticks"],
            "cluster queries sent": after["queries"] - before["queries"],
            "CPU % of a core": cpu.share(),
            "renderer main thread busy (ms)": round(
                (busy.get("TaskDuration", 0.0) - renderer.get("TaskDuration", 0.0)) * 1000
            ),
        }


# ---- the run --------------------------------------------------------------------------------


async def measure(stack: Stack, args: argparse.Namespace, chromium: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    bus = await connect(stack.nats(), name="bench-console")
    try:
        log(f"waiting for {args.agents} simulated agents (and this machine's) to register")
        results["agents registered after (s)"] = round(
            await wait_nodes(bus, args.agents + 1, 120 + args.agents / 5), 1
        )
        log(f"sending {args.sessions} sessions")
        workload, seen = await populate(stack, bus, args)
        results["workload"] = workload
        log(f"workload: {workload}")
        admin = stack.admin()
        async with httpx.AsyncClient(base_url=stack.url, timeout=120) as client:
            gql = Gql(client)
            await gql.login(admin["email"], admin["password"])
            results["views caught up after (s)"] = round(await views_caught_up(gql, bus), 1)
            log("views caught up")
            pids = stack.pids()
            idle = Cpu(pids)
            await asyncio.sleep(5)
            results["idle CPU % of a core"] = idle.share()
            results["raw GraphQL (s), as the pages ask"] = await raw_queries(gql, args.loads)
            log(f"raw queries: {json.dumps(results['raw GraphQL (s), as the pages ask'])}")
            async with async_playwright() as playwright:
                launched = await playwright.chromium.launch(
                    executable_path=chromium, args=["--no-sandbox"]
                )
                context = await launched.new_context(viewport={"width": 1280, "height": 900})
                context.set_default_timeout(60_000)
                await context.add_init_script(PROBE)
                results["browser baselines"] = await baselines(context, stack.url, args.loads)
                log(f"baselines: {json.dumps(results['browser baselines'])}")
                page = await context.new_page()
                await sign_in(page, stack.url, admin["email"], admin["password"])
                cdp = await context.new_cdp_session(page)
                await cdp.send("Performance.enable")
                browser = Browser(context, page, cdp, stack.url)
                for name, route in PAGES.items():
                    loads = []
                    for index in range(args.loads):
                        load = await browser.load(route, pids, live=name == "sessions")
                        loads.append(load)
                        log(f"{name} load {index + 1}: painted {load['data painted (ms)']:.0f} ms"
                            f", fcp {load['first contentful paint (ms)']:.0f} ms")  # fmt: skip
                    results[f"page {name}"] = page_summary(loads)
                running = [s for s in seen.order if seen.status[s] == "RUNNING"]
                changes = Changes(browser, gql, bus, running, pids)
                log("status changes: a session's page")
                results["status change: a session's page"] = await changes.session_page(
                    args.changes
                )
                log("status changes: the sessions list")
                results["status change: the sessions list"] = await changes.sessions_list(
                    args.changes
                )
                log("status changes: the cluster page")
                results["status change: the cluster page"] = await changes.cluster_page(
                    args.changes
                )
                await launched.close()
    finally:
        await bus.close()
    return results


def verdict(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets against the warm medians and the p95s."""
    out: dict[str, Any] = {}
    for name in PAGES:
        page = results.get(f"page {name}", {})
        fcp = page.get("first contentful paint (ms)", {}).get("p50")
        painted = page.get("data painted (ms)", {}).get("p50")
        out[f"{name}: first contentful paint < 1 s"] = fcp is not None and fcp < 1000
        out[f"{name}: data painted < 1 s"] = painted is not None and painted < 1000
    for where in ("a session's page", "the sessions list", "the cluster page"):
        change = results.get(f"status change: {where}", {})
        p95s = [v.get("p95") for k, v in change.items() if k.endswith(": from the event (ms)")]
        out[f"{where}: every status change p95 < 200 ms"] = bool(p95s) and all(
            p is not None and p < 200 for p in p95s
        )
    loads = results.get("page sessions", {}).get("every load", [])
    out["sessions list: every row it shows follows live (no subscription refused)"] = bool(
        loads
    ) and all(load.get("subscriptions refused") == 0 for load in loads)
    return out


SIGNALLED: list[int] = []


def _interrupted(signum: int, frame: FrameType | None) -> None:
    # Ctrl-C reaches the Playwright driver too, so what fails first may be the browser: the
    # flag says that the failure was the interrupt.
    SIGNALLED.append(signum)
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=1000, help="simulated nodes")
    parser.add_argument("--gpus", type=int, default=3, help="GPUs per simulated node")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=5, help="full loads of each page")
    parser.add_argument("--changes", type=int, default=20, help="status changes per page")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--quiet-s", type=float, default=5.0, help="settled after no change")
    parser.add_argument("--max-wait-s", type=float, default=300.0, help="for the sessions")
    parser.add_argument(
        "--rate-limit", type=int, default=1_000_000,
        help="the gateway's requests a minute per user (its default, 600, is below what the "
        "sessions page asks for at this scale: see docs/benchmarks.md)",
    )  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs) at the end")
    args = parser.parse_args()
    try:
        chromium = chromium_binary()
    except RuntimeError:
        print(
            "bench.console needs Chromium: `apt-get install chromium` (Debian), or "
            "`bash scripts/ensure-chromium` as root, or JETYARD_CHROMIUM=/path/to/chromium",
            file=sys.stderr,
        )
        return 2
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, _interrupted)
    stack = Stack(args.agents, args.gpus, args.rate_limit, args.keep)
    began = time.monotonic()
    try:
        log(f"starting jetyard up in {stack.tmp} (gateway {stack.url})")
        stack.start()
        results = asyncio.run(measure(stack, args, chromium))
    except BaseException as failed:
        if not (SIGNALLED or isinstance(failed, KeyboardInterrupt)):
            raise
        log("interrupted: stopping the stack")
        return 130
    finally:
        stack.stop()
    results = {
        "layout": (
            f"jetyard up (simulated backend, SQLite views) + {args.agents} simulated agents x "
            f"{args.gpus} GPUs; {args.sessions} sessions of the superadmin; Chromium headless "
            f"{chromium}; {os.cpu_count()} CPUs"
        ),
        "targets": verdict(results),
        **results,
        "bench took (s)": round(time.monotonic() - began),
    }
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
