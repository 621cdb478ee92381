"""docs/scheduling.md's list of a pass's steps is ``passes.decide``: the same steps, in the
same order (the facts' two steps are ``decide_facts``'s)."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from pathlib import Path

from services.scheduler import passes

DOC = Path(__file__).parents[2] / "docs" / "scheduling.md"


def _calls(function: Callable[..., object]) -> list[str]:
    """The names the function calls at its top level, in order (loop bodies included)."""
    tree = ast.parse(inspect.getsource(function))
    names: list[tuple[int, int, str]] = []
    for node in ast.walk(tree.body[0]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names.append((node.lineno, node.col_offset, node.func.id))
    return [name for _, _, name in sorted(names)]


def _steps() -> list[str]:
    """What the steps of ``decide`` are: the step functions it calls, ``decide_facts``
    opened into its own two."""
    steps: list[str] = []
    for name in _calls(passes.decide):
        if name == "decide_facts":
            steps += _calls(passes.decide_facts)
        elif callable(getattr(passes, name, None)) and name not in {"dict", "still_pending"}:
            steps.append(name)
    return steps


def _documented() -> list[str]:
    text = DOC.read_text()
    section = text.split("## One pass", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\s*\d+\. `(\w+)`", section, flags=re.MULTILINE)


def test_the_documented_steps_are_decide_in_its_order() -> None:
    steps = _steps()
    assert "place_group" in steps and "admit_sessions" in steps  # the reading finds the steps
    assert _documented() == steps
