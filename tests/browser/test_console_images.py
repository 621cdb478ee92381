"""The Images page (Operate) and the session page's pulls in a real Chromium, against a
real ``jetyard up`` (Docker backend) and real registries with htpasswd authentication
(``tests/registry_support``, one per test): the superadmin adds a registry from the page (its
password is never shown again), rescans it and sees the image listed with its registry,
digest, size and nodes, sets its pull policy; a session for the image, started from the
new-session form, shows each node's pull with its bytes and goes PULLING, then RUNNING, and
the node then holds the image; the registry is removed from the page. With a wrong password
set from the page, a session's page shows its pull refused and why."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.support import Researcher, shot, sign_in
from tests.browser.test_console import FINAL, status
from tests.e2e.conftest import TEST_IMAGE, Jetyard
from tests.e2e.test_session_path import CREATE
from tests.registry_support import (
    Registry,
    build_layered_image,
    push,
    remove_local_image,
    running_registry,
    throttled,
)

# The stack starts (or stops) inside one of them, and a ~100 MiB image is built and pushed.
pytestmark = pytest.mark.timeout(300)

ADD = """mutation($name: String!, $url: String!, $user: String!, $password: String!) {
  addRegistry(name: $name, url: $url, username: $user, password: $password) { status message }
}"""
RESCAN = """mutation($name: String!) { rescanRegistry(name: $name) { registered } }"""
EVENTS = """query($id: ID!, $after: Int!) {
  eventLog(aggregate: "agent", id: $id, after: $after, first: 200) { events { seq name payload } }
}"""


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    """A registry of the test's own (a second of start): its catalog holds only what the
    test pushes, so a rescan's answer is the test's to predict."""
    with running_registry(tmp_path) as reg:
        yield reg


def pushed(registry: Registry, *, layers: int, size: int) -> str:
    """A fresh image in the registry and not in the engine: its reference."""
    local = build_layered_image(f"jy-console-src-{uuid.uuid4().hex[:8]}:v1", layers, size)
    repo = f"console-{uuid.uuid4().hex[:8]}/tool:v1"
    try:
        push(registry, local, repo)
    finally:
        remove_local_image(local)
    return f"{registry.host}/{repo}"


def pulled_bytes(stack: Jetyard, node: str, reference: str) -> int:
    """The total of the node's last ``ImagePullProgressed`` for ``reference`` (0 if none)."""
    total, after = 0, 0
    while True:
        page = stack.gql(EVENTS, id=node, after=after)["data"]["eventLog"]["events"]
        for event in page:
            said = event["payload"]
            if event["name"] == "ImagePullProgressed" and said["reference"] == reference:
                total = int(said["total_bytes"])
        if len(page) < 200:
            return total
        after = page[-1]["seq"]


def as_admin(page: Page, stack: Jetyard) -> None:
    who = stack.admin
    sign_in(page, stack.url, Researcher(who["email"], who["user_id"], "", "", who["password"]))


def blocker(stack: Jetyard, seconds: int) -> str:
    """A session of the local test image that succeeds after ``seconds``: one that depends on
    it waits PENDING meanwhile, so its page follows the pull from before it begins (a pull
    refused at once ends the session before a page opened after it could ask)."""
    created = stack.gql(CREATE, input={
        "image": TEST_IMAGE, "cpu": "0.25", "memory": "32m", "command": ["sleep", str(seconds)],
    })  # fmt: skip
    assert created["data"]["createSession"]["status"] == "ACCEPTED", created
    return str(created["data"]["createSession"]["sessionId"])


def start_session(page: Page, base: str, image: str, command: str, after: str) -> str:
    """The new-session form for ``image`` (a batch session that waits for ``after``); the new
    session's id."""
    page.goto(f"{base}/console/#/sessions/new")
    page.fill("#f-image", image)
    page.check("input[name=type][value=batch]")
    page.fill("#f-cpu", "0.5")
    page.fill("#f-memory", "64m")
    page.fill("#f-command", command)
    page.fill("#f-dependsOn", after)
    page.click("#new-session button[type=submit]")
    expect(page.locator("#session-status")).to_be_visible()
    return page.url.rsplit("/", 1)[-1]


def test_the_admin_adds_and_rescans_a_registry_and_a_session_shows_its_pull(
    page: Page, stack: Jetyard, registry: Registry
) -> None:
    # Big enough (random bytes) that the pull takes a moment even from this machine.
    image = pushed(registry, layers=4, size=24 << 20)
    try:
        as_admin(page, stack)
        page.click("#nav >> text=Images")
        expect(page.locator("#op-add-registry")).to_be_visible()
        expect(page.locator("#op-registry-password")).to_have_attribute("type", "password")

        name = f"lab{uuid.uuid4().hex[:6]}"
        page.fill("#op-registry-name", name)
        page.fill("#op-registry-url", registry.url)
        page.fill("#op-registry-username", registry.username)
        page.fill("#op-registry-password", registry.password)
        page.click("#op-add-registry button[type=submit]")
        row = page.locator(f"#op-registries tr[data-registry='{name}']")
        expect(row).to_contain_text(registry.url)
        expect(row).to_contain_text(registry.username)
        expect(row.locator(".op-secret-state")).to_have_text("set")
        expect(page.locator("#op-registry-password")).to_have_value("")
        assert registry.password not in page.content()

        row.locator(".op-rescan-button").click()
        result = page.locator("#op-rescan-result")
        expect(result).to_contain_text(f"Rescan of {name}: 1 registered, 0 updated")
        expect(result).to_contain_text(image)
        listed = page.locator(f"#op-images tr[data-image='{image}']")
        expect(listed).to_contain_text(name)
        expect(listed).to_contain_text("sha256:")
        expect(listed).to_contain_text("MiB")
        expect(listed.locator(".op-image-nodes")).to_have_text("0")
        shot(page, "images-rescanned")

        listed.locator(".op-pull-policy").select_option("if-not-present")
        expect(page.locator("#op-images-result")).to_be_visible()
        expect(listed.locator(".op-pull-policy")).to_have_value("if-not-present")
        assert registry.password not in page.content()

        # A session for the image, its page open before the pull: each node's pull, live,
        # then it runs.
        start_session(page, stack.url, image, "sh -c 'echo pulled and ran; sleep 2'",
                      blocker(stack, 4))  # fmt: skip
        status(page, "PENDING")
        pull = page.locator("#session-pulls li.pull")
        expect(pull).to_be_visible(timeout=60_000)
        expect(pull).to_contain_text(image)
        shot(page, "session-pulling")
        status(page, "RUNNING")
        expect(page.locator("#history tr[data-status=PULLING]")).to_be_visible()
        expect(pull).to_have_attribute("data-status", "finished")
        # The bytes the node said it pulled, in binary units (~96 MiB of random bytes).
        total = pulled_bytes(stack, str(pull.get_attribute("data-node")), image)
        assert 90 << 20 < total < 100 << 20, total
        expect(pull.locator(".progress-text")).to_have_text(
            f"{total / (1 << 20):.0f} MiB of {total / (1 << 20):.0f} MiB (100%)"
        )
        status(page, FINAL)
        expect(page.locator("#session-output")).to_contain_text("pulled and ran")
        said = page.locator("#history tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
        assert said.index("SCHEDULED") < said.index("PULLING") < said.index("RUNNING"), said
        shot(page, "session-pulled")

        # The node reports holding it now (its agent's image list follows the pull).
        page.goto(f"{stack.url}/console/#/operate/images")
        nodes = page.locator(f"#op-images tr[data-image='{image}'] .op-image-nodes")
        deadline = time.monotonic() + 30
        while nodes.inner_text() != "1" and time.monotonic() < deadline:
            time.sleep(1)
            page.click("#op-images-refresh")
        expect(nodes).to_have_text("1")

        page.on("dialog", lambda dialog: dialog.accept())
        row.locator(".op-remove-registry").click()
        expect(row.locator(".tag")).to_have_text("removed")
        expect(row.locator(".op-rescan-button")).to_have_count(0)
        shot(page, "images-registry-removed")
    finally:
        remove_local_image(image)


def test_a_pull_refused_by_the_registry_shows_why_on_the_session_page(
    page: Page, stack: Jetyard, registry: Registry
) -> None:
    image = pushed(registry, layers=1, size=1 << 20)
    try:
        name = f"lab{uuid.uuid4().hex[:6]}"
        added = stack.gql(ADD, name=name, url=registry.url, user=registry.username,
                          password=registry.password)  # fmt: skip
        assert added["data"]["addRegistry"]["status"] == "ACCEPTED", added
        scanned = stack.gql(RESCAN, name=name)["data"]["rescanRegistry"]
        assert scanned["registered"] == [image], scanned

        # A wrong password, set from the page: the pull is refused and the page says why.
        as_admin(page, stack)
        page.goto(f"{stack.url}/console/#/operate/images")
        page.select_option("#op-change-registry-name", name)
        expect(page.locator("#op-change-registry-url")).to_have_value(registry.url)
        page.fill("#op-change-registry-password", f"wrong-{uuid.uuid4().hex}")
        page.click("#op-change-registry button[type=submit]")
        expect(page.locator("#op-images-result")).to_be_visible()
        expect(page.locator("#op-change-registry-password")).to_have_value("")

        start_session(page, stack.url, image, "true", blocker(stack, 4))
        status(page, "PENDING")
        failed = page.locator("#session-pulls li.pull[data-status=failed]")
        expect(failed).to_be_visible(timeout=60_000)
        expect(failed).to_contain_text(image)
        expect(failed.locator(".pull-failure")).to_contain_text("authentication")
        status(page, "ERROR")
        shot(page, "session-pull-failed")
    finally:
        remove_local_image(image)


def test_the_cluster_page_shows_a_nodes_pull_in_flight(
    page: Page, stack: Jetyard, registry: Registry
) -> None:
    """Operate, Cluster: a node's card shows the pull it is making (reference, bytes, kernels
    waiting), live from the node's row, and drops it once done. Through a proxy sending 1 MiB/s
    a connection, the 8 MiB pull takes seconds."""
    with throttled(registry, 1 << 20) as slow:
        image = pushed(registry, layers=2, size=4 << 20).replace(registry.host, slow.host, 1)
        name = f"slow{uuid.uuid4().hex[:6]}"
        try:
            stack.gql(ADD, name=name, url=slow.url, user=slow.username, password=slow.password)
            assert image in stack.gql(RESCAN, name=name)["data"]["rescanRegistry"]["registered"]
            as_admin(page, stack)
            page.goto(f"{stack.url}/console/#/operate/cluster")
            created = stack.gql(CREATE, input={"image": image, "cpu": "0.5", "memory": "64m",
                                               "command": ["true"]})  # fmt: skip
            assert created["data"]["createSession"]["status"] == "ACCEPTED", created
            pull = page.locator(f'.op-node-pulls li[data-reference="{image}"]')
            expect(pull).to_be_visible(timeout=30_000)
            expect(pull).to_contain_text("for 1 kernel")
            shot(page, "cluster-node-pulling")
            expect(pull).to_have_count(0, timeout=60_000)  # done: the card drops it
        finally:
            stack.gql("mutation($n: String!) { removeRegistry(name: $n) { status } }", n=name)
            remove_local_image(image)
