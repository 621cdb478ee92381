"""The gateway's import contracts (``pyproject.toml``): feature packages independent of each
other, the core below them. Run with ``lint-imports`` on the real tree, and on a throwaway copy
of the gateway with one offending import added, which they must report broken."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "services" / "gateway"
FEATURES = "Gateway features are independent of each other"
LAYERS = "Gateway: composition root over features over core"


def gateway_contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    found = [c for c in contracts if c["name"] in (FEATURES, LAYERS)]
    assert [c["name"] for c in found] == [FEATURES, LAYERS]
    return found


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def lint(where: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with only the gateway's contracts, on the ``services`` under ``where``."""
    lines = ["[tool.importlinter]", 'root_packages = ["services"]', ""]
    for contract in gateway_contracts():
        lines.append("[[tool.importlinter.contracts]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in contract.items()]
        lines.append("")
    config = tmp_path / "contracts.toml"
    config.write_text("\n".join(lines))
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command is not None, "import-linter is not installed beside this python"
    return subprocess.run(
        [command, "--config", str(config), "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(where)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def copy_with(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the gateway's Python files under ``tmp_path/tree``, ``line`` added to
    ``module`` (a path inside the gateway)."""
    tree = tmp_path / "tree"
    shutil.copytree(
        GATEWAY,
        tree / "services" / "gateway",
        ignore=lambda _, names: [n for n in names if n in ("static", "__pycache__")],
    )
    (tree / "services" / "__init__.py").write_text("")
    target = tree / "services" / "gateway" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return tree


def test_the_real_gateway_keeps_its_contracts(tmp_path: Path) -> None:
    result = lint(ROOT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{FEATURES} KEPT" in result.stdout
    assert f"{LAYERS} KEPT" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # One feature importing another.
        ("sessions/queries.py", "import services.gateway.cluster.types", FEATURES),
        # The core reaching up into a feature.
        ("core/live.py", "from services.gateway.folders import queries", LAYERS),
    ],
)
def test_an_offending_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    result = lint(copy_with(tmp_path, module, line), tmp_path)
    assert result.returncode != 0, result.stdout
    assert f"{broken} BROKEN" in result.stdout
