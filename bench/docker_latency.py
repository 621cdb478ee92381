"""create → RUNNING latency through the whole system on Docker, next to a bare ``docker run``
of the same image measured in the same run.

Layout: ``jetyard up`` (nats-server, projections, scheduler, one docker agent, gateway, each
its own process) on a temporary data directory. Each sample sends ``createSession`` over
GraphQL and polls ``session(id)`` every 10 ms until RUNNING (the agent has started the
container and the views show it); the session is then terminated and its container removed
before the next sample. The requests go through one kept-alive HTTP client, as the SDK's do (a
new ``httpx`` client costs ~25 ms of its own: an SSL context, even for plain HTTP). The
baseline is ``docker run -d`` of the same image and command, timed until ``docker inspect``
says running, then ``docker rm -f``. Bare and Jetyard samples alternate, so a slow spell of
the machine falls on both; Docker's own created → started of each container is printed for
both: the part of a difference that is the engine's, not Jetyard's.

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
from dataclasses import dataclass, field
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


def bare_docker(samples: int, spans: list[float] | None = None) -> list[float]:
    """Each sample's ``docker run -d`` until running, ms; ``spans`` gets Docker's own created →
    started of each container (as ``docker inspect`` stamps them)."""
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
        if spans is not None:
            created, started = _inspect_times(cid)
            spans.append((started - created) * 1000)
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
    return _inspect_times(found[0]) if found else None


def _inspect_times(container: str) -> tuple[float, float]:
    shown = subprocess.run(
        ["docker", "inspect", "-f", "{{.Created}} {{.State.StartedAt}}", container],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return _at(shown[0]), _at(shown[1])


def _wait_removed(session_id: str) -> None:
    """Until the agent has removed the session's container: the next sample starts on an
    engine as quiet as the baseline's (whose ``docker rm -f`` returns once removed)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label={LABEL_SESSION}={session_id}"],
            capture_output=True, text=True,
        ).stdout.split()  # fmt: skip
        if not found:
            return
        time.sleep(0.05)


SESSION_STATUS = "query($id: ID!) { session(id: $id) { status } }"


@dataclass
class Run:
    """What one run measured: each sample's total, bare and through Jetyard (ms), Docker's own
    created → started of each container, and Jetyard's stages (ms after the send)."""

    bare: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)
    bare_docker: list[float] = field(default_factory=list)
    our_docker: list[float] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=dict)


def measure(samples: int) -> Run:
    """Bare and Jetyard samples alternately, on one engine, one stack: a slow spell of the
    machine falls on both."""
    run = Run()
    sent: dict[str, tuple[float, float, float, tuple[float, float] | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stack = Jetyard(Path(tmp) / "data", free_port(), "docker").start()
        client = httpx.Client(base_url=stack.url, auth=stack.auth, timeout=30)

        def gql(query: str, **variables: Any) -> Any:
            answer = client.post("/graphql", json={"query": query, "variables": variables})
            return answer.raise_for_status().json()["data"]

        try:
            spec = {"image": TEST_IMAGE, "cpu": "0.5", "memory": "32m", "command": ["sleep", "60"]}
            warm = gql(CREATE, input=spec)["createSession"]["sessionId"]  # not counted
            wait_status(stack, warm, {"RUNNING"})
            gql(TERMINATE, id=warm)
            wait_status(stack, warm, {"TERMINATED"})
            _wait_removed(warm)
            for _ in range(samples):
                run.bare += bare_docker(1, run.bare_docker)
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
                run.ours.append((time.perf_counter() - start) * 1000)
                visible = time.time()
                container = _container_times(session_id)
                sent[session_id] = (wall, answered, visible, container)
                if container is not None:
                    run.our_docker.append((container[1] - container[0]) * 1000)
                gql(TERMINATE, id=session_id)
                wait_status(stack, session_id, {"TERMINATED"})
                _wait_removed(session_id)
            _stages(stack, sent, run.stages)
        finally:
            client.close()
            stack.stop()
    return run


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
    run = measure(args.samples)
    print(f"# create → RUNNING, {args.samples} samples each, alternately, image {TEST_IMAGE}")
    for label, values in (
        ("bare docker run -d → running", run.bare),
        ("jetyard createSession → RUNNING", run.ours),
        ("  Docker's created → started, bare", run.bare_docker),
        ("  Docker's created → started, ours", run.our_docker),
    ):
        print(
            f"{label:<36} p50 {statistics.median(values):7.1f} ms"
            f"   p99 {_pct(values, 0.99):7.1f} ms"
        )
    p50 = statistics.median(run.ours) / statistics.median(run.bare)
    p99 = _pct(run.ours, 0.99) / _pct(run.bare, 0.99)
    print(f"ratio: p50 {p50:.2f} (goal 1.25), p99 {p99:.2f} (goal 1.5)")
    if args.stages:
        print("# stages, ms after the client's send")
        for stage in STAGES:
            values = run.stages.get(stage, [])
            if values:
                print(
                    f"  {stage:<20} p50 {statistics.median(values):7.1f}"
                    f"   p99 {_pct(values, 0.99):7.1f}   ({len(values)} samples)"
                )


if __name__ == "__main__":
    main()
