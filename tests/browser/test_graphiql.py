"""GraphiQL in a real Chromium against a real gateway (in-process, on the real log): signed in
(a login token in the page's requests, as its headers pane would send it) it loads the schema
(its own introspection query answers 200 with the whole schema) and shows it in its
documentation explorer; anonymous, the same query is refused, as every query is."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, Page, Response, async_playwright

from events.bus import Bus
from tests.browser.support import chromium_binary
from tests.integration.gateway_support import Gateway, running_gateway

LOGIN = "mutation($e: String!, $p: String!) { login(email: $e, password: $p) { token } }"


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("graphiql")) as gw:
        yield gw


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as running:
        launched = await running.chromium.launch(
            executable_path=chromium_binary(), args=["--no-sandbox"]
        )
        yield launched
        await launched.close()


async def _introspection_answer(
    browser: Browser, gateway: Gateway, headers: dict[str, str]
) -> tuple[Response, Page]:
    """GraphiQL opened with ``headers`` on every request: its introspection's answer, and the
    page (still open: the caller closes its context)."""
    context = await browser.new_context(extra_http_headers=headers)
    page = await context.new_page()
    async with page.expect_response(
        lambda r: r.request.method == "POST" and "IntrospectionQuery" in (r.request.post_data or "")
    ) as answered:
        await page.goto(f"{gateway.url}/graphql")
    return await answered.value, page


async def test_graphiql_loads_the_schema_for_a_signed_in_caller(
    gateway: Gateway, browser: Browser
) -> None:
    admin = gateway.admin
    signed_in = await gateway.gql(LOGIN, auth=None, e=admin.email, p=admin.password)
    token = signed_in["data"]["login"]["token"]
    response, page = await _introspection_answer(
        browser, gateway, {"Authorization": f"Bearer {token}"}
    )
    try:
        assert response.status == 200
        body = json.loads(await response.text())
        assert "errors" not in body, body["errors"]
        assert body["data"]["__schema"]["queryType"]["name"] == "Query"
        # The documentation explorer lists the root types once the schema is in.
        await page.get_by_role("button", name="Show Documentation Explorer").click()
        await page.get_by_text("Root Types").wait_for()
        await page.locator(".graphiql-doc-explorer").get_by_text("Query").first.wait_for()
    finally:
        await page.context.close()


async def test_graphiql_without_credentials_gets_no_schema(
    gateway: Gateway, browser: Browser
) -> None:
    response, page = await _introspection_answer(browser, gateway, {})
    try:
        assert response.status == 401
        assert json.loads(await response.text())["errors"][0]["extensions"]["code"] == (
            "unauthenticated"
        )
    finally:
        await page.context.close()
