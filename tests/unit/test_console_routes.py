"""The console's routes on the gateway, without a server: the pages and their headers, the
form rules from this gateway's limits, and the relay to the storage data plane (a fake data
plane behind httpx's mock transport)."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from schemas.bounds import InputLimits
from services.gateway.console.relay import MAX_BODY_BYTES, StorageRelay
from services.gateway.console.routes import console_routes, content_security_policy
from services.gateway.console.rules import form_rules

LIMITS = InputLimits(max_cpu_milli=8_000, max_gpu_hundredths=400)
FOLDER = "/folders/local/f-123"


def over(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test")


def client() -> httpx.AsyncClient:
    routes = console_routes(
        limits=LIMITS, storage_url="http://storage.test", appproxy_url="http://apps.test:6022"
    )
    return over(Starlette(routes=routes))


async def test_the_console_is_at_console_and_the_root_sends_browsers_there() -> None:
    async with client() as http:
        for path in ("/", "/console"):
            answer = await http.get(path)
            assert answer.status_code == 308
            assert answer.headers["location"] == "/console/"
        page = await http.get("/console/")
        assert page.status_code == 200
        assert '<script type="module" src="js/main.js">' in page.text


async def test_pages_say_where_they_may_load_and_connect_from() -> None:
    async with client() as http:
        headers = (await http.get("/console/")).headers
    policy = headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'self'" in policy
    assert "connect-src 'self' ws://apps.test:6022" in policy  # the terminal's WebSocket
    assert headers["x-frame-options"] == "DENY"
    assert headers["cache-control"] == "no-cache"


def test_a_proxy_on_https_is_reached_over_wss() -> None:
    assert "connect-src 'self' wss://apps.example.org" in content_security_policy(
        "https://apps.example.org"
    )


async def test_vendored_files_are_cached_for_a_year_and_ours_are_revalidated() -> None:
    async with client() as http:
        vendored = await http.get("/console/vendor/xterm/6.0.0/xterm.mjs")
        ours = await http.get("/console/js/main.js")
    assert vendored.status_code == 200 and "immutable" in vendored.headers["cache-control"]
    assert vendored.headers["content-type"].startswith("text/javascript")
    assert ours.status_code == 200 and ours.headers["cache-control"] == "no-cache"


async def test_the_form_rules_are_this_gateways_limits() -> None:
    async with client() as http:
        rules = (await http.get("/console/rules.json")).json()
    assert rules == form_rules(LIMITS)
    assert rules["cpu"] == {"minMilli": 10, "maxMilli": 8_000}
    assert rules["gpu"] == {"maxHundredths": 400}
    assert "/etc" in rules["mounts"]["reserved"]


def relay_app(handler: httpx.MockTransport) -> httpx.AsyncClient:
    relay = StorageRelay("http://storage.test", transport=handler)
    methods = ["GET", "HEAD", "POST", "PATCH", "DELETE", "OPTIONS"]
    route = Route("/console/storage/{target:path}", relay.relay, methods=methods)
    return over(Starlette(routes=[route]))


async def test_the_relay_forwards_a_folder_call_and_says_where_the_upload_is() -> None:
    seen: list[httpx.Request] = []

    def data_plane(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            201,
            headers={"Location": f"{FOLDER}/uploads/abc", "Tus-Resumable": "1.0.0", "X-Other": "1"},
        )

    async with relay_app(httpx.MockTransport(data_plane)) as http:
        answer = await http.post(
            f"/console/storage{FOLDER}/uploads?x=1",
            headers={"Authorization": "Bearer t0k", "Upload-Length": "5", "Cookie": "a=b"},
        )
    assert answer.status_code == 201
    assert answer.headers["location"] == f"/console/storage{FOLDER}/uploads/abc"
    assert "x-other" not in answer.headers
    [sent] = seen
    assert str(sent.url) == f"http://storage.test{FOLDER}/uploads?x=1"
    assert sent.headers["authorization"] == "Bearer t0k"
    assert sent.headers["upload-length"] == "5"
    assert "cookie" not in sent.headers  # only the data plane's own headers pass


@pytest.mark.parametrize(
    "target",
    [
        "/healthz",
        f"{FOLDER}/download",  # bytes go straight to the data plane, not through the API
        f"{FOLDER}/archive",
        f"{FOLDER}/../../etc/passwd",
        "/folders/local/f-123/list/extra",
    ],
)
async def test_the_relay_forwards_nothing_but_folder_operations(target: str) -> None:
    def data_plane(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"forwarded {request.url}")

    async with relay_app(httpx.MockTransport(data_plane)) as http:
        answer = await http.get(f"/console/storage{target}")
    assert answer.status_code == 404
    assert answer.json()["error"] == "not_relayed"


async def test_the_relay_refuses_a_body_larger_than_a_chunk() -> None:
    async with relay_app(httpx.MockTransport(lambda r: httpx.Response(204))) as http:
        answer = await http.patch(
            f"/console/storage{FOLDER}/uploads/abc", content=b"x" * (MAX_BODY_BYTES + 1)
        )
    assert answer.status_code == 413
    assert answer.json()["error"] == "too_large"


async def test_a_data_plane_that_does_not_answer_is_a_502_saying_so() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with relay_app(httpx.MockTransport(down)) as http:
        answer = await http.get(f"/console/storage{FOLDER}/list")
    assert answer.status_code == 502
    assert "did not answer" in answer.json()["message"]
