"""The browser (Playwright, headless Chromium): the probe installed before a page's scripts,
one page load measured, and the baselines (a blank page, the sign-in page)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from playwright.async_api import BrowserContext, CDPSession, Page

from bench.console.stack import Cpu, settle
from bench.console.support import log, summary

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
