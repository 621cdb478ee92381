"""Kernel-to-kernel TCP throughput across hosts over a multi-node session's VXLAN overlay,
against host-to-host throughput over the same link, in the same run (issue 27: goal >= 0.8).

The lab of ``tests/integration/cross_host_support.py``: two network namespaces on one lab
bridge, each with its own Docker engine and agent, the real scheduler placing a 2-kernel
session on both. One TCP stream for ``--seconds`` from main1 to sub1 (their network namespaces:
the kernels' own interfaces on the session's bridges, joined by the VXLAN devices), then from
host a to host b (the namespaces' own lab interfaces), alternating ``--rounds`` times. The same
program (Python, 4 MiB writes and reads) sends and receives on both paths, run in the kernel's
network namespace with ``nsenter`` (busybox, the test image, has no tool that is not itself
the bottleneck); the receiver counts bytes from the first to the last. Prints each path's
median, the ratio, and exits 1 below the goal.

Run (root: it makes namespaces and engines):
    python -m bench.cross_host [--seconds 5] [--rounds 5] [--pin]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.integration.cross_host_support import CrossHost, Server, cross_host

GOAL = 0.8
PINNED = (("taskset", "-c", "0"), ("taskset", "-c", "1"))
"""``--pin``: sender on CPU 0, receiver on CPU 1, on both paths. Then the sender's CPU does all
the kernel's work of the path (veth delivers in the sender's context), so the ratio is the
paths' CPU cost per byte."""
PORT = 5201
RECEIVE = """
import socket, sys, time
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", int(sys.argv[1]))); server.listen(1)
print("ready", flush=True)
connection, _ = server.accept()
buffer = bytearray(4 << 20); view = memoryview(buffer); total = 0; first = None
while True:
    n = connection.recv_into(view)
    if not n:
        break
    if first is None:
        first = time.monotonic()
    total += n
print(total, time.monotonic() - first, flush=True)
"""
SEND = """
import socket, sys, time
connection = socket.create_connection((sys.argv[1], int(sys.argv[2])))
chunk = bytes(4 << 20); end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    connection.sendall(chunk)
connection.close()
"""


def in_kernel(node: Server, container: str, argv: Sequence[str]) -> list[str]:
    """``argv`` in the network namespace of a kernel's container (its own interface)."""
    pid = node.docker("inspect", "-f", "{{.State.Pid}}", container).stdout.strip()
    return ["nsenter", f"--net=/proc/{pid}/ns/net", *argv]


def stream(
    receiver: list[str], sender: list[str], target: str, seconds: float, pin: bool = False
) -> float:
    """One TCP stream's goodput in Gbit/s."""
    python = sys.executable
    sender_cpu, receiver_cpu = PINNED if pin else ((), ())
    with subprocess.Popen(
        [*receiver, *receiver_cpu, python, "-c", RECEIVE, str(PORT)],
        stdout=subprocess.PIPE,
        text=True,
    ) as listening:
        assert listening.stdout is not None
        assert listening.stdout.readline().strip() == "ready"
        subprocess.run(
            [*sender, *sender_cpu, python, "-c", SEND, target, str(PORT), str(seconds)],
            check=True, timeout=seconds + 30,
        )  # fmt: skip
        total, elapsed = listening.stdout.readline().split()
    return int(total) * 8 / float(elapsed) / 1e9


async def measure(
    lab: CrossHost, seconds: float, rounds: int, pin: bool
) -> tuple[list[float], list[float]]:
    session = await lab.session()
    (main_node, main), (sub_node, sub) = lab.node_of(session, 0), lab.node_of(session, 1)
    sub_address = await lab.address_of(session, 1)
    kernel_receiver, kernel_sender = in_kernel(sub_node, sub, []), in_kernel(main_node, main, [])
    host_receiver, host_sender = sub_node.host.nsenter([]), main_node.host.nsenter([])
    kernels: list[float] = []
    hosts: list[float] = []
    for _ in range(rounds):
        kernels.append(
            await asyncio.to_thread(
                stream, kernel_receiver, kernel_sender, sub_address, seconds, pin
            )
        )
        hosts.append(
            await asyncio.to_thread(
                stream, host_receiver, host_sender, sub_node.host.address, seconds, pin
            )
        )
    await lab.terminate(session.id)
    return kernels, hosts


async def run(seconds: float, rounds: int, pin: bool) -> bool:
    with tempfile.TemporaryDirectory(prefix="jy-xh-") as tmp:
        async with cross_host(Path(tmp)) as lab:
            kernels, hosts = await measure(lab, seconds, rounds, pin)
    kernel, host = statistics.median(kernels), statistics.median(hosts)
    ratio = kernel / host
    print(f"kernel to kernel (VXLAN overlay): {kernel:.2f} Gbit/s  rounds {_fmt(kernels)}")
    print(f"host to host (same link):         {host:.2f} Gbit/s  rounds {_fmt(hosts)}")
    print(f"ratio {ratio:.2f} (goal >= {GOAL}){'  pinned' if pin else ''}")
    return ratio >= GOAL


def _fmt(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each stream")
    parser.add_argument("--rounds", type=int, default=5, help="streams per path (alternating)")
    parser.add_argument("--pin", action="store_true", help="sender on CPU 0, receiver on CPU 1")
    args = parser.parse_args()
    sys.exit(0 if asyncio.run(run(args.seconds, args.rounds, args.pin)) else 1)


if __name__ == "__main__":
    main()
