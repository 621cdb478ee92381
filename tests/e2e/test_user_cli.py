"""The user commands as a newcomer types them, on a real ``jetyard up`` (simulated backend:
its kernels obey ``exit N``, ``print N SECONDS`` and ``sleep S``):

- ``jetyard login`` with a keypair (the secret key piped in) finds the running stack's
  gateway and keeps the credentials in a file only its owner can read;
- ``jetyard run`` streams a batch session's output in order and exits with its exit code; an
  interactive one prints its id; ``ps`` (live, ``--all``, ``--json``), ``logs`` (all, ``-f``
  one kernel), ``apps`` (the list, a URL) and ``rm`` act on them;
- a password login keeps a token and never the password; the environment's keypair wins over
  the file; ``logout`` removes it, and the commands then say to log in."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.e2e.conftest import TEST_IMAGE, wait_until
from tests.e2e.user_support import jetyard, stack_for, user_env


def test_login_run_ps_logs_apps_rm_logout(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    stack = stack_for(tmp_path, env, "simulated").start()
    admin = stack.admin

    before = jetyard(env, "ps")
    assert before.returncode == 2 and "run `jetyard login`" in before.stderr, before.stderr
    signed = jetyard(env, "login", "--access-key", admin["access_key"],
                     typed=admin["secret_key"] + "\n")  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    assert f"signed in to {stack.url} as " in signed.stdout and "(superadmin" in signed.stdout
    config = tmp_path / "config" / "jetyard" / "config.toml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    printed = jetyard(env, "run", TEST_IMAGE, "--cpu", "0.5", "--memory", "64m",
                      "--", "print", "3", "0.3")  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    assert [line for line in printed.stdout.splitlines() if line.startswith("line ")] == [
        "line 1", "line 2", "line 3",
    ]  # fmt: skip
    assert "RUNNING" in printed.stderr and "TERMINATED" in printed.stderr
    failed = jetyard(env, "run", TEST_IMAGE, "--", "exit", "3")
    assert failed.returncode == 3, (failed.stdout, failed.stderr)

    started = jetyard(env, "run", "--type", "interactive", TEST_IMAGE, "--", "sleep", "600")
    assert started.returncode == 0, started.stderr
    session_id = started.stdout.strip()

    def live() -> list[dict[str, str]]:
        listed = jetyard(env, "ps", "--json")
        assert listed.returncode == 0, listed.stderr
        return [json.loads(line) for line in listed.stdout.splitlines()]

    wait_until(lambda: [(s["id"], s["status"]) for s in live()] == [(session_id, "RUNNING")],
               "the interactive session alone listed RUNNING by ps")  # fmt: skip
    every = [json.loads(line) for line in jetyard(env, "ps", "--all", "--json").stdout.splitlines()]
    assert [s["exitCode"] for s in every] == [0, 3, None]
    assert session_id in jetyard(env, "ps").stdout  # the table, whole ids in a pipe

    batch_id = every[0]["id"]
    assert "line 3" in jetyard(env, "logs", batch_id).stdout
    one_kernel = jetyard(env, "logs", batch_id, "-f", "--kernel", "0")
    assert one_kernel.returncode == 0 and "line 2\nline 3\n" in one_kernel.stdout
    missing = jetyard(env, "logs", "no-such-session")
    assert missing.returncode == 1 and "there is no session" in missing.stderr

    assert jetyard(env, "apps", session_id, "--json").stdout == ""  # the image declares none
    url = jetyard(env, "apps", session_id, "terminal")
    assert url.returncode == 0 and f"/apps/{session_id}/terminal/" in url.stdout, url.stderr
    assert jetyard(env, "rm", session_id).returncode == 0
    assert jetyard(env, "rm", "no-such-session").returncode == 1

    password = jetyard(env, "login", "--email", admin["email"], typed=admin["password"] + "\n")
    assert password.returncode == 0, password.stderr
    kept = config.read_text()
    assert "token = " in kept and admin["password"] not in kept and "secret_key" not in kept
    assert len(jetyard(env, "ps", "--all", "--json").stdout.splitlines()) == 3
    bogus = {**env, "JETYARD_ACCESS_KEY": "AKNOSUCHKEY", "JETYARD_SECRET_KEY": "x"}
    refused = jetyard(bogus, "ps")
    assert refused.returncode == 1 and "no keypair has the access key" in refused.stderr

    assert jetyard(env, "logout").returncode == 0 and not config.exists()
    assert jetyard(env, "ps").returncode == 2
    stack.stop()
