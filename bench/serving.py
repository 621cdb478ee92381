"""Model serving throughput: ``POST /v1/embeddings`` (1 or 32 short sentences) to the real model
(``jetyard-model``: WordLlama, its files in a folder every replica mounts) through an endpoint
of a real ``jetyard up`` stack (the app proxy's ``/e/<name>/``, with a bearer token), next to
the same requests sent to the same replicas' container addresses directly, in the same run, by
the same load generator (``wrk``, keep-alive, ``--latency``), at N = 1 and N = 2 replicas.

Directly at N = 2 means one ``wrk`` per replica at once, the connections and threads split
between them: requests/s add up; p50 is the connection-weighted mean of theirs and p99 the
larger of theirs (wrk reports no merged distribution). Each round runs the proxied load, then
the direct one; the best of the rounds counts. On this machine (2 cores) ``wrk``, the proxy and
the replicas share the CPUs, so the ratio says what the endpoint path costs in CPU, not what a
proxy on its own machine would add. The model answers one sentence in well under a millisecond
of CPU, about what the proxy spends on a request (~0.3 ms), so one sentence is the worst case
for the ratio; 32 sentences a request is closer to what a model costs.

Run:  python -m bench.serving [--seconds 10] [--connections 8] [--replicas 1,2] [--inputs 1,32]
      [--repeat 2]
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

import httpx

from bench.appproxy import _found, _ms
from tests.e2e.appproxy_support import docker_stack
from tests.e2e.conftest import Jetyard
from tests.e2e.test_vfolders import admin_of
from tests.e2e.user_support import JETYARD

ROOT = Path(__file__).resolve().parents[1]
NAME = "bench-embed"
IMAGE = "jetyard-model:latest"
MODEL = "wordllama-l2-supercat-256"
SENTENCE = "A man is playing a guitar on stage number {}."


def body(inputs: int) -> dict[str, Any]:
    return {"model": MODEL, "input": [SENTENCE.format(i) for i in range(inputs)]}


LUA = """wrk.method = "POST"
wrk.body = '{body}'
wrk.headers["Content-Type"] = "application/json"
"""


def endpoint_cli(stack: Jetyard, *args: str) -> str:
    admin = stack.admin
    env = {
        **os.environ,
        "JETYARD_ENDPOINT": stack.url,
        "JETYARD_ACCESS_KEY": admin["access_key"],
        "JETYARD_SECRET_KEY": admin["secret_key"],
    }
    done = subprocess.run([JETYARD, "endpoint", *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"jetyard endpoint {' '.join(args)}: {done.stderr}")
    return done.stdout


def shown(stack: Jetyard) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(endpoint_cli(stack, "show", NAME, "--json"))
    return found


def serving(stack: Jetyard, replicas: int, timeout_s: float = 180) -> list[str]:
    """The session ids of the replicas serving, once ``replicas`` of them do."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        endpoint = shown(stack)
        up = [
            r["sessionId"] for r in endpoint["replicas"]
            if (r["lifecycle"], r["health"], r["traffic"]) == ("RUNNING", "HEALTHY", "ACTIVE")
        ]  # fmt: skip
        if endpoint["status"] == "READY" and len(up) == replicas:
            return up
        time.sleep(1)
    raise RuntimeError(f"{NAME} never had {replicas} replicas serving: {shown(stack)}")


def container_address(session_id: str) -> str:
    ours = ["docker", "ps", "--quiet", "--filter", f"label=jetyard.session_id={session_id}"]
    (container,) = subprocess.run(ours, capture_output=True, text=True, check=True).stdout.split()
    ips_of = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
    inspect = ["docker", "inspect", "-f", ips_of, container]
    ips = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.split()
    return f"{ips[0]}:8000"


def wrk_argv(url: str, connections: int, threads: int, seconds: int, script: Path,
             *headers: str) -> list[str]:  # fmt: skip
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "-s",
            str(script)]  # fmt: skip
    for header in headers:
        argv += ["-H", header]
    return [*argv, url]


def parsed(out: str) -> dict[str, float]:
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if bad:
        raise RuntimeError(f"{bad.group(1)} answers were not 2xx:\n{out}")
    return {
        "rps": float(_found(r"Requests/sec:\s+([\d.]+)", out)),
        "p50_ms": _ms(_found(r"\s50%\s+(\S+)", out)),
        "p99_ms": _ms(_found(r"\s99%\s+(\S+)", out)),
    }


def run_together(argvs: list[list[str]]) -> list[dict[str, float]]:
    """Several ``wrk`` at once; each one's figures."""
    running = [subprocess.Popen(a, stdout=subprocess.PIPE, text=True) for a in argvs]
    outs = [p.communicate()[0] for p in running]
    return [parsed(out) for out in outs]


def merged(parts: list[dict[str, float]], weights: list[int]) -> dict[str, float]:
    total = sum(weights)
    return {
        "rps": sum(p["rps"] for p in parts),
        "p50_ms": sum(p["p50_ms"] * w for p, w in zip(parts, weights, strict=True)) / total,
        "p99_ms": max(p["p99_ms"] for p in parts),
    }


def measure(
    url: str, token: str, direct: list[str], script: Path, args: argparse.Namespace
) -> dict[str, Any]:
    threads = max(1, min(args.connections, os.cpu_count() or 1))
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        proxied = run_together([wrk_argv(url, args.connections, threads, args.seconds, script,
                                         f"Authorization: Bearer {token}")])[0]  # fmt: skip
        share = [args.connections // len(direct) + (i < args.connections % len(direct))
                 for i in range(len(direct))]  # fmt: skip
        each = [max(1, threads // len(direct))] * len(direct)
        parts = run_together([
            wrk_argv(f"http://{address}/v1/embeddings", c, min(t, c), args.seconds, script)
            for address, c, t in zip(direct, share, each, strict=True)
        ])  # fmt: skip
        for name, got in (("endpoint", proxied), ("direct", merged(parts, share))):
            if name not in best or got["rps"] > best[name]["rps"]:
                best[name] = got
    e, d = best["endpoint"], best["direct"]
    return {
        "endpoint": {k: round(v, 2) for k, v in e.items()},
        "direct": {k: round(v, 2) for k, v in d.items()},
        "endpoint / direct rps": round(e["rps"] / d["rps"], 2),
        "p99 added ms": round(e["p99_ms"] - d["p99_ms"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="each wrk run (default 10)")
    parser.add_argument("--connections", type=int, default=8, help="wrk -c (default 8)")
    parser.add_argument("--replicas", default="1,2", help="N values (default 1,2)")
    parser.add_argument("--inputs", default="1,32", help="sentences a request (default 1,32)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds; the best run counts")
    args = parser.parse_args()
    counts = [int(n) for n in args.replicas.split(",")]
    sizes = [int(n) for n in args.inputs.split(",")]
    for tool in ("wrk", "docker"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed (apt-get install -y wrk; Docker for the replicas)")
    subprocess.run([str(ROOT / "scripts" / "build-model-image")], check=True)
    work = Path(tempfile.mkdtemp(prefix="jy-serving-bench-"))
    scripts = {n: work / f"embeddings-{n}.lua" for n in sizes}
    for n, script in scripts.items():
        script.write_text(LUA.format(body=json.dumps(body(n))))
    stack: Jetyard | None = None
    runs = []
    try:
        files = work / "model"
        subprocess.run([str(ROOT / "scripts" / "model-files"), str(files)], check=True)
        stack = docker_stack(work / "data").start(timeout=120)
        admin = admin_of(stack)
        admin.ok("create", "wordllama")
        for path in sorted(files.iterdir()):
            admin.ok("upload", "wordllama", str(path))
        endpoint_cli(
            stack, "create", NAME, "--image", IMAGE, "--port", "8000", "--model", "wordllama",
            "--command", "python3 /opt/jetyard/model/server.py", "--cpu", "1", "--memory", "1g",
            "--replicas", str(counts[0]), "--max", str(max(counts)),
            "--health-interval", "2s", "--warmup", "60s",
        )  # fmt: skip
        token = json.loads(endpoint_cli(stack, "token", "create", NAME, "--json"))["token"]
        url = shown(stack)["url"] + "v1/embeddings"
        for replicas in counts:
            endpoint_cli(stack, "scale", NAME, str(replicas))
            direct = [container_address(s) for s in serving(stack, replicas)]
            for n, script in scripts.items():
                check = httpx.post(url, json=body(n), headers={"Authorization": f"Bearer {token}"})
                if check.status_code != 200 or len(check.json()["data"]) != n:
                    raise RuntimeError(f"{url}: {check.status_code} {check.text[:200]}")
                measured = measure(url, token, direct, script, args)
                runs.append({"replicas": replicas, "sentences": n, **measured})
        endpoint_cli(stack, "rm", NAME)
    finally:
        if stack is not None:
            stack.stop()
            cluster = (work / "data" / "cluster.id").read_text().strip()
            ours = ["docker", "ps", "--all", "--quiet", "--filter",
                    f"label=jetyard.cluster_id={cluster}"]  # fmt: skip
            left = subprocess.run(ours, capture_output=True, text=True).stdout.split()
            if left:
                subprocess.run(["docker", "rm", "-f", *left], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
    print(json.dumps({
        "load generator": wrk_version.split(" [")[0].strip() + ", keep-alive, --latency",
        "request": f"POST /v1/embeddings {{model: {MODEL}, input: [N sentences]}}",
        "replica": "jetyard-model (WordLlama, stdlib HTTP server), 1 CPU, 1 GiB each",
        "connections": args.connections, "seconds per run": args.seconds,
        "repeat": args.repeat, "cpus": os.cpu_count(), "runs": runs,
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
