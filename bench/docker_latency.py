"""create → RUNNING latency through the whole system on Docker, next to a bare ``docker run``
of the same image measured in the same run.

Layout: ``jetyard up`` (nats-server, projections, scheduler, one docker agent, gateway, each
its own process) on a temporary data directory. Each sample sends ``createSession`` over
GraphQL and polls ``session(id)`` every 10 ms until RUNNING (the agent has started the
container and the views show it); the session is then terminated. The requests go through one
kept-alive HTTP client, as the SDK's do (a new ``httpx`` client costs ~25 ms of its own: an
SSL context, even for plain HTTP). The baseline is
``docker run -d`` of the same image and command, timed until ``docker inspect`` says running.

With ``--stages`` each Jetyard sample is also broken down, from the client's send (all on
this machine's clock): the command answered (``createSession`` returns once decided),
``SessionRequested`` and ``SessionScheduled`` as the services stamped them, the container
created and started as Docker stamped them (``docker inspect``: Created, State.StartedAt),
the agent's ``KernelStarted``, ``SessionStarted`` (RUNNING stored), and RUNNING seen in the
views by the client's poll; each as p50/p99 ms after the send.

Run:  python -m bench.docker_latency [--samples 20] [--stages]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from jetyard.runtime.natsserver import free_port
from services.node.backend import LABEL_SESSION
from tests.e2e.conftest import TEST_IMAGE, Jetyard
from tests.e2e.test_session_path import CREATE, TERMINATE, wait_status


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def bare_docker(samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        start = time.perf_counter()
        cid = subprocess.run(
            ["docker", "run", "-d", "--init", TEST_IMAGE, "sleep", "60"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        while True:
            state = subprocess.run(
                ["docker", "inspect", "-f", "{{.State.Running}}", cid],
                capture_output=True,
                text=True,
            ).stdout.strip()
            if state == "true":
                break
            time.sleep(0.005)
        out.append((time.perf_counter() - start) * 1000)
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=True)
    return out


STAGES = (
    "answered", "requested", "scheduled", "container created", "container started",
    "KernelStarted", "RUNNING stored", "RUNNING visible",
)  # fmt: skip


def _at(text: str) -> float:
    """An RFC 3339 time (Docker's nanoseconds cut to microseconds) as epoch seconds."""
    head, _, frac = text.rstrip("Z").partition(".")
    micros = (frac + "000000")[:6]
    return datetime.fromisoformat(f"{head}.{micros}+00:00").timestamp()


def _container_times(session_id: str) -> tuple[float, float] | None:
    found = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={LABEL_SESSION}={session_id}"],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    if not found:
        return None
    shown = subprocess.run(
        ["docker", "inspect", "-f", "{{.Created}} {{.State.StartedAt}}", found[0]],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return _at(shown[0]), _at(shown[1])


SESSION_STATUS = "query($id: ID!) { session(id: $id) { status } }"


def jetyard(samples: int, stages: dict[str, list[float]] | None = None) -> list[float]:
    out = []
    sent: dict[str, tuple[float, float, float, tuple[float, float] | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stack = Jetyard(Path(tmp) / "data", free_port(), "docker").start()
        client = httpx.Client(base_url=stack.url, auth=stack.auth, timeout=30)

        def gql(query: str, **variables: Any) -> Any:
            answer = client.post("/graphql", json={"query": query, "variables": variables})
            return answer.raise_for_status().json()["data"]

        try:
            spec = {"image": TEST_IMAGE, "cpu": "0.5", "memory": "32m", "command": ["sleep", "60"]}
            for _ in range(samples):
                wall, start = time.time(), time.perf_counter()
                created = gql(CREATE, input=spec)
                answered = time.time()
                session_id = created["createSession"]["sessionId"]
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    status = gql(SESSION_STATUS, id=session_id)["session"]
                    if status and status["status"] == "RUNNING":
                        break
                    time.sleep(0.01)
                out.append((time.perf_counter() - start) * 1000)
                sent[session_id] = (wall, answered, time.time(), _container_times(session_id))
                gql(TERMINATE, id=session_id)
                wait_status(stack, session_id, {"TERMINATED"})
            if stages is not None:
                _stages(stack, sent, stages)
        finally:
            client.close()
            stack.stop()
    return out


def _stages(
    stack: Jetyard,
    sent: dict[str, tuple[float, float, float, tuple[float, float] | None]],
    stages: dict[str, list[float]],
) -> None:
    """Each sample's stages, in ms after its send, from the stack's log and Docker."""
    printed = subprocess.run(
        [str(Path(sys.executable).parent / "jetyard"), "log", "--data-dir", str(stack.data_dir)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    stamped: dict[tuple[str, str], float] = {}
    for line in printed.splitlines():
        event = json.loads(line)
        at = datetime.fromisoformat(event["occurred_at"]).timestamp()
        owner = event["payload"].get("session_id") or event["aggregate_id"]
        stamped.setdefault((event["name"], owner), at)
    names = {
        "requested": "SessionRequested", "scheduled": "SessionScheduled",
        "KernelStarted": "KernelStarted", "RUNNING stored": "SessionStarted",
    }  # fmt: skip
    for session_id, (wall, answered, visible, container) in sent.items():
        times: dict[str, float | None] = {
            "answered": answered, "RUNNING visible": visible,
            **{stage: stamped.get((name, session_id)) for stage, name in names.items()},
        }  # fmt: skip
        if container is not None:
            times["container created"], times["container started"] = container
        for stage in STAGES:
            if (when := times.get(stage)) is not None:
                stages.setdefault(stage, []).append((when - wall) * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--stages", action="store_true", help="break each sample down")
    args = parser.parse_args()
    bare = bare_docker(args.samples)
    stages: dict[str, list[float]] | None = {} if args.stages else None
    ours = jetyard(args.samples, stages)
    print(f"# create → RUNNING, {args.samples} samples each, image {TEST_IMAGE}")
    for label, values in (
        ("bare docker run -d → running", bare),
        ("jetyard createSession → RUNNING", ours),
    ):
        print(
            f"{label:<34} p50 {statistics.median(values):7.1f} ms"
            f"   p99 {_pct(values, 0.99):7.1f} ms"
        )
    print(f"ratio (p50): {statistics.median(ours) / statistics.median(bare):.2f}")
    if stages:
        print("# stages, ms after the client's send")
        for stage in STAGES:
            values = stages.get(stage, [])
            if values:
                print(
                    f"  {stage:<20} p50 {statistics.median(values):7.1f}"
                    f"   p99 {_pct(values, 0.99):7.1f}   ({len(values)} samples)"
                )


if __name__ == "__main__":
    main()
