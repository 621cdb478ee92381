"""The data directory of ``jetyard up``: its lock, and finding a server orphaned by a kill -9."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from pathlib import Path
from typing import IO


class DataDirBusyError(RuntimeError):
    pass


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "jetyard"


class DataDirLock:
    """An exclusive flock on ``<data-dir>/jetyard.lock``, held for the life of the process.

    nats-server takes no lock on its store (two servers on one store corrupt it), so this lock
    is what keeps a second ``jetyard up`` off a directory in use. The kernel drops it when the
    holder dies, even by SIGKILL.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "jetyard.lock"
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 (held until release)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise DataDirBusyError(
                f"{self.path.parent} is in use by {holder}: stop it, or pick another --data-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"jetyard up (pid {os.getpid()})\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def _is_nats_server(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return Path(cmdline.decode(errors="replace")).name == "nats-server"


def stop_orphaned_server(pidfile: Path, *, timeout: float = 10.0) -> int | None:
    """Stop a nats-server left running on this data dir by a killed ``jetyard up``.

    Called with the data-dir lock held, so a live server named by the pidfile can only be an
    orphan (its parent died without the parent-death signal reaching it). Returns its pid.
    """
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    if not _is_nats_server(pid):
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _is_nats_server(pid):
        time.sleep(0.05)
    if _is_nats_server(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pid
