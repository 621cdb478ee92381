"""The app proxy end to end on a real ``jetyard up`` with Docker: an image built here (offline,
FROM the local busybox) declares a web app that busybox ``httpd`` serves on 8080; the admin
registers it with its labels; a user's session of it runs, the agent reports the app open on
``Session.servicePorts``, ``startApp`` gives a URL, and the proxy (token → cookie) serves the
file the image holds. Another user can neither open the app nor use its URL (401 without a
cookie, 403 with a token of theirs); once the session is terminated the URL answers 410.
Docker is required: without it these tests fail, they never skip."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from schemas.app_tokens import COOKIE, AppClaims, issue, new_grant
from schemas.ids import new_id
from tests.e2e.appproxy_support import (
    HTTPD,
    IMAGES,
    START,
    TERMINATE,
    WEB_LABEL,
    build_web_image,
    register,
    remove_image,
    run_app_session,
    running_stack,
    start_app,
    user_id,
)
from tests.e2e.conftest import Jetyard, wait_until
from tests.e2e.test_vfolders import User, another_user

PAGE = f"served from the container {new_id()}\n"
BIG = bytes(range(256)) * 1024  # 256 KiB: past what the proxy reads whole, so streamed


@pytest.fixture
def stack(tmp_path: Path, web_image: str) -> Iterator[Jetyard]:
    """A stack started once the image is built: its agent lists the images it has when it
    registers."""
    yield from running_stack(tmp_path)


@pytest.fixture
def web_image(tmp_path: Path) -> Iterator[str]:
    """A tiny image with the label and ``httpd`` on 8080 serving ``/www`` (removed after, with
    the containers of it: the stack, which depends on this fixture, has stopped by then)."""
    tag = f"jetyard-test-appproxy:{new_id()[:12].lower()}"
    build_web_image(tag, tmp_path / "web-image", {"index.html": PAGE.encode(), "big.bin": BIG})
    yield tag
    remove_image(tag)


def _run_web_session(user: User, image: str) -> str:
    """A session of ``image`` serving its page, once its app is reported open."""
    spec = {"image": image, "cpu": "0.5", "memory": "64m", "command": HTTPD}
    return run_app_session(user, spec, "web", 8080)


def test_a_web_app_in_a_container_through_the_proxy(stack: Jetyard, web_image: str) -> None:
    register(stack, web_image, WEB_LABEL)
    images = {i["name"]: i for i in stack.gql(IMAGES)["data"]["images"]}
    assert images[web_image]["servicePorts"] == [
        {"name": "web", "protocol": "http", "ports": [8080], "public": False}
    ]
    owner, stranger = another_user(stack), another_user(stack)
    session_id = _run_web_session(owner, web_image)
    url = start_app(owner, session_id, "web")
    parts = urlsplit(url)
    app_url = f"{parts.scheme}://{parts.netloc}{parts.path}"
    assert parts.path == f"/apps/{session_id}/web/" and parts.query.startswith("token=")

    with httpx.Client(timeout=30) as browser:
        opened = browser.get(url)
        assert opened.status_code == 303 and opened.headers["location"] == parts.path
        assert f"Path=/apps/{session_id}/web/" in opened.headers["set-cookie"]
        replayed = httpx.get(url, timeout=30)  # the same URL from another client, once used
        assert replayed.status_code == 401 and "used already" in replayed.text
        page = browser.get(app_url)  # the cookie, from the jar
        assert (page.status_code, page.text) == (200, PAGE)
        index = browser.get(app_url + "index.html")
        assert (index.status_code, index.text) == (200, PAGE)
        big = browser.get(app_url + "big.bin")
        assert (big.status_code, big.content) == (200, BIG)
        missing = browser.get(app_url + "no-such-file")
        assert missing.status_code == 404  # httpd's own answer, passed on

        # Another user: refused by startApp, 401 without credentials, 403 with their own.
        refused = stranger.gql(START, id=session_id, app="web")
        assert refused["errors"][0]["extensions"]["code"] == "not-found", refused
        assert httpx.get(app_url, timeout=30).status_code == 401
        theirs = _run_web_session(stranger, web_image)
        their_url = urlsplit(start_app(stranger, theirs, "web"))
        with_theirs = httpx.get(f"{app_url}?{their_url.query}", timeout=30)
        assert with_theirs.status_code == 403, with_theirs.text  # a token for another app
        # A token for this very app naming them (as a gateway would sign it, had it agreed):
        key = (stack.data_dir / "appproxy.key").read_text().strip().encode()
        claims = AppClaims(session=session_id, app="web", user=user_id(stack, stranger.email),
                           grant=new_grant(), iat=time.time(),
                           exp=int(time.time()) + 60)  # fmt: skip
        not_theirs = httpx.get(app_url, params={"token": issue(key, claims)}, timeout=30)
        assert not_theirs.status_code == 403 and "not yours" in not_theirs.text

        ended = owner.gql(TERMINATE, id=session_id)
        assert "errors" not in ended, ended
        stranger.gql(TERMINATE, id=theirs)
        wait_until(lambda: browser.get(app_url).status_code == 410, "the URL answered 410", 60)
        assert browser.cookies.get(COOKIE) is not None  # refused though the cookie is good
        assert "has ended" in browser.get(app_url).text
