"""App proxy throughput: GETs of a small file from an HTTP app in a Docker container (busybox
``httpd`` serving ``/www``), sent through the app proxy of a real ``jetyard up`` stack with the
owner's cookie, next to the same GETs sent to the container's address directly, in the same
run, by the same load generator (``wrk``, keep-alive connections, ``--latency``).

Layout: ``jetyard up --agent-backend docker`` on a temp data dir (the proxy in its own process,
as deployed); an image built here FROM the local ``jetyard-busybox:latest`` with the service
port label; one session of it, whose app the agent reports open; ``startApp`` gives the URL,
whose token the proxy turns into the cookie every proxied request carries. Each round runs
the proxied loads, then the direct ones, each once the host has few sockets in TIME_WAIT
towards the app (``settle``: a direct run leaves one per request, and they slow every later
connect from this host to the app, the proxy's and wrk's); the best of the rounds counts.
Prints JSON: requests/s, p50/p99 latency, the proxy/direct ratio, the p99 the proxy adds, and
the proxy process's CPU per request. The stack, the container and the image are removed.

Run:  python -m bench.appproxy [--seconds 10] [--connections 16,64] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from schemas.app_tokens import COOKIE
from tests.e2e.appproxy_support import (
    HTTPD,
    TERMINATE,
    build_web_image,
    docker_stack,
    remove_image,
    run_app_session,
    start_app,
)
from tests.e2e.conftest import Jetyard
from tests.e2e.test_vfolders import admin_of

PAGE = b"x" * 512 + b"\n"  # a small file: the per-request cost is what is measured
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def open_app(stack: Jetyard, image: str) -> tuple[str, str, str]:
    """A session of ``image`` with its app open: (the session, the app's URL through the
    proxy, the cookie that opens it)."""
    admin = admin_of(stack)
    spec = {"image": image, "cpu": "1", "memory": "256m", "command": HTTPD}
    session_id = run_app_session(admin, spec, "web", 8080)
    url = start_app(admin, session_id, "web")
    opened = httpx.get(url, timeout=10)
    if opened.status_code != 303:
        raise RuntimeError(f"the token was not taken: {opened.status_code} {opened.text}")
    parts = urlsplit(url)
    return session_id, f"{parts.scheme}://{parts.netloc}{parts.path}", opened.cookies[COOKIE]


def container_address(image: str) -> str:
    ours = ["docker", "ps", "--quiet", "--filter", f"ancestor={image}"]
    (container,) = subprocess.run(ours, capture_output=True, text=True, check=True).stdout.split()
    ips_of = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
    inspect = ["docker", "inspect", "-f", ips_of, container]
    ips = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.split()
    return f"{ips[0]}:8080"


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise RuntimeError(f"wrk said no {pattern!r}:\n{text}")
    return match.group(1)


def _ms(text: str) -> float:
    """``wrk``'s ``812.00us``, ``1.20ms``, ``1.05s`` in milliseconds."""
    unit = _found(r"(us|ms|s)$", text)
    return float(text.removesuffix(unit)) * _UNITS[unit]


def wrk(url: str, connections: int, seconds: int, *headers: str) -> dict[str, float]:
    """One ``wrk`` run: requests/s, p50/p99 latency (ms), non-2xx answers and socket errors."""
    threads = min(connections, os.cpu_count() or 1)
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for header in headers:
        argv += ["-H", header]
    out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
    found = {
        "rps": float(_found(r"Requests/sec:\s+([\d.]+)", out)),
        "p50_ms": _ms(_found(r"\s50%\s+(\S+)", out)),
        "p99_ms": _ms(_found(r"\s99%\s+(\S+)", out)),
    }
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    found["non_2xx"] = float(bad.group(1)) if bad else 0.0
    if errors:
        print(f"wrk {url}: {errors.group(0)}", file=sys.stderr)
    return found


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_wait(address: str) -> int:
    """Sockets of this host in TIME_WAIT towards ``address`` (``ip:port``)."""
    out = subprocess.run(["ss", "-Htan", "state", "time-wait", "dst", address],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return len(out.splitlines())


def settle(address: str, most: int = 1000, wait_s: float = 65.0) -> float:
    """Wait (at most ``wait_s``) until few sockets are in TIME_WAIT towards the app; seconds
    waited. A direct run leaves one per request (wrk closes first), and a connect from this
    host to the app then has to search past them for a free port: the next proxied run would
    pay the kernel's search, not the proxy's work."""
    started = time.monotonic()
    while time_wait(address) > most and time.monotonic() - started < wait_s:
        time.sleep(1)
    return time.monotonic() - started


def measure(
    direct: str, proxied: str, cookie: str, proxy_pid: int, args: argparse.Namespace
) -> list[dict[str, Any]]:
    address = urlsplit(direct).netloc
    best: dict[tuple[int, str], dict[str, float]] = {}
    cpu: dict[int, list[float]] = {c: [] for c in args.connections}
    for _ in range(args.repeat):
        for name, url, headers in (
            ("proxy", proxied, (f"Cookie: {COOKIE}={cookie}",)),
            ("direct", direct, ()),
        ):
            for connections in args.connections:
                settle(address)  # every run on a host with few TIME_WAIT sockets to the app
                before = cpu_s(proxy_pid)
                got = wrk(url, connections, args.seconds, *headers)
                if name == "proxy" and got["rps"]:
                    used = cpu_s(proxy_pid) - before
                    cpu[connections].append(1e3 * used / (got["rps"] * args.seconds))
                if got["non_2xx"]:
                    raise RuntimeError(f"{name}: {got['non_2xx']:.0f} answers were not 2xx")
                if (connections, name) not in best or got["rps"] > best[connections, name]["rps"]:
                    best[connections, name] = got
    results: list[dict[str, Any]] = []
    for connections in args.connections:
        d, p = best[connections, "direct"], best[connections, "proxy"]
        results.append({
            "connections": connections,
            "direct": {k: round(v, 2) for k, v in d.items() if k != "non_2xx"},
            "proxy": {k: round(v, 2) for k, v in p.items() if k != "non_2xx"},
            "proxy / direct rps": round(p["rps"] / d["rps"], 2),
            "p99 added ms": round(p["p99_ms"] - d["p99_ms"], 2),
            "proxy CPU ms per request": round(min(cpu[connections]), 3),
        })  # fmt: skip
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="each wrk run (default 10)")
    parser.add_argument("--connections", default="16,64", help="wrk -c values (default 16,64)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds; the best run counts")
    args = parser.parse_args()
    args.connections = [int(c) for c in args.connections.split(",")]
    for tool in ("wrk", "docker"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed (apt-get install -y wrk; Docker for the app)")
    work = Path(tempfile.mkdtemp(prefix="jy-appproxy-bench-"))
    tag = f"jetyard-bench-appproxy:{os.getpid()}"
    stack: Jetyard | None = None
    try:
        build_web_image(tag, work / "image", {"page.txt": PAGE})
        # After the build: the agent lists its images at start.
        stack = docker_stack(work / "data").start(timeout=90)
        session_id, proxied, cookie = open_app(stack, tag)
        direct = f"http://{container_address(tag)}/page.txt"
        proxied += "page.txt"
        for url, headers in ((direct, {}), (proxied, {"cookie": f"{COOKIE}={cookie}"})):
            got = httpx.get(url, headers=headers, timeout=10)
            if got.content != PAGE:
                raise RuntimeError(f"{url}: {got.status_code} {got.text[:200]}")
        proxy_pid = int((work / "data" / "run" / "appproxy.pid").read_text())
        results = measure(direct, proxied, cookie, proxy_pid, args)
        stack.gql(TERMINATE, id=session_id)
    finally:
        if stack is not None:
            stack.stop()
        remove_image(tag)
        shutil.rmtree(work, ignore_errors=True)
    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
    print(json.dumps({
        "load generator": wrk_version.split(" [")[0].strip() + ", keep-alive, --latency",
        "app": "busybox httpd in a container (closes every connection)",
        "file bytes": len(PAGE), "seconds per run": args.seconds, "repeat": args.repeat,
        "cpus": os.cpu_count(), "runs": results,
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
