"""The data directory's lock and the orphaned-server sweep of ``jetyard up``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from jetyard.runtime.data_dir import DataDirBusyError, DataDirLock, stop_orphaned_server
from jetyard.runtime.natsserver import NatsServer, server_binary


def test_a_second_holder_is_refused_until_the_first_dies(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path;"
            "from jetyard.runtime.data_dir import DataDirLock;"
            "lock = DataDirLock(Path(sys.argv[1])); lock.acquire();"
            "print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        with pytest.raises(DataDirBusyError, match=rf"in use by jetyard up \(pid {holder.pid}\)"):
            DataDirLock(tmp_path).acquire()
    finally:
        holder.kill()  # SIGKILL: the kernel drops the flock with the process
        holder.wait()
    lock = DataDirLock(tmp_path)
    lock.acquire()
    lock.release()


def test_an_orphaned_server_is_found_by_its_pidfile_and_stopped(tmp_path: Path) -> None:
    server = NatsServer(data_dir=tmp_path / "nats")
    server.start()
    # Detach it from our bookkeeping, as if its parent had died by kill -9 without the
    # parent-death signal reaching it.
    pid = server.process.pid if server.process else 0
    pidfile = tmp_path / "nats" / "nats-server.pid"
    deadline = time.monotonic() + 5
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert int(pidfile.read_text()) == pid

    assert stop_orphaned_server(pidfile) == pid
    assert server.process is not None
    assert server.process.wait(5) is not None


def test_a_stale_pidfile_naming_another_program_is_ignored(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        pidfile = tmp_path / "nats-server.pid"
        pidfile.write_text(str(sleeper.pid))
        assert stop_orphaned_server(pidfile) is None
        assert sleeper.poll() is None  # not ours: left alone
    finally:
        sleeper.kill()
        sleeper.wait()
    assert server_binary().endswith("nats-server")
