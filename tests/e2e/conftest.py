"""``jetyard up`` as a user runs it: a child process on a temp data dir, driven over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from jetyard.runtime.natsserver import free_port
from jetyard.sdk import JetyardAuth

TEST_IMAGE = os.environ.get("JETYARD_TEST_IMAGE", "jetyard-busybox:latest")
_started: list[Jetyard] = []
"""Every stack started by the running test (``stop_what_the_test_started`` empties it)."""


@dataclass
class Jetyard:
    data_dir: Path
    port: int
    backend: str
    env: dict[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None
    args: tuple[str, ...] = ()
    """More arguments for ``jetyard up`` (``--stop-sessions``)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        """What ``jetyard up`` printed (every start of this stack, one after the other)."""
        return self.data_dir.parent / f"up-{self.port}.log"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_output(self, text: str, *, after: int = 0, timeout: float = 60.0) -> int:
        """Wait until ``up`` has printed ``text`` (after offset ``after``); its offset."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.output().find(text, after)
            if found >= 0:
                return found
            time.sleep(0.2)
        raise AssertionError(f"jetyard up never said {text!r}; it said:\n{self.output()}")

    def start(self, *, timeout: float = 60.0) -> Jetyard:
        """Start ``jetyard up`` and wait until its API answers healthy."""
        self.launch()
        try:
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()  # a start that fails leaves no stack running
            raise
        return self

    def launch(self) -> Jetyard:
        """Start ``jetyard up`` without waiting for anything."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "jetyard"),
                "up",
                "--data-dir",
                str(self.data_dir),
                "--gateway-port",
                str(self.port),
                "--agent-backend",
                self.backend,
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(self.env or {})},
        )
        _started.append(self)
        return self

    def _wait_healthy(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jetyard up exited with {self.process.returncode}")
            try:
                healthy = httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
                # The first start also creates the superadmin the tests act as.
                if healthy and (self.data_dir / "admin.json").exists():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise TimeoutError("jetyard up did not become healthy")

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def pid_of(self, service: str) -> int:
        return int((self.data_dir / "run" / f"{service}.pid").read_text())

    def nats_env(self) -> dict[str, str]:
        """``<data-dir>/nats.env``: what an agent on another machine is given."""
        lines = (self.data_dir / "nats.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    @property
    def admin(self) -> dict[str, str]:
        """The superadmin `jetyard up` created on the first start."""
        found: dict[str, str] = json.loads((self.data_dir / "admin.json").read_text())
        return found

    @property
    def auth(self) -> JetyardAuth:
        return JetyardAuth(self.admin["access_key"], self.admin["secret_key"])

    def gql(self, query: str, **variables: Any) -> dict[str, Any]:
        response = httpx.post(
            f"{self.url}/graphql",
            json={"query": query, "variables": variables},
            timeout=30,
            auth=self.auth,
        )
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body


@pytest.fixture(autouse=True)
def stop_what_the_test_started() -> Iterator[None]:
    """A test that fails before it stops its stack would leave ``jetyard up`` running past
    the session (it is not the child of a process that dies with pytest). A stack of a
    module fixture, started before the test, is the fixture's to stop."""
    before = len(_started)
    yield
    while len(_started) > before:
        stack = _started.pop()
        if stack.process is not None and stack.process.poll() is None:
            stack.kill()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"never {what} within {timeout}s")


@pytest.fixture
def jetyard_docker(tmp_path: Path) -> Iterator[Jetyard]:
    stack = Jetyard(tmp_path / "data", free_port(), "docker").start()
    yield stack
    stack.stop()
