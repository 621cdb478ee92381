"""What the user-command tests share: an environment of the test's own (its config home and
stack registry in the test's directory, no ``JETYARD_*`` credentials inherited), the
``jetyard`` command and the README's example script run in it, and a stack that registers
itself there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jetyard.runtime.natsserver import free_port
from tests.e2e.conftest import Jetyard

JETYARD = str(Path(sys.executable).parent / "jetyard")
EXAMPLE = Path(__file__).parents[2] / "examples" / "sdk_quickstart.py"
INHERITED = (
    "JETYARD_ENDPOINT", "JETYARD_ACCESS_KEY", "JETYARD_SECRET_KEY", "JETYARD_DATA_DIR",
    "JETYARD_NATS_URL", "JETYARD_NATS_TOKEN", "JETYARD_PROJECTIONS_DATABASE_URL",
)  # fmt: skip


def user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in INHERITED}
    return {
        **env,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "runtime"),
        **extra,
    }


def stack_for(tmp_path: Path, env: dict[str, str], backend: str) -> Jetyard:
    """A stack that registers in ``env``'s registry, with ports of its own."""
    ports = {"XDG_RUNTIME_DIR": env["XDG_RUNTIME_DIR"],
             "JETYARD_APPPROXY_PORT": str(free_port())}  # fmt: skip
    return Jetyard(tmp_path / "data", free_port(), backend, env=ports)


def jetyard(
    env: dict[str, str], *args: str, typed: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [JETYARD, *args], env=env, input=typed, capture_output=True, text=True, timeout=timeout
    )


def keypair_env(stack: Jetyard) -> dict[str, str]:
    """The stack's gateway and its superadmin's keypair, as ``JETYARD_*`` variables."""
    return {
        "JETYARD_ENDPOINT": stack.url,
        "JETYARD_ACCESS_KEY": stack.admin["access_key"],
        "JETYARD_SECRET_KEY": stack.admin["secret_key"],
    }


def example(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``examples/sdk_quickstart.py`` run as the README says, with ``args`` as its command."""
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args], env=env, capture_output=True, text=True, timeout=120
    )
