"""The data directory of ``jetyard up``: its lock, finding a server orphaned by a kill -9, the
kept NATS port, the services' ready files, and the ends of their logs."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from pathlib import Path
from typing import IO

from events.audit.seals import new_key_files
from jetyard.runtime.natsserver import free_port, port_is_free


class DataDirBusyError(RuntimeError):
    pass


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


def kept_port(path: Path, wanted: int = 0, default: int | None = None) -> tuple[int, int | None]:
    """The port to use this start, and the kept one when it could not be used.

    The port is kept in ``path``: made on the first start (``default`` if it is free, else a
    free one, with why on the file's second line), replaced by an explicit ``wanted`` one. A
    kept port another program took is not stolen: this start uses a free one, and the kept one
    stays kept for the next start."""
    if wanted:
        path.write_text(f"{wanted}\n# chosen when jetyard up was started\n")
        return wanted, None
    try:
        kept = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        if default is not None and port_is_free(default):
            kept, why = default, ""
        else:
            kept = free_port()
            why = "" if default is None else f"# {default} was in use when this was made\n"
        path.write_text(f"{kept}\n{why}")
        return kept, None
    if port_is_free(kept):
        return kept, None
    return free_port(), kept


def _why_kept(path: Path) -> str:
    lines = path.read_text().splitlines() if path.exists() else []
    return lines[1].lstrip("# ").strip() if len(lines) > 1 else "kept from an earlier start"


def kept_service_port(
    data_dir: Path, name: str, default: int, wanted: int = 0, what: str = ""
) -> tuple[int, str | None]:
    """A service's port kept in ``<data-dir>/<name>.port`` (``kept_port``), and, whenever it
    is not ``default`` (the port the README names), a sentence saying why."""
    path = data_dir / f"{name}.port"
    port, taken = kept_port(path, wanted, default)
    said = what or name
    if taken is not None:
        return port, f"the {said} port {taken} (kept in {path}) is taken; using {port} this time"
    if port == default:
        return port, None
    return port, (
        f"the {said} port is {port}, not {default}: {_why_kept(path)} (kept in {path}; "
        f"remove that file to try {default} again)"
    )


def kept_nats_port(data_dir: Path, wanted: int) -> tuple[int, str | None]:
    """The NATS port for this start, and a warning when it is not the kept one.

    The port is kept in ``<data-dir>/nats.port`` (``kept_port``) so that agents on other
    machines, given ``nats.env`` once, reconnect after ``jetyard up`` restarts.
    """
    path = data_dir / "nats.port"
    port, taken = kept_port(path, wanted)
    if taken is None:
        return port, None
    return port, (
        f"the NATS port {taken} (kept in {path}) is taken by another program; using {port} "
        f"this time: agents on other machines cannot rejoin until {taken} is free again "
        f"(or give them the new nats.env)"
    )


def ready_file(data_dir: Path, service: str) -> Path:
    """Where ``jetyard serve <service>`` says it is ready (its pid), for ``jetyard up``."""
    return data_dir / "run" / f"{service}.ready"


def mark_ready(path: Path) -> None:
    # Written whole, then renamed: a reader never sees half a pid.
    partial = path.with_name(path.name + ".partial")
    partial.write_text(f"{os.getpid()}\n")
    os.replace(partial, path)


def ready_pid(path: Path) -> int | None:
    """The pid that wrote the ready file; a SIGKILLed service leaves its file behind, so a
    reader compares it with the pid it started."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def last_lines(path: Path, count: int = 5) -> list[str]:
    """The last non-empty lines of a log, read from its end (logs grow across restarts)."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 16_384))
            tail = log.read().decode(errors="replace")
    except OSError:
        return []
    return [line for line in tail.splitlines() if line.strip()][-count:]


SEAL_KEY_FILE = "seal.key"
"""The sealer's signing key in the data directory (owner-only; its public half in
``seal.key.pub``): apart from ``nats.token``, which agents on other machines are given."""


def seal_key(data_dir: Path) -> Path:
    """The data directory's sealing key, made on first use."""
    path = data_dir / SEAL_KEY_FILE
    if not path.exists():
        new_key_files(path)
    return path
