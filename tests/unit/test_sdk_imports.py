"""``jetyard.sdk`` stands alone: imported in a fresh interpreter where the CLI's dependencies
(rich, argcomplete) cannot be imported, it works, and it loads neither the CLI
(``jetyard.cli``) nor the runtime (``jetyard.runtime``). The import contracts in
pyproject.toml say the same of the import statements; this checks what a real import loads."""

from __future__ import annotations

import json
import subprocess
import sys

# A module set to None in sys.modules raises ImportError when imported.
PROBE = """
import json, sys
sys.modules["rich"] = None
sys.modules["argcomplete"] = None
import jetyard.sdk
from jetyard.sdk import AsyncClient, Client, JetyardError
client = AsyncClient("http://127.0.0.1:9", "AK", "SK")
parts = (client.sessions, client.apps, client.admin, client.usage, client.folders)
loaded = sorted(
    name for name in sys.modules
    if sys.modules[name] is not None
    and name.split(".")[0] in ("rich", "argcomplete", "jetyard")
)
print(json.dumps({"loaded": loaded, "parts": [type(p).__name__ for p in parts]}))
"""


def test_the_sdk_imports_without_the_cli_its_dependencies_or_the_runtime() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["parts"] == ["Sessions", "Apps", "Admin", "Usage", "Folders"]
    loaded = found["loaded"]
    assert "jetyard.sdk" in loaded
    assert not [name for name in loaded if name.split(".")[0] in ("rich", "argcomplete")]
    assert not [name for name in loaded if name.startswith(("jetyard.cli", "jetyard.runtime"))]
