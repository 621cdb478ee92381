"""What every part of ``bench.console`` shares: the pages and their routes, the console's
queries as its modules build them, progress lines and the figures' summary."""

from __future__ import annotations

import math
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

Popen = subprocess.Popen[bytes]
ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "services" / "gateway" / "console" / "static" / "js"
PAGES = {"sessions": "#/sessions", "cluster": "#/operate/cluster", "queue": "#/operate/queue"}
TERMINATE = "mutation T($id: ID!) { terminateSession(id: $id) { status message } }"
FOLLOWED = frozenset({"SessionScheduled", "SessionPendingReasonChanged", "SessionStarted"})


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def js_template(module: str, name: str) -> str:
    """A query as the console's module builds it: the template literal named ``name`` with its
    ``${CONST}`` parts filled from the same file's constants."""
    source = (JS / module).read_text()
    found = re.search(rf"const {name} = `(.*?)`;", source, re.S)
    if found is None:
        raise RuntimeError(f"{module} has no template {name}: the bench must follow the page")

    def constant(match: re.Match[str]) -> str:
        value = re.search(rf"const {match[1]} = (\d+|\"[^\"]*\");", source)
        if value is None:
            raise RuntimeError(f"{module}: no constant {match[1]}")
        return value[1].strip('"')

    return re.sub(r"\$\{(\w+)\}", constant, found[1])


def summary(values: list[float]) -> dict[str, float]:
    """n, median, p95 (nearest rank: of 20 samples the 19th), min and max."""
    ordered = sorted(values)
    if not ordered:
        return {}
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[math.ceil(len(ordered) * 0.95) - 1], 3),
        "min": round(ordered[0], 3),
        "max": round(ordered[-1], 3),
    }
