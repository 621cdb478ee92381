"""The CLI as a script uses it, on a real ``jetyard up`` stack on Docker: ``jetyard shell S --
CMD...`` runs without a TTY and exits with the command's code, its stdout and stderr apart and
clean (no banner, no ``\\r``, no terminal queries); piped lines run in the shell the same way;
a session is named by its id, its name or an 8-character id prefix (``shell``, ``logs``,
``apps``, ``rm``); ``jetyard images`` lists what the nodes hold; a session ended by ``rm``
shows ``terminated``, not ``failed (exit 143)``."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.ids import new_id
from tests.e2e.appproxy_support import running_stack
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until
from tests.e2e.test_vfolders import JETYARD, User, admin_of

STATUS = "query($id: ID!) { session(id: $id) { status } }"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Jetyard]:
    yield from running_stack(tmp_path)


def _jetyard(user: User, *args: str, typed: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "JETYARD_ENDPOINT": user.stack.url,
        "JETYARD_ACCESS_KEY": user.access_key,
        "JETYARD_SECRET_KEY": user.secret_key,
    }
    return subprocess.run(
        [JETYARD, *args], input=typed, stdin=None if typed is not None else subprocess.DEVNULL,
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _running(user: User, session_id: str) -> None:
    def running() -> bool:
        found = user.gql(STATUS, id=session_id)["data"]["session"] or {}
        return found.get("status") == "RUNNING"

    wait_until(running, f"session {session_id} RUNNING", 90)


def test_scripted_shell_names_images_and_a_requested_end(stack: Jetyard) -> None:
    me = admin_of(stack)
    name = f"scripted-{new_id()[:6]}"
    session_id = me.start_session("echo hello-$((20+22)); exec sleep 600", [], name=name)
    _running(me, session_id)
    prefix = session_id[:8]

    done = _jetyard(
        me, "shell", prefix, "--", "sh", "-c", "echo out-$((6*7)); echo err >&2; exit 7"
    )
    assert (done.returncode, done.stdout, done.stderr) == (7, "out-42\n", "err\n")

    by_name = _jetyard(me, "shell", name, "--", "cat", typed="piped through\n")
    assert (by_name.returncode, by_name.stdout, by_name.stderr) == (0, "piped through\n", "")
    lines = _jetyard(me, "shell", session_id, typed="echo caf\u00e9\nexit 5\n")
    assert (lines.returncode, lines.stdout, lines.stderr) == (5, "café\n", "")
    missing = _jetyard(me, "shell", prefix, "--", "no-such-program")
    assert missing.returncode in (126, 127), (missing.stdout, missing.stderr)

    for ref in (prefix, name):
        logs = _jetyard(me, "logs", ref)
        assert (logs.returncode, logs.stdout) == (0, "hello-42\n"), (ref, logs.stderr)
        apps = _jetyard(me, "apps", ref, "--json")
        assert apps.returncode == 0, (ref, apps.stderr)
    unknown = _jetyard(me, "logs", "0b489e7")
    assert unknown.returncode == 1 and "8 characters" in unknown.stderr, unknown.stderr

    images = _jetyard(me, "images", "--json")
    assert images.returncode == 0, images.stderr
    held = {i["name"]: i for i in map(json.loads, images.stdout.splitlines())}
    assert held[TEST_IMAGE]["nodes"] == 1 and held[TEST_IMAGE]["resourceGroups"], held

    def held_cpu() -> tuple[int, str]:
        quota = _jetyard(me, "quota", "--json")
        assert quota.returncode == 0, quota.stderr
        [keypair] = [
            q for q in map(json.loads, quota.stdout.splitlines()) if q["scope"] == "keypair"
        ]
        [cpu] = [s for s in keypair["slots"] if s["slot"] == "cpu"]
        return keypair["holding"], cpu["held"]

    holding, cpu = held_cpu()
    assert holding == 1 and float(cpu) > 0, (holding, cpu)
    shown = _jetyard(me, "quota")
    assert "held by running sessions / asked for by waiting ones / the limit" in shown.stderr

    removed = _jetyard(me, "rm", name)
    assert removed.returncode == 0 and removed.stdout.startswith(session_id), removed.stderr
    me.finished(session_id, frozenset({"TERMINATED"}))
    listed = _jetyard(me, "ps", "--all", "--json")
    ended = [json.loads(line) for line in listed.stdout.splitlines()]
    [row] = [s for s in ended if s["id"] == session_id]
    assert (row["endedAs"], row["exitCode"]) == ("terminated", 143), row
    assert held_cpu() == (0, "0")  # given back by the decision that ended it
    assert "failed" not in _jetyard(me, "ps", "--all").stdout
