"""The README's "Use your lab's registry" step, run as written (its ``.venv/bin/`` being the
suite's own venv) on a real ``jetyard up`` with Docker, signed in as the superadmin: the demo
registry starts, is added with its password on stdin, rescanned, and a session pulls and runs
its image, and the registry is stopped and its files removed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jetyard.runtime.natsserver import free_port
from tests.e2e.conftest import Jetyard
from tests.e2e.user_support import jetyard, user_env
from tests.registry_support import remove_local_image

ROOT = Path(__file__).parents[2]
pytestmark = pytest.mark.timeout(300)


def readme_step() -> str:
    readme = (ROOT / "README.md").read_text()
    step = readme[readme.index("## Use your lab's registry") :]
    start = step.index("```bash\n") + len("```bash\n")
    return step[start : step.index("```\n", start)]


def test_the_readmes_registry_step_runs_as_written(tmp_path: Path) -> None:
    stack = Jetyard(tmp_path / "data", free_port(), "docker").start()
    port = free_port()
    env = user_env(
        tmp_path / "walk", JETYARD_ENDPOINT=stack.url, DEMO_REGISTRY_PORT=str(port),
        DEMO_REGISTRY_DIR=str(tmp_path / "registry"),
    )  # fmt: skip
    try:
        signed = jetyard(env, "login", "--access-key", stack.admin["access_key"],
                         typed=stack.admin["secret_key"] + "\n")  # fmt: skip
        assert signed.returncode == 0, signed.stderr
        script = readme_step().replace(".venv/bin/", f"{Path(sys.executable).parent}/")
        walked = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=240)  # fmt: skip
        assert walked.returncode == 0, (walked.stdout, walked.stderr)
        assert "pulled and ran" in walked.stdout
        assert f"127.0.0.1:{port}/demo/busybox:1" in walked.stdout  # rescan and images list it
        assert not (tmp_path / "registry").exists()  # stopped and removed
    finally:
        subprocess.run(["bash", "scripts/demo-registry", "stop"], cwd=ROOT, env=env, check=False)
        stack.stop()
        remove_local_image(f"127.0.0.1:{port}/demo/busybox:1")
