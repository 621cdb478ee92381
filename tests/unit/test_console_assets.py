"""The web console works without the internet: every asset a page, script or stylesheet names
is a file the gateway serves, and every third-party file is listed with its version, licence
and hash (``services/gateway/console/static/vendor/VENDORED.json``)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path, PurePosixPath

import pytest

from services.gateway.console.routes import STATIC

VENDOR = STATIC / "vendor"
OURS = [p for p in STATIC.rglob("*") if p.is_file() and VENDOR not in p.parents]

# What makes a browser fetch something: HTML src/href, ES module imports (static and
# dynamic), URLs built against the module's own address, CSS url() and @import.
HTML_REFERENCE = re.compile(
    r"""<(?:script|link|img|source|iframe|embed|object|audio|video|use)\b[^>]*?"""
    r"""\b(?:src|href|data)\s*=\s*["']([^"'#][^"']*)["']""",
    re.IGNORECASE,
)
JS_REFERENCES = (
    re.compile(r"""\bimport\s[^;]*?\bfrom\s*["']([^"']+)["']"""),
    re.compile(r"""\bimport\s*["']([^"']+)["']"""),
    re.compile(r"""\bimport\(\s*["']([^"']+)["']"""),
    re.compile(r"""new URL\(\s*["']([^"']+)["']\s*,\s*import\.meta\.url"""),
)
CSS_REFERENCE = re.compile(r"""url\(\s*["']?([^"')]+)["']?\s*\)|@import\s+["']([^"']+)["']""")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)


def references(path: Path) -> list[str]:
    text = path.read_text()
    if path.suffix == ".html":
        return HTML_REFERENCE.findall(text)
    if path.suffix in {".js", ".mjs"}:
        return [ref for pattern in JS_REFERENCES for ref in pattern.findall(text)]
    if path.suffix == ".css":
        return [a or b for a, b in CSS_REFERENCE.findall(text)]
    return []


def resolve(path: Path, reference: str) -> Path:
    target = PurePosixPath(reference.split("?", 1)[0])
    if target.is_absolute():  # /graphql and the like are the gateway's, not files
        raise AssertionError(f"{path.relative_to(STATIC)} names {reference}: use a relative URL")
    return (path.parent / target).resolve()


def test_the_console_has_pages_scripts_and_styles() -> None:
    names = {p.relative_to(STATIC).as_posix() for p in OURS}
    assert {"index.html", "js/main.js", "css/console.css"} <= names


@pytest.mark.parametrize("path", OURS, ids=lambda p: p.relative_to(STATIC).as_posix())
def test_every_asset_named_is_a_local_file(path: Path) -> None:
    for reference in references(path):
        if reference.startswith("data:"):
            continue
        assert not EXTERNAL.match(reference), f"{path.name} loads {reference} from elsewhere"
        target = resolve(path, reference)
        assert target.is_file(), f"{path.name} names {reference}, which is not a file"
        assert STATIC.resolve() in target.parents, f"{path.name}: {reference} is outside static/"


def test_the_vendored_modules_name_nothing_outside_themselves() -> None:
    for path in VENDOR.rglob("*"):
        if path.suffix in {".mjs", ".js", ".css"}:
            for reference in references(path):
                assert not EXTERNAL.match(reference), f"{path.name} loads {reference}"
                assert resolve(path, reference).is_file(), f"{path.name} names {reference}"


def test_every_vendored_file_is_listed_with_its_licence_and_hash() -> None:
    listed = json.loads((VENDOR / "VENDORED.json").read_text())["files"]
    by_path = {entry["path"]: entry for entry in listed}
    present = {
        p.relative_to(VENDOR).as_posix()
        for p in VENDOR.rglob("*")
        if p.is_file() and p.name != "VENDORED.json"
    }
    assert present == set(by_path), "vendor/ and VENDORED.json must list the same files"
    for name, entry in by_path.items():
        assert entry["license"] and entry["version"] and entry["package"], name
        assert entry["version"] in name, f"{name}: the version belongs in the path (cached a year)"
        assert (VENDOR / entry["licenseFile"]).is_file(), f"{name}: no licence file"
        digest = hashlib.sha256((VENDOR / name).read_bytes()).hexdigest()
        assert digest == entry["sha256"], f"{name} is not the file that was vendored"
