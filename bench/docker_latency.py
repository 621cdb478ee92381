"""create → RUNNING latency through the whole system on Docker, next to a bare ``docker run``
of the same image measured in the same run.

Layout: ``jetyard up`` (nats-server, projections, scheduler, one docker agent, gateway, each
its own process) on a temporary data directory. Each sample sends ``createSession`` over
GraphQL and polls ``session(id)`` every 20 ms until RUNNING (the agent has started the
container and the views show it); the session is then terminated. The baseline is
``docker run -d`` of the same image and command, timed until ``docker inspect`` says running.

Run:  python -m bench.docker_latency [--samples 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from jetyard.runtime.natsserver import free_port
from tests.e2e.conftest import TEST_IMAGE, Jetyard
from tests.e2e.test_session_path import TERMINATE, create, wait_status


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


def jetyard(samples: int) -> list[float]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        stack = Jetyard(Path(tmp) / "data", free_port(), "docker").start()
        try:
            for _ in range(samples):
                start = time.perf_counter()
                created = create(stack, cpu="0.5", memory="32m", command=["sleep", "60"])
                session_id = created["data"]["createSession"]["sessionId"]
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    status = stack.gql(
                        "query($id: ID!) { session(id: $id) { status } }", id=session_id
                    )["data"]["session"]
                    if status and status["status"] == "RUNNING":
                        break
                    time.sleep(0.02)
                out.append((time.perf_counter() - start) * 1000)
                stack.gql(TERMINATE, id=session_id)
                wait_status(stack, session_id, {"TERMINATED"})
        finally:
            stack.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    bare = bare_docker(args.samples)
    ours = jetyard(args.samples)
    print(f"# create → RUNNING, {args.samples} samples each, image {TEST_IMAGE}")
    for label, values in (
        ("bare docker run -d → running", bare),
        ("jetyard createSession → RUNNING", ours),
    ):
        print(
            f"{label:<34} p50 {statistics.median(values):7.1f} ms"
            f"   p99 {_pct(values, 0.99):7.1f} ms"
        )


if __name__ == "__main__":
    main()
