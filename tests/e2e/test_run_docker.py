"""``jetyard run`` on a real ``jetyard up --agent-backend docker``, signed in as the README's
vfolder section does (``JETYARD_ENDPOINT``, ``JETYARD_ACCESS_KEY``, ``JETYARD_SECRET_KEY``):
``jetyard run jetyard-busybox:latest -- sh -c 'echo hi; exit 3'`` prints ``hi`` and exits 3;
the README's SDK example (``examples/sdk_quickstart.py``) runs as written and exits with its
session's code."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import TEST_IMAGE
from tests.e2e.user_support import example, jetyard, keypair_env, stack_for, user_env


def test_run_prints_the_output_and_exits_with_the_sessions_code(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    stack = stack_for(tmp_path, env, "docker").start()
    env |= keypair_env(stack)

    done = jetyard(env, "run", TEST_IMAGE, "--", "sh", "-c", "echo hi; exit 3")
    assert (done.stdout, done.returncode) == ("hi\n", 3), done.stderr
    assert "TERMINATED" in done.stderr

    ran = example(env)
    assert ran.returncode == 3, (ran.stdout, ran.stderr)
    assert "  | hello from jetyard\n  | the answer is 42\n" in ran.stdout, ran.stdout
    stack.stop()
