"""What the console's browser tests share: a Chromium driven by Playwright, a real ``jetyard
up`` with a researcher in it, and screenshots under ``tests/browser/artifacts/``.

Playwright's own browser download needs the internet: the tests launch Debian's ``chromium``
(``scripts/ensure-chromium`` installs it; ``JETYARD_CHROMIUM`` names another binary). Like the
Docker tests, they fail without it; they never skip."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import ConsoleMessage, Page, expect

from schemas.tenancy import project_id_for
from tests.e2e.conftest import TEST_IMAGE, Jetyard

ARTIFACTS = Path(__file__).parent / "artifacts"
PASSWORD = "console-pw-12345"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def chromium_binary() -> str:
    for candidate in (os.environ.get("JETYARD_CHROMIUM"), "/usr/bin/chromium", "chromium",
                      "/usr/bin/chromium-browser"):  # fmt: skip
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    raise RuntimeError("no Chromium: run scripts/ensure-chromium (or set JETYARD_CHROMIUM)")


@dataclass
class Researcher:
    email: str
    user_id: str
    access_key: str
    secret_key: str
    password: str = PASSWORD


def add_researcher(stack: Jetyard, name: str, role: str = "user") -> Researcher:
    """A person of the default domain and project (a user unless ``role`` says otherwise),
    with a keypair (made by the superadmin)."""
    email = f"{name}@example.org"
    created = stack.gql(
        """mutation($e: String!, $pw: String!, $p: [ID!], $r: String!) {
             createUser(email: $e, password: $pw, domain: "default", role: $r, projects: $p)
             { id } }""",
        e=email,
        pw=PASSWORD,
        p=[project_id_for("default", "default")],
        r=role,
    )
    assert "errors" not in created, created
    user_id = created["data"]["createUser"]["id"]
    issued = stack.gql(
        "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }", u=user_id
    )
    assert "errors" not in issued, issued
    keys = issued["data"]["createKeypair"]
    return Researcher(email, user_id, keys["accessKey"], keys["secretKey"])


MODEL_IMAGE = "jetyard-model:latest"
"""Also the echo replica's image (``images/echo/server.py``): the Endpoints page's test."""


def build_model_image() -> None:
    """``scripts/build-model-image`` (a no-op when it is up to date): before the stack starts,
    as the agent lists its images when it registers."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "build-model-image"
    subprocess.run([str(script)], check=True, timeout=600)


def register_test_image(stack: Jetyard) -> None:
    """The test image, registered with bounds the form checks (at most 2 cores a kernel)."""
    answer = stack.gql(
        """mutation($n: String!) { registerImage(name: $n, minResources: {memory: "16m"},
             maxResources: {cpu: "2"}) { status message } }""",
        n=TEST_IMAGE,
    )
    assert "errors" not in answer, answer


@dataclass
class Watch:
    """What a page did that a test must not allow: uncaught errors, anything the page's
    Content-Security-Policy refused, and any request to a host other than this machine (the
    console works without the internet)."""

    errors: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", self._console)
        page.on("request", self._request)

    def _console(self, message: ConsoleMessage) -> None:
        # The policy refusing something means a page named what it must not (docs/console.md).
        if "Content Security Policy" in message.text:
            self.errors.append(message.text)

    def _request(self, request: object) -> None:
        url = str(getattr(request, "url", ""))
        host = urlsplit(url).hostname
        if url.startswith(("http:", "https:", "ws:", "wss:")) and host not in LOCAL_HOSTS:
            self.elsewhere.append(url)


def shot(page: Page, name: str) -> Path:
    """A full-page screenshot under tests/browser/artifacts/ (git-ignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^a-z0-9-]+', '-', name.lower())}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def sign_in(page: Page, base: str, who: Researcher) -> None:
    page.goto(f"{base}/console/#/sign-in")
    page.fill("#sign-in-password input[name=email]", who.email)
    page.fill("#sign-in-password input[name=password]", who.password)
    page.click("#sign-in-password button[type=submit]")
    expect(page.locator("#sessions")).to_be_visible()
