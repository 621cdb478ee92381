"""The README's Python example is ``examples/sdk_quickstart.py``, whole: the script the e2e
tests run (``tests/e2e/test_sdk_clients.py``, ``tests/e2e/test_run_docker.py``) is the one a
newcomer reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_readme_shows_the_example_script_as_it_is() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    assert blocks == [(ROOT / "examples" / "sdk_quickstart.py").read_text()]
