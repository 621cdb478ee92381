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
import json
import os
import signal
import sys
import time
from types import FrameType
from typing import Any

import httpx
from playwright.async_api import async_playwright

from bench.console.browser import PROBE, Browser, baselines, page_summary, sign_in
from bench.console.changes import Changes
from bench.console.gql import Gql, raw_queries, views_caught_up
from bench.console.stack import Cpu, Stack
from bench.console.support import PAGES, log
from bench.console.workload import populate
from bench.sched_watch import wait_nodes
from events.bus import connect
from tests.browser.support import chromium_binary


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
        prog="python -m bench.console",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
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
