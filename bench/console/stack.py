"""The stack under test: ``jetyard up --agent-backend simulated`` and ``bench.sched_agents`` on
a temporary directory, each process's CPU, and waiting for them to settle."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.console.support import ROOT, Popen, log
from jetyard.runtime.natsserver import free_port
from schemas.settings import NatsSettings


def _die_with_parent() -> None:
    # A bench killed with SIGKILL must not leave a stack behind: SIGTERM when we die.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Stack:
    """``jetyard up`` and the simulated agents on a temporary directory, removed at the end."""

    agents: int
    gpus: int
    rate_limit: int
    keep: bool = False
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="jy-console-")))
    port: int = field(default_factory=free_port)
    up: Popen | None = None
    sim: Popen | None = None

    @property
    def data(self) -> Path:
        return self.tmp / "data"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 240.0) -> None:
        self.up = self._spawn(
            "up",
            ["jetyard.cli", "up", "--data-dir", str(self.data), "--gateway-port", str(self.port),
             "--agent-backend", "simulated"],
            {"JETYARD_GATEWAY_RATE_LIMIT": str(self.rate_limit)},
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if self.up.poll() is not None or time.monotonic() > deadline:
                tail = (self.tmp / "up.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"jetyard up did not come up; it said:\n{tail}")
            time.sleep(0.5)
        self.sim = self._spawn(
            "agents",
            ["bench.sched_agents", str(self.agents), "--gpus", str(self.gpus)],
            self.nats_env(),
        )

    def _spawn(self, name: str, module: list[str], env: dict[str, str]) -> Popen:
        """``python -m module...`` with its output in ``<tmp>/<name>.log``."""
        out = os.open(self.tmp / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            return subprocess.Popen(
                [sys.executable, "-m", *module], cwd=ROOT, env={**os.environ, **env},
                stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
            )  # fmt: skip
        finally:
            os.close(out)

    def _healthy(self) -> bool:
        try:
            ok = httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
        return ok and (self.data / "admin.json").exists()

    def nats_env(self) -> dict[str, str]:
        lines = (self.data / "nats.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def nats(self) -> NatsSettings:
        env = self.nats_env()
        return NatsSettings(
            url=env["JETYARD_NATS_URL"], token=env["JETYARD_NATS_TOKEN"], request_timeout_s=10.0
        )

    def admin(self) -> dict[str, str]:
        found: dict[str, str] = json.loads((self.data / "admin.json").read_text())
        return found

    def pids(self) -> dict[str, int]:
        """The processes whose CPU the bench reads."""
        found: dict[str, int] = {}
        with contextlib.suppress(OSError, ValueError):
            found["nats-server"] = int((self.data / "nats" / "nats-server.pid").read_text())
        for name in ("gateway", "projections", "scheduler"):
            with contextlib.suppress(OSError, ValueError):
                found[name] = int((self.data / "run" / f"{name}.pid").read_text())
        if self.sim is not None:
            found["agents"] = self.sim.pid
        return found

    def stop(self) -> None:
        for child in (self.sim, self.up):
            if child is not None and child.poll() is None:
                child.send_signal(signal.SIGINT if child is self.up else signal.SIGTERM)
        for child in (self.sim, self.up):
            if child is None:
                continue
            try:
                child.wait(60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for name, text in self.logs().items():
            if "Traceback" in text:
                first = text[text.index("Traceback") :].splitlines()
                end = next((i for i, x in enumerate(first[1:], 1) if not x.startswith(" ")), 0)
                log(f"{name}: {text.count('Traceback')} tracebacks in its log; the first ends")
                log("\n".join(first[max(1, end - 6) : end + 1]))
        if self.keep:
            log(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def logs(self) -> dict[str, str]:
        paths = [self.tmp / "agents.log", *sorted((self.data / "logs").glob("*.log"))]
        return {p.stem: p.read_text(errors="replace") for p in paths if p.exists()}


class Cpu:
    """CPU seconds of the stack's processes between two readings."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.began = time.monotonic()

    def used(self) -> dict[str, float]:
        return {n: round(cpu_seconds(p) - self.start[n], 3) for n, p in self.pids.items()}

    def share(self) -> dict[str, float]:
        """% of a core per process since the first reading."""
        spent = max(time.monotonic() - self.began, 1e-6)
        return {n: round(s / spent * 100, 1) for n, s in self.used().items()}


async def settle(pids: dict[str, int], *, limit_pct: float = 25.0, max_s: float = 30.0) -> float:
    """Wait until the gateway and the server are near idle (the last page's subscriptions gone)."""
    watched = {k: v for k, v in pids.items() if k in ("gateway", "nats-server")}
    began = time.monotonic()
    while time.monotonic() - began < max_s:
        cpu = Cpu(watched)
        await asyncio.sleep(0.5)
        if sum(cpu.share().values()) < limit_pct:
            break
    return time.monotonic() - began
