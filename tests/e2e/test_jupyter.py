"""A real web app through the app proxy: Jupyter, from an image built here without a registry
(``scripts/build-jupyter-image``: Debian's Jupyter Notebook and ipykernel packages in a
debootstrapped root filesystem, ``docker import``-ed, cached between runs). On a real
``jetyard up`` with Docker the admin registers the image with its service-ports label, a user's
interactive session of it runs, the agent reports ``jupyter`` open, ``startApp`` gives a URL and
the proxy (token → cookie) passes Jupyter's REST API and its kernel WebSocket: a kernel started
over HTTP runs the cell ``1+1`` and answers ``2``. Another user is refused (403); once the
session is terminated its WebSocket is closed and the URL answers 410.
Docker is required: without it this test fails, it never skips."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from schemas.app_tokens import COOKIE, AppClaims, issue, new_grant
from tests.e2e.appproxy_support import (
    IMAGES,
    START,
    TERMINATE,
    register,
    run_app_session,
    running_stack,
    start_app,
    user_id,
)
from tests.e2e.conftest import Jetyard, wait_until
from tests.e2e.test_vfolders import User, another_user
from tests.integration.appproxy_support import free_ports

IMAGE = "jetyard-jupyter:latest"
BUILD = Path(__file__).parents[2] / "scripts" / "build-jupyter-image"
LABEL = "jupyter:http:8888"
BUILD_TIMEOUT_S = 1200  # the first build downloads and unpacks some 200 Debian packages


@pytest.fixture(scope="module")
def jupyter_image() -> str:
    """The image, built (or found up to date, in seconds) before any stack starts: an agent
    lists the images it has when it registers."""
    subprocess.run([str(BUILD)], check=True, timeout=BUILD_TIMEOUT_S)
    return IMAGE


@pytest.fixture
def stack(tmp_path: Path, jupyter_image: str) -> Iterator[Jetyard]:
    yield from running_stack(tmp_path)


@pytest.fixture
def port_mode_stack(tmp_path: Path, jupyter_image: str) -> Iterator[Jetyard]:
    ports = free_ports(4)
    yield from running_stack(tmp_path, JETYARD_APPPROXY_APP_PORTS=f"{ports[0]}-{ports[-1]}")


def _run_jupyter(user: User) -> str:
    """An interactive session of the image (its own command: the notebook server), once the
    agent has found Jupyter listening."""
    spec = {"image": IMAGE, "type": "interactive", "cpu": "1", "memory": "512m"}
    return run_app_session(user, spec, "jupyter", 8888)


def _execute_request(code: str, session: str) -> dict[str, Any]:
    """A Jupyter messaging-protocol (5.3) ``execute_request`` on the shell channel, as the
    notebook's WebSocket takes it (JSON text, the channel named in the message)."""
    header = {
        "msg_id": uuid.uuid4().hex,
        "msg_type": "execute_request",
        "session": session,
        "username": "jetyard-test",
        "version": "5.3",
        "date": datetime.now(UTC).isoformat(),
    }
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": True,
    }
    return {
        "header": header,
        "parent_header": {},
        "metadata": {},
        "content": content,
        "channel": "shell",
        "buffers": [],
    }


def _run_cell(ws: ClientConnection, code: str, session: str) -> tuple[dict[str, Any], str]:
    """The ``execute_result`` data and the ``execute_reply`` status of one cell."""
    request = _execute_request(code, session)
    ws.send(json.dumps(request))
    result: dict[str, Any] | None = None
    status: str | None = None
    deadline = time.monotonic() + 60
    while result is None or status is None:
        message = json.loads(ws.recv(timeout=max(deadline - time.monotonic(), 0.1)))
        if message["parent_header"].get("msg_id") != request["header"]["msg_id"]:
            continue
        kind = message["msg_type"]
        if (message["channel"], kind) == ("iopub", "execute_result"):
            result = message["content"]["data"]
        elif (message["channel"], kind) == ("iopub", "error"):
            raise AssertionError(f"the cell failed: {message['content']}")
        elif (message["channel"], kind) == ("shell", "execute_reply"):
            status = message["content"]["status"]
    return result, status


def _closed(ws: ClientConnection) -> ConnectionClosed:
    """How the connection ends (what the kernel still sends is read and dropped)."""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ws.recv(timeout=max(deadline - time.monotonic(), 0.1))
    except ConnectionClosed as closed:
        return closed
    except TimeoutError:
        pass
    raise AssertionError("the WebSocket stayed open")


@pytest.mark.timeout(BUILD_TIMEOUT_S + 180)  # the image's first build counts as setup
def test_jupyter_runs_a_cell_through_the_proxy(stack: Jetyard, jupyter_image: str) -> None:
    register(stack, jupyter_image, LABEL)
    images = {i["name"]: i for i in stack.gql(IMAGES)["data"]["images"]}
    assert images[jupyter_image]["servicePorts"] == [
        {"name": "jupyter", "protocol": "http", "ports": [8888], "public": False}
    ]
    owner, stranger = another_user(stack), another_user(stack)
    session_id = _run_jupyter(owner)
    url = urlsplit(start_app(owner, session_id, "jupyter"))
    app_url = f"{url.scheme}://{url.netloc}{url.path}"
    ws_url = f"ws://{url.netloc}{url.path}"
    assert url.path == f"/apps/{session_id}/jupyter/" and url.query.startswith("token=")

    with httpx.Client(timeout=30) as browser:
        opened = browser.get(url.geturl())
        assert opened.status_code == 303 and opened.headers["location"] == url.path
        api = browser.get(app_url + "api")  # Jupyter's own answers, the prefix stripped
        assert api.status_code == 200 and "version" in api.json(), api.text
        status = browser.get(app_url + "api/status")
        assert status.status_code == 200 and status.json()["kernels"] == 0, status.text
        tree = browser.get(app_url + "tree")
        assert tree.status_code == 200 and "<title>Home Page - Select or create a notebook" in (
            tree.text
        ), tree.text[:500]
        kernel = browser.post(app_url + "api/kernels", json={"name": "python3"})
        assert kernel.status_code == 201, kernel.text
        kernel_id = kernel.json()["id"]
        cookie = {"Cookie": f"{COOKIE}={browser.cookies[COOKIE]}"}

        session = uuid.uuid4().hex
        channels = f"{ws_url}api/kernels/{kernel_id}/channels?session_id={session}"
        with connect(channels, additional_headers=cookie, open_timeout=30) as ws:
            result, reply = _run_cell(ws, "1+1", session)
            assert (result["text/plain"], reply) == ("2", "ok")

            # Another user: refused by startApp, and by the proxy (HTTP and WebSocket) even
            # with a token naming this very app (as a gateway would sign it, had it agreed).
            refused = stranger.gql(START, id=session_id, app="jupyter")
            assert refused["errors"][0]["extensions"]["code"] == "not-found", refused
            key = (stack.data_dir / "appproxy.key").read_text().strip().encode()
            user = user_id(stack, stranger.email)
            claims = AppClaims(
                session=session_id, app="jupyter", user=user, grant=new_grant(),
                iat=time.time(), exp=int(time.time()) + 60,
            )  # fmt: skip
            token = issue(key, claims)
            theirs = httpx.get(app_url + "api/status", params={"token": token}, timeout=30)
            assert theirs.status_code == 403 and "not yours" in theirs.text, theirs.text
            with pytest.raises(InvalidStatus) as denied:
                connect(f"{channels}&token={token}", open_timeout=30).close()
            assert denied.value.response.status_code == 403

            ended = owner.gql(TERMINATE, id=session_id)
            assert "errors" not in ended, ended
            closed = _closed(ws)
            assert closed.rcvd is not None and closed.rcvd.code == 1001, closed
        wait_until(lambda: browser.get(app_url).status_code == 410, "the URL answered 410", 60)
        assert "has ended" in browser.get(app_url + "api/status").text


@pytest.mark.timeout(BUILD_TIMEOUT_S + 180)
def test_in_port_mode_jupyters_own_page_and_assets_load(
    port_mode_stack: Jetyard, jupyter_image: str
) -> None:
    """Jupyter's page links to ``/static/…`` and ``/api/…`` at the root: at a port of its own
    (``JETYARD_APPPROXY_APP_PORTS``) those links resolve, as in a browser, and a cell runs."""
    stack = port_mode_stack
    register(stack, jupyter_image, LABEL)
    owner = another_user(stack)
    session_id = _run_jupyter(owner)
    started = start_app(owner, session_id, "jupyter")

    with httpx.Client(timeout=30, follow_redirects=True) as browser:
        tree = browser.get(started)  # the path URL → 307 to its port → 303 with the cookie
        home = f"{tree.url.scheme}://{tree.url.netloc.decode()}"
        assert tree.status_code == 200 and tree.url.port != urlsplit(started).port
        page = browser.get(home + "/tree")
        assert page.status_code == 200 and 'data-base-url="/"' in page.text, page.text[:300]
        assets = re.findall(r'(?:href|src)="(/static/[^"?]+)', page.text)
        assert assets, page.text[:2000]
        for asset in assets[:5]:  # absolute links, served: the page works in a browser
            assert browser.get(home + asset).status_code == 200, asset
        kernel = browser.post(home + "/api/kernels", json={"name": "python3"})
        assert kernel.status_code == 201, kernel.text
        cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
        session = uuid.uuid4().hex
        channels = (f"ws://{tree.url.netloc.decode()}/api/kernels/{kernel.json()['id']}"
                    f"/channels?session_id={session}")  # fmt: skip
        with connect(channels, additional_headers={"Cookie": cookie}, open_timeout=30) as ws:
            result, reply = _run_cell(ws, "6*7", session)
        assert (result["text/plain"], reply) == ("42", "ok")
        owner.gql(TERMINATE, id=session_id)
