"""Every ``jetyard`` process imports the command line, ``jetyard serve storage`` and ``serve
agent`` included: it must not pull in the gateway (strawberry, the whole API), which costs such
a process some 35 MiB it never uses (``test_storage_service`` holds the storage service to
100 MiB). Commands that need the gateway's code import it when they run."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("services.gateway.app", "services.gateway.schema", "strawberry")


def test_the_command_line_does_not_import_the_gateway() -> None:
    probe = f"import sys, jetyard.cli.main; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found == "[]", f"jetyard.cli.main imports {found}"
