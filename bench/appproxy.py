"""App proxy throughput: GETs of a small file from an HTTP app in a Docker container (busybox
``httpd`` serving ``/www``), sent through the app proxy of a real ``jetyard up`` stack with the
owner's cookie, next to the same GETs sent to the container's address directly, in the same
run, by the same load generator (``wrk``, keep-alive connections, ``--latency``).

Layout: ``jetyard up --agent-backend docker`` on a temp data dir (the proxy in its own process,
as deployed); an image built here FROM the local ``jetyard-busybox:latest`` with the service
port label; one session of it, whose app the agent reports open; ``startApp`` gives the URL,
whose token the proxy turns into the cookie every proxied request carries. Rounds alternate
direct and proxied runs at each concurrency, so a burst of other load hits both alike.
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
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from jetyard.natsserver import free_port
from jetyard.sdk import JetyardAuth
from schemas.app_tokens import COOKIE
from schemas.service_ports import BACKENDAI_LABEL

BASE_IMAGE = os.environ.get("JETYARD_TEST_IMAGE", "jetyard-busybox:latest")
PAGE = b"x" * 512 + b"\n"  # a small file: the per-request cost is what is measured
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def build_image(tag: str, work: Path) -> None:
    context = work / "image"
    context.mkdir()
    (context / "page.txt").write_bytes(PAGE)
    (context / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\n"
        f'LABEL {BACKENDAI_LABEL}="web:http:8080"\n'
        "COPY page.txt /www/page.txt\n"
        'CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n'
    )
    subprocess.run(["docker", "build", "--quiet", "--tag", tag, str(context)],
                   check=True, capture_output=True)  # fmt: skip


def remove_image(tag: str) -> None:
    ours = ["docker", "ps", "--all", "--quiet", "--filter", f"ancestor={tag}"]
    containers = subprocess.run(ours, capture_output=True, text=True).stdout.split()
    if containers:
        subprocess.run(["docker", "rm", "--force", *containers], capture_output=True)
    subprocess.run(["docker", "image", "rm", "--force", tag], capture_output=True)


class Stack:
    """``jetyard up`` on ``data_dir``, driven over GraphQL as its superadmin."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir, self.port = data_dir, free_port()
        env = {**os.environ, "JETYARD_APPPROXY_PORT": str(free_port())}
        self.log = open(data_dir.parent / "up.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "jetyard"), "up", "--data-dir", str(data_dir),
             "--gateway-port", str(self.port), "--agent-backend", "docker"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"
        self.auth: JetyardAuth | None = None

    def wait_healthy(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jetyard up exited; see {self.log.name}")
            try:
                healthy = httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
                admin = self.data_dir / "admin.json"
                if healthy and admin.exists():
                    keys = json.loads(admin.read_text())
                    self.auth = JetyardAuth(keys["access_key"], keys["secret_key"])
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise TimeoutError("jetyard up did not become healthy")

    def gql(self, query: str, **variables: Any) -> dict[str, Any]:
        answer = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables},
                            auth=self.auth, timeout=30)  # fmt: skip
        answer.raise_for_status()
        body: dict[str, Any] = answer.json()
        if body.get("errors"):
            raise RuntimeError(body["errors"])
        data: dict[str, Any] = body["data"]
        return data

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def open_app(stack: Stack, image: str) -> tuple[str, str, str]:
    """A session of ``image`` with its app open: (the session, the app's URL through the
    proxy, the cookie that opens it)."""
    created = stack.gql(
        """mutation($input: CreateSessionInput!) {
             createSession(input: $input) { status message sessionId } }""",
        input={"image": image, "cpu": "1", "memory": "256m",
               "command": ["httpd", "-f", "-p", "8080", "-h", "/www"]},
    )["createSession"]  # fmt: skip
    if created["status"] != "ACCEPTED":
        raise RuntimeError(created)
    session_id: str = created["sessionId"]
    ports = """query($id: ID!) { session(id: $id) { status servicePorts { name state } } }"""
    deadline = time.monotonic() + 120
    while True:
        seen = stack.gql(ports, id=session_id)["session"] or {}
        if seen.get("status") == "RUNNING" and seen.get("servicePorts"):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the app never opened: {seen}")
        time.sleep(0.3)
    if seen["servicePorts"] != [{"name": "web", "state": "open"}]:
        raise RuntimeError(seen)
    start = """mutation($id: ID!) { startApp(sessionId: $id, app: "web") { url } }"""
    url: str = stack.gql(start, id=session_id)["startApp"]["url"]
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


def measure(
    direct: str, proxied: str, cookie: str, proxy_pid: int, args: argparse.Namespace
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for connections in args.connections:
        best: dict[str, dict[str, float]] = {}
        proxy_cpu_per_request: list[float] = []
        for _ in range(args.repeat):
            for name, url, headers in (
                ("direct", direct, ()),
                ("proxy", proxied, (f"Cookie: {COOKIE}={cookie}",)),
            ):
                before = cpu_s(proxy_pid)
                got = wrk(url, connections, args.seconds, *headers)
                if name == "proxy" and got["rps"]:
                    used = cpu_s(proxy_pid) - before
                    proxy_cpu_per_request.append(1e3 * used / (got["rps"] * args.seconds))
                if got["non_2xx"]:
                    raise RuntimeError(f"{name}: {got['non_2xx']:.0f} answers were not 2xx")
                if name not in best or got["rps"] > best[name]["rps"]:
                    best[name] = got
        d, p = best["direct"], best["proxy"]
        results.append({
            "connections": connections,
            "direct": {k: round(v, 2) for k, v in d.items() if k != "non_2xx"},
            "proxy": {k: round(v, 2) for k, v in p.items() if k != "non_2xx"},
            "proxy / direct rps": round(p["rps"] / d["rps"], 2),
            "p99 added ms": round(p["p99_ms"] - d["p99_ms"], 2),
            "proxy CPU ms per request": round(min(proxy_cpu_per_request), 3),
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
    stack: Stack | None = None
    try:
        build_image(tag, work)
        stack = Stack(work / "data")  # after the build: the agent lists its images at start
        stack.wait_healthy()
        session_id, proxied, cookie = open_app(stack, tag)
        direct = f"http://{container_address(tag)}/page.txt"
        proxied += "page.txt"
        for url, headers in ((direct, {}), (proxied, {"cookie": f"{COOKIE}={cookie}"})):
            got = httpx.get(url, headers=headers, timeout=10)
            if got.content != PAGE:
                raise RuntimeError(f"{url}: {got.status_code} {got.text[:200]}")
        proxy_pid = int((work / "data" / "run" / "appproxy.pid").read_text())
        results = measure(direct, proxied, cookie, proxy_pid, args)
        stack.gql("mutation($id: ID!) { terminateSession(id: $id) { status } }", id=session_id)
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
