"""Which ``jetyard up`` stacks run on this machine, and where their data lives: what the
operator commands (``jetyard log``, ``projections rebuild``, ``quarantine``, ``streams``) act
on when they are not told, and the gateway the SDK finds when it is given none. Written by the
runtime (``jetyard.runtime.supervisor``), read by the SDK (``jetyard.sdk.config``) and the CLI
(``jetyard.cli.operator_target``): it sits beside the three packages and imports none of them.

``jetyard up`` writes ``<data-dir>/run/stack.json`` (its pid, the gateway's URL, the NATS URL,
the views' database) and a pointer to it in ``$XDG_RUNTIME_DIR/jetyard/stacks/`` (else
``$XDG_STATE_HOME`` or ``~/.local/state``), both readable only by their owner, and removes the
pointer when it stops. A pointer whose ``up`` died (a ``kill -9``) is ignored and removed.
Reads and writes no subject.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

STACK_FILE = Path("run") / "stack.json"


class NoStackError(RuntimeError):
    """No running stack to act on, or more than one and none chosen; says what to give."""


@dataclass(frozen=True)
class StackRecord:
    data_dir: str
    pid: int
    gateway_url: str
    nats_url: str
    views_url: str


def registry_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "jetyard" / "stacks"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "jetyard" / "stacks"


def _pointer(data_dir: Path) -> Path:
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return registry_dir() / f"{digest}.json"


def _write_private(path: Path, text: str) -> None:
    """Written whole under a temporary name (mode 0600 from the start), then renamed."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(partial, path)


def register(record: StackRecord) -> None:
    data_dir = Path(record.data_dir)
    (data_dir / STACK_FILE).parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(asdict(record), indent=2) + "\n"
    _write_private(data_dir / STACK_FILE, text)
    registry_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
    _write_private(_pointer(data_dir), text)


def unregister(data_dir: Path, pid: int) -> None:
    """Remove the pointer if it is still this process's (a later ``up`` may own it)."""
    pointer = _pointer(data_dir)
    found = _read(pointer)
    if found is not None and found.pid == pid:
        pointer.unlink(missing_ok=True)


def _read(path: Path) -> StackRecord | None:
    try:
        return StackRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def is_up_process(pid: int) -> bool:
    """A live ``jetyard up`` (not a process that took a dead one's pid)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return "up" in (w.decode(errors="replace") for w in words) and any(
        b"jetyard" in w for w in words
    )


def running() -> list[StackRecord]:
    """The stacks whose ``jetyard up`` is alive, by data directory; stale pointers go."""
    found: list[StackRecord] = []
    for pointer in sorted(registry_dir().glob("*.json")):
        record = _read(pointer)
        if record is None or not is_up_process(record.pid):
            with contextlib.suppress(OSError):
                pointer.unlink()
            continue
        found.append(record)
    return sorted(found, key=lambda r: r.data_dir)


def recorded(data_dir: Path) -> StackRecord | None:
    """What the last ``jetyard up`` on ``data_dir`` recorded (running or not), if any."""
    return _read(data_dir / STACK_FILE)


def default_data_dir() -> Path:
    """Where ``jetyard up`` keeps its data when not told (``$XDG_DATA_HOME/jetyard``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "jetyard"


def preferred(stacks: list[StackRecord]) -> StackRecord | None:
    """Of the running stacks, the one to use without being told: the only one, else the one
    on this user's default data directory (others may be other people's, or tests')."""
    if len(stacks) == 1:
        return stacks[0]
    home = str(default_data_dir().resolve())
    return next((s for s in stacks if s.data_dir == home), None)


def the_running_one() -> StackRecord:
    """The stack to act on (``preferred``), else ``NoStackError`` saying what to give."""
    stacks = running()
    chosen = preferred(stacks)
    if chosen is not None:
        return chosen
    if not stacks:
        raise NoStackError(
            f"no `jetyard up` is running (none is registered in {registry_dir()}): "
            "start one, or say which data directory to use with --data-dir (or "
            "JETYARD_DATA_DIR), or which NATS server with --url (or JETYARD_NATS_URL)"
        )
    listed = ", ".join(f"{s.data_dir} (pid {s.pid})" for s in stacks)
    raise NoStackError(
        f"{len(stacks)} stacks are running, none on the default data directory "
        f"{default_data_dir()}: {listed}; pick one with --data-dir"
    )


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines, as ``jetyard up`` writes ``nats.env``."""
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
