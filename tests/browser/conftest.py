"""Fixtures of the console's browser tests: one Chromium and one real ``jetyard up`` (Docker
backend: the terminal needs real containers) for the module, a fresh browser context per
test (nothing carried over: sessionStorage, cookies), and the checks every test gets."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from jetyard.runtime.natsserver import free_port
from tests.browser.support import (
    Researcher,
    Watch,
    add_researcher,
    build_model_image,
    chromium_binary,
    register_test_image,
)
from tests.e2e.conftest import Jetyard


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    # --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start.
    launched = playwright.chromium.launch(executable_path=chromium_binary(), args=["--no-sandbox"])
    yield launched
    launched.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jetyard]:
    build_model_image()
    started = Jetyard(Path(tmp_path_factory.mktemp("console")) / "data", free_port(), "docker")
    started.start(timeout=120)
    try:
        register_test_image(started)
        yield started
    finally:
        started.stop()
        # What its sessions left running (an endpoint's replica, a terminal's session) goes
        # with it: another stack on this engine must not meet its containers.
        cluster = (started.data_dir / "cluster.id").read_text().strip()
        ours = [
            "docker",
            "ps",
            "--all",
            "--quiet",
            "--filter",
            f"label=jetyard.cluster_id={cluster}",
        ]
        left = subprocess.run(ours, capture_output=True, text=True, timeout=60).stdout.split()
        if left:
            subprocess.run(["docker", "rm", "--force", *left], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def researcher(stack: Jetyard) -> Researcher:
    return add_researcher(stack, f"researcher-{stack.port}")


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    opened = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    opened.set_default_timeout(30_000)
    yield opened
    opened.close()


@pytest.fixture
def watch() -> Watch:
    return Watch()


@pytest.fixture
def page(context: BrowserContext, watch: Watch) -> Iterator[Page]:
    opened = context.new_page()
    watch.attach(opened)
    yield opened
    assert not watch.errors, f"the page threw: {watch.errors}"
    assert not watch.elsewhere, f"the page reached beyond this machine: {watch.elsewhere}"
