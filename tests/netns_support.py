"""Hosts for tests that cross a network: each host a network namespace on this machine, joined
to a lab network (a Linux bridge in the root namespace, which is itself on the lab as the
"head" side), so that a partition is a link taken down, not a process killed. A host may run
its own Docker engine (its own ``dockerd``, data root, exec root and socket inside its
namespace), as a GPU server of the lab would.

Needs root and iproute2 (``ip``, ``nsenter``). Every name made here carries a random tag
(``jy<tag>…``), so runs never meet each other's namespaces, links or engines; everything is
removed on exit, processes first.

    with lab(tmp_path) as net:
        a, b = net.host("a"), net.host("b")
        engine = a.dockerd(); engine.load_image("jetyard-busybox:latest")
        a.popen(["nats-server", ...]); a.link_down(); a.link_up()
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NETNS_DIR = Path("/var/run/netns")


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def available() -> str | None:
    """Why hosts cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nsenter", "bridge"):
        if shutil.which(tool) is None:
            return f"{tool} (iproute2/util-linux) is missing"
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.200-250/16 that no interface of this machine is on."""
    taken = []
    for line in sh("ip", "-4", "-o", "addr").stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            taken.append(ipaddress.IPv4Interface(parts[parts.index("inet") + 1]).network)
    for _ in range(100):
        candidate = ipaddress.IPv4Network(
            f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(256)}.0/24"
        )
        if not any(candidate.overlaps(net) for net in taken):
            return candidate
    raise RuntimeError("no free /24 for a lab network")


@dataclass
class Engine:
    """A ``dockerd`` inside one host's namespace."""

    host: Host
    root: Path
    process: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def docker(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("docker", "-H", self.url, *argv, check=check)

    def load_image(self, name: str) -> None:
        """Copy an image from the machine's own engine (no registry needed)."""
        saved = subprocess.Popen(["docker", "save", name], stdout=subprocess.PIPE)
        subprocess.run(
            ["docker", "-H", self.url, "load", "-q"], stdin=saved.stdout, check=True,
            capture_output=True,
        )  # fmt: skip
        if saved.wait() != 0:
            raise RuntimeError(f"docker save {name} failed")

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dockerd of {self.host.name} exited; see {self.root}/log")
            if self.socket.exists() and self.docker("version", check=False).returncode == 0:
                return
            time.sleep(0.2)
        raise TimeoutError(f"dockerd of {self.host.name} not ready in {timeout}s")

    def stop(self) -> None:
        if self.process.poll() is None:
            # Its containers first (the engine stops them on exit too, but a clean stop of
            # each lets the test's own assertions see nothing left).
            ids = self.docker("ps", "-aq", check=False).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # The engine unmounts its layers on a clean exit; a killed one may leave some.
        for line in Path("/proc/mounts").read_text().splitlines():
            target = line.split()[1]
            if target.startswith(str(self.root)):
                sh("umount", "-l", target, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class Host:
    """One machine of the lab: a network namespace with one link to the lab bridge."""

    lab: Lab
    name: str
    netns: str
    link: str
    """The root side of its veth pair (taking it down cuts the host from the lab)."""
    address: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    engines: list[Engine] = field(default_factory=list)

    @property
    def path(self) -> str:
        return str(NETNS_DIR / self.netns)

    def nsenter(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host's network namespace. ``nsenter --net`` keeps the
        machine's mounts (``ip netns exec`` mounts a fresh /sys, which hides the cgroup
        hierarchy a dockerd needs)."""
        return ["nsenter", f"--net={self.path}", *argv]

    def run(self, argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.nsenter(argv), check=check, capture_output=True, text=True)

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """A process of this host's, stopped (TERM, then KILL) when the lab ends."""
        process = subprocess.Popen(self.nsenter(argv), **kwargs)
        self.processes.append(process)
        return process

    def link_down(self) -> None:
        sh("ip", "link", "set", self.link, "down")

    def link_up(self) -> None:
        sh("ip", "link", "set", self.link, "up")

    def dockerd(self, *, timeout: float = 60.0) -> Engine:
        """A Docker engine of this host's own: its data root, exec root (with its own
        containerd), socket and iptables rules, inside its namespace."""
        # Short: containerd's sockets live under the exec root, and a unix socket's path
        # has at most 107 bytes (a pytest tmp_path is too long).
        root = Path(f"/tmp/jy{self.lab.tag}-{self.name}")
        root.mkdir(parents=True, exist_ok=True)
        config = root / "daemon.json"
        config.write_text(json.dumps({}))
        log = open(root / "log", "ab")  # noqa: SIM115 (kept for the child)
        argv = [
            "dockerd",
            "--config-file", str(config),
            "--data-root", str(root / "data"),
            "--exec-root", str(root / "exec"),
            "--pidfile", str(root / "dockerd.pid"),
            "-H", f"unix://{root / 'docker.sock'}",
            "--cgroup-parent", f"{self.netns}-docker",
        ]  # fmt: skip
        process = subprocess.Popen(
            self.nsenter(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        engine = Engine(self, root, process)
        self.engines.append(engine)
        engine.wait_ready(timeout)
        return engine

    def stop(self) -> None:
        for engine in reversed(self.engines):
            engine.stop()
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # Anything else still in the namespace (a child that outlived its parent).
        for pid in sh("ip", "netns", "pids", self.netns, check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)


@dataclass
class Lab:
    """The lab network: a bridge in the root namespace (which has the first address, so the
    test process is on the lab too) and the hosts on it."""

    root: Path
    tag: str
    bridge: str
    subnet: ipaddress.IPv4Network
    hosts: dict[str, Host] = field(default_factory=dict)
    pairs: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        """The root namespace's own address on the lab."""
        return str(self.subnet.network_address + 1)

    def host(self, name: str) -> Host:
        index = len(self.hosts) + 1
        netns = f"jy{self.tag}-{name}"
        link = f"jy{self.tag}h{index}"
        address = str(self.subnet.network_address + 10 + index)
        sh("ip", "netns", "add", netns)
        host = Host(self, name, netns, link, address)
        self.hosts[name] = host
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", netns)
        sh("ip", "link", "set", link, "master", self.bridge, "up")
        sh("ip", "-n", netns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        sh("ip", "-n", netns, "link", "set", "eth0", "up")
        sh("ip", "-n", netns, "link", "set", "lo", "up")
        sh("ip", "-n", netns, "route", "add", "default", "via", self.address)
        return host

    def connect(self, a: Host, b: Host) -> None:
        """A second, direct link between two hosts (host routes to each other's lab address
        over it), so that cutting both from the lab leaves them talking to each other."""
        link = f"jy{self.tag}p{len(self.pairs) + 1}"
        self.pairs.append(link)
        sh("ip", "link", "add", f"{link}a", "netns", a.netns, "type", "veth",
           "peer", "name", f"{link}b", "netns", b.netns)  # fmt: skip
        for host, end, other in ((a, f"{link}a", b), (b, f"{link}b", a)):
            sh("ip", "-n", host.netns, "link", "set", end, "up")
            sh("ip", "-n", host.netns, "route", "add", f"{other.address}/32", "dev", end)

    def stop(self) -> None:
        for host in reversed(list(self.hosts.values())):
            host.stop()
        for host in self.hosts.values():
            sh("ip", "netns", "del", host.netns, check=False)
            sh("ip", "link", "del", host.link, check=False)
        sh("ip", "link", "del", self.bridge, check=False)


@contextlib.contextmanager
def lab(root: Path) -> Iterator[Lab]:
    """A lab network for one test; hosts are added with ``Lab.host``."""
    why = available()
    if why is not None:
        raise RuntimeError(f"cannot make test hosts: {why}")
    tag = secrets.token_hex(2)
    subnet = _free_subnet()
    bridge = f"jy{tag}lab"
    net = Lab(root, tag, bridge, subnet)
    sh("ip", "link", "add", bridge, "type", "bridge")
    # Frames between two hosts cross the bridge, and with br_netfilter loaded (Docker loads
    # it) they pass the root namespace's FORWARD chain, whose policy Docker sets to DROP.
    forward = ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
    try:
        sh("ip", "addr", "add", f"{net.address}/{subnet.prefixlen}", "dev", bridge)
        sh("ip", "link", "set", bridge, "up")
        if shutil.which("iptables") is not None:
            sh("iptables", "-I", *forward)
        yield net
    finally:
        net.stop()
        if shutil.which("iptables") is not None:
            sh("iptables", "-D", *forward, check=False)
