"""``jetyard up`` as a user runs it: a child process on a temp data dir, driven over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from jetyard.natsserver import free_port
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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 60.0) -> Jetyard:
        log = open(self.data_dir.parent / f"up-{self.port}.log", "ab")  # noqa: SIM115
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
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(self.env or {})},
        )
        _started.append(self)
        try:
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()  # a start that fails leaves no stack running
            raise
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
    the session (it is not the child of a process that dies with pytest)."""
    yield
    while _started:
        stack = _started.pop()
        if stack.process is not None and stack.process.poll() is None:
            stack.kill()


@pytest.fixture
def jetyard_docker(tmp_path: Path) -> Iterator[Jetyard]:
    stack = Jetyard(tmp_path / "data", free_port(), "docker").start()
    yield stack
    stack.stop()
