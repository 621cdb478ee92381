"""How the operator commands find the stack to act on (``jetyard.stacks``,
``jetyard.cli.operator_target``): the pointers ``jetyard up`` leaves, readable by their owner
alone; a dead ``up``'s pointer ignored and removed; none running, or several, a clear error
instead of a default; a data directory given explicitly read through its ``nats.env`` and
``run/stack.json``."""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jetyard import stacks
from jetyard.cli.operator_target import nats_settings, projection_settings
from jetyard.stacks import NoStackError, StackRecord


@pytest.fixture(autouse=True)
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "runtime"))
    for name in ("JETYARD_DATA_DIR", "JETYARD_NATS_URL", "JETYARD_PROJECTIONS_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "runtime" / "jetyard" / "stacks"


@pytest.fixture
def fake_up() -> Iterator[int]:
    """A live process whose command line reads as a ``jetyard up``."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "jetyard", "up"])
    deadline = time.monotonic() + 10
    while not stacks.is_up_process(child.pid):  # between fork and exec it is still pytest
        assert time.monotonic() < deadline, "the fake `jetyard up` never started"
        time.sleep(0.01)
    yield child.pid
    child.kill()
    child.wait()


def _stack(tmp_path: Path, name: str, pid: int) -> StackRecord:
    data = tmp_path / name
    data.mkdir()
    (data / "nats.env").write_text(f"JETYARD_NATS_URL=nats://127.0.0.1:{pid % 60000}\n"
                                   f"JETYARD_NATS_TOKEN=tok-{name}\n")  # fmt: skip
    record = StackRecord(str(data), pid, "http://127.0.0.1:9", "nats://x", f"sqlite:///{name}")
    stacks.register(record)
    return record


def _args(**given: str | None) -> argparse.Namespace:
    return argparse.Namespace(**{"data_dir": None, "url": None, "token": None, **given})


def test_the_one_running_stack_is_found_and_its_files_are_private(
    tmp_path: Path, registry: Path, fake_up: int
) -> None:
    record = _stack(tmp_path, "a", fake_up)
    assert stacks.running() == [record] and stacks.the_running_one() == record
    for path in (*registry.iterdir(), Path(record.data_dir) / stacks.STACK_FILE):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(registry.stat().st_mode) == 0o700
    settings = nats_settings(_args())
    assert (settings.url, settings.token) == (f"nats://127.0.0.1:{fake_up % 60000}", "tok-a")
    assert projection_settings(_args()).database_url == "sqlite:///a"
    stacks.unregister(Path(record.data_dir), os.getpid())  # not its pid: kept
    assert stacks.running() == [record]
    stacks.unregister(Path(record.data_dir), fake_up)
    assert stacks.running() == []


def test_a_dead_ups_pointer_is_dropped_and_none_running_is_an_error(
    tmp_path: Path, registry: Path
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _stack(tmp_path, "gone", dead.pid)
    with pytest.raises(NoStackError, match=r"no `jetyard up` is running.*--data-dir"):
        nats_settings(_args())
    assert list(registry.iterdir()) == []


def test_several_running_stacks_need_a_choice(tmp_path: Path, fake_up: int) -> None:
    first = _stack(tmp_path, "a", fake_up)
    second = _stack(tmp_path, "b", fake_up)
    with pytest.raises(NoStackError, match="2 stacks are running") as said:
        nats_settings(_args())
    assert first.data_dir in str(said.value) and second.data_dir in str(said.value)
    chosen = nats_settings(_args(data_dir=second.data_dir))
    assert chosen.token == "tok-b"


def test_an_explicit_data_dir_or_url_needs_no_running_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "old"
    data.mkdir()
    with pytest.raises(NoStackError, match=r"nats\.env is missing"):
        nats_settings(_args(data_dir=str(data)))
    (data / "nats.env").write_text("JETYARD_NATS_URL=nats://127.0.0.1:4999\n")
    assert nats_settings(_args(data_dir=str(data))).url == "nats://127.0.0.1:4999"
    views = projection_settings(_args(data_dir=str(data)))
    assert views.database_url == f"sqlite+aiosqlite:///{data / 'views.db'}"
    monkeypatch.setenv("JETYARD_DATA_DIR", str(data))
    assert nats_settings(_args()).url == "nats://127.0.0.1:4999"
    assert nats_settings(_args(url="nats://elsewhere:1")).url == "nats://elsewhere:1"


def test_of_several_stacks_the_one_on_the_users_default_data_dir_is_chosen(
    tmp_path: Path, fake_up: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home-data"))
    (tmp_path / "home-data").mkdir()
    _stack(tmp_path, "someone-elses", fake_up)
    mine = _stack(tmp_path / "home-data", "jetyard", fake_up)
    assert stacks.default_data_dir() == Path(mine.data_dir)
    assert stacks.the_running_one() == mine
    assert nats_settings(_args()).token == "tok-jetyard"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "elsewhere"))
    with pytest.raises(NoStackError, match="none on the default data directory"):
        stacks.the_running_one()
