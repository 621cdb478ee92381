"""Status changes seen in an open page: ``terminateSession`` on a running session while its
page, the sessions list or the Cluster page is open, timed from the event to the DOM and
next to a plain NATS subscriber (the baseline)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nats.aio.msg import Msg
from playwright.async_api import Page

from bench.console.browser import Browser, renderer_metrics
from bench.console.gql import Gql
from bench.console.stack import Cpu, settle
from bench.console.support import TERMINATE, log, summary
from events.bus import Bus


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
