"""The app proxy end to end on a real ``jetyard up`` with Docker: an image built here (offline,
FROM the local busybox) declares a web app that busybox ``httpd`` serves on 8080; the admin
registers it with its labels; a user's session of it runs, the agent reports the app open on
``Session.servicePorts``, ``startApp`` gives a URL, and the proxy (token → cookie) serves the
file the image holds. Another user can neither open the app nor use its URL (401 without a
cookie, 403 with a token of theirs); once the session is terminated the URL answers 410.
Docker is required: without it these tests fail, they never skip."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from jetyard.natsserver import free_port
from schemas.app_tokens import COOKIE, AppClaims, issue
from schemas.ids import new_id
from schemas.service_ports import BACKENDAI_LABEL
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until
from tests.e2e.test_vfolders import User, another_user

LABEL = "web:http:8080"
PAGE = f"served from the container {new_id()}\n"
BIG = bytes(range(256)) * 1024  # 256 KiB: past what the proxy reads whole, so streamed
REGISTER = """mutation($name: String!, $labels: [ImageLabelInput!]) {
    registerImage(name: $name, labels: $labels) { status message } }"""
IMAGES = "{ images { name servicePorts { name protocol ports public } } }"
PORTS = """query($id: ID!) { session(id: $id) {
    status servicePorts { name protocol port state } } }"""
START = """mutation($id: ID!, $app: String!) { startApp(sessionId: $id, app: $app) {
    url expiresAt } }"""
TERMINATE = "mutation($id: ID!) { terminateSession(id: $id) { status } }"


@pytest.fixture
def stack(tmp_path: Path, web_image: str) -> Iterator[Jetyard]:
    """A stack whose proxy has a port of its own (6022 may be another stack's), started once
    the image is built: its agent lists the images it has when it registers."""
    env = {"JETYARD_APPPROXY_PORT": str(free_port())}
    stack = Jetyard(tmp_path / "data", free_port(), "docker", env=env).start()
    yield stack
    stack.stop()


@pytest.fixture
def web_image(tmp_path: Path) -> Iterator[str]:
    """A tiny image with the label and ``httpd`` on 8080 serving ``/www`` (removed after, with
    the containers of it)."""
    tag = f"jetyard-test-appproxy:{new_id()[:12].lower()}"
    context = tmp_path / "web-image"
    context.mkdir()
    (context / "index.html").write_text(PAGE)
    (context / "big.bin").write_bytes(BIG)
    (context / "Dockerfile").write_text(
        f"FROM {TEST_IMAGE}\n"
        f'LABEL {BACKENDAI_LABEL}="{LABEL}"\n'
        "COPY index.html big.bin /www/\n"
        'CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n'
    )
    built = subprocess.run(["docker", "build", "--quiet", "--tag", tag, str(context)],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    yield tag
    # The stack has stopped by now (it depends on this fixture): its sessions' containers go
    # first, or the image would stay behind them untagged.
    ours = ["docker", "ps", "--all", "--quiet", "--filter", f"ancestor={tag}"]
    containers = subprocess.run(ours, capture_output=True, text=True, timeout=60).stdout.split()
    if containers:
        subprocess.run(["docker", "rm", "--force", *containers], capture_output=True, timeout=60)
    subprocess.run(["docker", "image", "rm", "--force", tag], capture_output=True, timeout=60)


def _run_web_session(user: User, image: str) -> str:
    """A session of ``image`` serving its page, once its app is reported open."""
    answer = user.gql(
        """mutation($input: CreateSessionInput!) {
             createSession(input: $input) { status message sessionId } }""",
        input={"image": image, "cpu": "0.5", "memory": "64m",
               "command": ["httpd", "-f", "-p", "8080", "-h", "/www"]},
    )  # fmt: skip
    assert "errors" not in answer and answer["data"]["createSession"]["status"] == "ACCEPTED", (
        answer
    )
    session_id: str = answer["data"]["createSession"]["sessionId"]
    seen: dict[str, Any] = {}

    def open_() -> bool:
        nonlocal seen
        seen = user.gql(PORTS, id=session_id)["data"]["session"] or {}
        return seen.get("status") == "RUNNING" and bool(seen.get("servicePorts"))

    wait_until(open_, f"session {session_id} RUNNING with its apps reported ({seen})", 120)
    assert seen["servicePorts"] == [
        {"name": "web", "protocol": "http", "port": 8080, "state": "open"}
    ], seen
    return session_id


def _start_app(user: User, session_id: str) -> dict[str, Any]:
    return user.gql(START, id=session_id, app="web")


def _url_of(user: User, session_id: str) -> str:
    answer = _start_app(user, session_id)
    assert "errors" not in answer, answer
    url: str = answer["data"]["startApp"]["url"]
    return url


def test_a_web_app_in_a_container_through_the_proxy(stack: Jetyard, web_image: str) -> None:
    registered = stack.gql(REGISTER, name=web_image,
                           labels=[{"key": BACKENDAI_LABEL, "value": LABEL}])  # fmt: skip
    assert registered["data"]["registerImage"]["status"] == "ACCEPTED", registered
    images = {i["name"]: i for i in stack.gql(IMAGES)["data"]["images"]}
    assert images[web_image]["servicePorts"] == [
        {"name": "web", "protocol": "http", "ports": [8080], "public": False}
    ]
    owner, stranger = another_user(stack), another_user(stack)
    session_id = _run_web_session(owner, web_image)
    url = _url_of(owner, session_id)
    parts = urlsplit(url)
    app_url = f"{parts.scheme}://{parts.netloc}{parts.path}"
    assert parts.path == f"/apps/{session_id}/web/" and parts.query.startswith("token=")

    with httpx.Client(timeout=30) as browser:
        opened = browser.get(url)
        assert opened.status_code == 303 and opened.headers["location"] == parts.path
        assert f"Path=/apps/{session_id}/web/" in opened.headers["set-cookie"]
        page = browser.get(app_url)  # the cookie, from the jar
        assert (page.status_code, page.text) == (200, PAGE)
        index = browser.get(app_url + "index.html")
        assert (index.status_code, index.text) == (200, PAGE)
        big = browser.get(app_url + "big.bin")
        assert (big.status_code, big.content) == (200, BIG)
        missing = browser.get(app_url + "no-such-file")
        assert missing.status_code == 404  # httpd's own answer, passed on

        # Another user: refused by startApp, 401 without credentials, 403 with their own.
        refused = _start_app(stranger, session_id)
        assert refused["errors"][0]["extensions"]["code"] == "not-found", refused
        assert httpx.get(app_url, timeout=30).status_code == 401
        theirs = _run_web_session(stranger, web_image)
        their_url = urlsplit(_url_of(stranger, theirs))
        with_theirs = httpx.get(f"{app_url}?{their_url.query}", timeout=30)
        assert with_theirs.status_code == 403, with_theirs.text  # a token for another app
        # A token for this very app naming them (as a gateway would sign it, had it agreed):
        key = (stack.data_dir / "appproxy.key").read_text().strip().encode()
        claims = AppClaims(session=session_id, app="web", user=_user_id(stack, stranger.email),
                           exp=int(time.time()) + 60)  # fmt: skip
        not_theirs = httpx.get(app_url, params={"token": issue(key, claims)}, timeout=30)
        assert not_theirs.status_code == 403 and "not yours" in not_theirs.text

        ended = owner.gql(TERMINATE, id=session_id)
        assert "errors" not in ended, ended
        stranger.gql(TERMINATE, id=theirs)
        wait_until(lambda: browser.get(app_url).status_code == 410, "the URL answered 410", 60)
        assert browser.cookies.get(COOKIE) is not None  # refused though the cookie is good
        assert "has ended" in browser.get(app_url).text


def _user_id(stack: Jetyard, email: str) -> str:
    users = stack.gql("{ users { id email } }")
    assert "errors" not in users, users
    (found,) = [u["id"] for u in users["data"]["users"] if u["email"] == email]
    return str(found)
