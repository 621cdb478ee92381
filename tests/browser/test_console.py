"""The web console in a real Chromium against a real ``jetyard up`` (Docker backend): a
researcher signs in, starts sessions from the form and watches them go PENDING → RUNNING →
TERMINATED with their output, without reloading; types in a session's terminal; moves files
through a folder; reads their quota. Every page is saved as a screenshot under
``tests/browser/artifacts/``; every test fails on a page error or on any request that leaves
this machine (``conftest.page``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import BrowserContext, Page, Request, expect

from jetyard.sdk import JetyardAuth
from tests.browser.support import MODEL_IMAGE, Researcher, Watch, shot, sign_in
from tests.e2e.conftest import TEST_IMAGE, Jetyard

FINAL = "TERMINATED"
TERMINATE = "mutation($id: ID!) { terminateSession(id: $id) { status } }"


def new_session(page: Page, base: str, command: str, **fields: str) -> str:
    """Fill the form (batch unless ``type`` says otherwise), send it, and return the new
    session's id from the page it lands on."""
    page.goto(f"{base}/console/#/sessions/new")
    page.fill("#f-image", TEST_IMAGE)
    page.check(f"input[name=type][value={fields.pop('type', 'batch')}]")
    page.fill("#f-cpu", fields.pop("cpu", "0.5"))
    page.fill("#f-memory", fields.pop("memory", "64m"))
    page.fill("#f-command", command)
    for name, value in fields.items():
        page.fill(f"#f-{name}", value)
    page.click("#new-session button[type=submit]")
    expect(page.locator("#session-status")).to_be_visible()
    return page.url.rsplit("/", 1)[-1]


def status(page: Page, wanted: str, timeout: float = 60_000) -> None:
    expect(page.locator(f"#session-status .status[data-status={wanted}]")).to_be_visible(
        timeout=timeout
    )


def test_sign_in_with_a_password_or_a_keypair_and_sign_out(
    page: Page, stack: Jetyard, researcher: Researcher
) -> None:
    page.goto(f"{stack.url}/")  # the gateway's root sends a browser to the console
    expect(page.locator("#sign-in-password")).to_be_visible()
    shot(page, "sign-in")
    page.fill("input[name=email]", researcher.email)
    page.fill("input[name=password]", "not-the-password")
    page.click("#sign-in-password button[type=submit]")
    expect(page.locator(".error-box")).to_contain_text("wrong email or password")
    shot(page, "sign-in-refused")

    sign_in(page, stack.url, researcher)
    expect(page.locator("#who")).to_contain_text(researcher.email)
    expect(page.locator("#nav")).to_contain_text("Sessions")
    page.click("#sign-out")
    expect(page.locator("#sign-in-password")).to_be_visible()

    # A keypair signs every request in the browser (WebCrypto HMAC, the SDK's scheme).
    page.click("#sign-in-password ~ details summary")
    page.fill("input[name=accessKey]", researcher.access_key)
    page.fill("input[name=secretKey]", researcher.secret_key)
    page.click("#sign-in-keypair button[type=submit]")
    expect(page.locator("#sessions")).to_be_visible()
    expect(page.locator("#who")).to_contain_text(researcher.access_key)
    secret_kept = page.evaluate("() => JSON.stringify(sessionStorage)")
    assert researcher.secret_key not in secret_kept  # only the day's derived key is kept
    # Signed mutations, and a subscription signed in connection_init, work as with a token.
    new_session(page, stack.url, "true")
    status(page, FINAL)
    expect(page.locator("#live-state")).to_have_text("live")


def test_a_session_waits_runs_and_ends_live_with_its_output(
    page: Page, context: BrowserContext, watch: Watch, stack: Jetyard, researcher: Researcher
) -> None:
    sign_in(page, stack.url, researcher)
    first = new_session(page, stack.url, "sh -c 'echo first line; sleep 12; echo last line'")
    status(page, "RUNNING")
    expect(page.locator("#session-output")).to_contain_text("first line")
    # The second waits for the first to succeed: PENDING, with the reason, then runs.
    second = new_session(page, stack.url, "sh -c 'echo second says hi; sleep 4'", dependsOn=first)
    reloads: list[object] = []
    page.on("load", lambda loaded: reloads.append(loaded))
    status(page, "PENDING")
    expect(page.locator("#session-wait")).to_be_visible()
    shot(page, "session-pending")

    listing = context.new_page()  # another tab: it signs in for itself (sessionStorage)
    watch.attach(listing)
    sign_in(listing, stack.url, researcher)
    expect(listing.locator(f"tr[data-session='{second}'] .status")).to_have_text("PENDING")
    listing_reloads: list[object] = []
    listing.on("load", lambda loaded: listing_reloads.append(loaded))
    shot(listing, "sessions-live")

    status(page, "RUNNING")
    status(page, FINAL)
    for step in ("PENDING", "RUNNING", FINAL):  # as the subscription said them, in order
        expect(page.locator(f"#history tr[data-status={step}]").first).to_be_visible()
    said = page.locator("#history tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
    assert said.index("PENDING") < said.index("RUNNING") < said.index(FINAL), said
    expect(page.locator("#session-output")).to_contain_text("second says hi")
    expect(page.locator("#session-wait")).to_be_hidden()
    assert not reloads, "the page reloaded"
    shot(page, "session-ended")

    # The list that stayed open followed both to their end through the subscriptions.
    for session in (first, second):
        row = listing.locator(f"tr[data-session='{session}']")
        expect(row.locator(".status")).to_have_text(FINAL)
        expect(row).to_contain_text("succeeded")
    shot(listing, "sessions")

    # A session started elsewhere while the list is open comes in at its top (sessionsAdded).
    third = new_session(page, stack.url, "sh -c 'echo third'")
    expect(listing.locator(f"tr[data-session='{third}']")).to_be_visible()
    first_row = listing.locator("#sessions tbody tr").first
    expect(first_row).to_have_attribute("data-session", third)
    assert not listing_reloads, "the list reloaded"

    page.goto(f"{stack.url}/console/#/sessions/{first}")  # an ended session, opened later
    expect(page.locator("#session-output")).to_contain_text("last line")
    expect(page.locator("#session-output")).to_contain_text("first line")


def test_the_form_says_what_the_gateway_would_refuse_and_shows_what_it_did(
    page: Page, stack: Jetyard, researcher: Researcher
) -> None:
    sign_in(page, stack.url, researcher)
    sent: list[str] = []

    def note(request: Request) -> None:
        if "CreateSession" in (request.post_data or ""):
            sent.append(request.post_data or "")

    page.on("request", note)
    page.goto(f"{stack.url}/console/#/sessions/new")
    page.fill("#f-image", TEST_IMAGE)
    page.fill("#f-cpu", "0.001")
    page.fill("#f-memory", "1.5x")
    page.fill("#f-gpu", "0.125")
    page.fill("#f-command", "echo 'unclosed")
    page.fill("#f-env", "1BAD=x")
    page.click("#new-session button[type=submit]")
    expect(page.locator("[data-field=cpu] .field-problem")).to_contain_text("0.01 of a core")
    expect(page.locator("[data-field=memory] .field-problem")).to_contain_text("is not a size")
    expect(page.locator("[data-field=gpu] .field-problem")).to_contain_text("steps of 0.01")
    expect(page.locator("[data-field=command] .field-problem")).to_contain_text("unclosed")
    expect(page.locator("[data-field=env] .field-problem")).to_contain_text("not valid")
    page.fill("#f-cpu", "3")  # within the gateway's bounds, above the image's
    expect(page.locator("[data-field=cpu] .field-problem")).to_contain_text("at most 2 cores")
    shot(page, "new-session-problems")
    assert sent == [], "a form with problems was sent"

    # What only the gateway knows: the session named in dependsOn does not exist.
    page.fill("#f-cpu", "0.5")
    page.fill("#f-memory", "64m")
    page.fill("#f-gpu", "0")
    page.fill("#f-command", "true")
    page.fill("#f-env", "")
    page.fill("#f-dependsOn", "no-such-session")
    page.click("#new-session button[type=submit]")
    refusal = page.locator(".error-box")
    expect(refusal).to_contain_text("not-found")
    expect(refusal).to_contain_text("no-such-session")
    assert len(sent) == 1
    shot(page, "new-session-refused")

    # A cluster session: each kernel's share and the total, never the total multiplied.
    page.fill("#f-dependsOn", "")
    page.fill("#f-clusterSize", "2")
    page.click("#new-session button[type=submit]")
    expect(page.locator("#session-status")).to_be_visible()
    expect(page.locator("main")).to_contain_text(
        "2 kernels \u00d7 (0.5 CPU · 64 MiB) = 1 CPU · 128 MiB"
    )
    shot(page, "cluster-session-resources")


def test_the_terminal_runs_what_is_typed(
    page: Page, stack: Jetyard, researcher: Researcher
) -> None:
    sign_in(page, stack.url, researcher)
    session = new_session(page, stack.url, "sleep 600", type="interactive", name="shell-test")
    try:
        status(page, "RUNNING")
        page.click("#open-terminal")
        rows = page.locator("#terminal .xterm-rows")
        expect(rows).to_contain_text("#", timeout=30_000)  # the shell's prompt
        page.keyboard.type("echo $((6 * 7))-typed-in-the-browser\n")
        expect(rows).to_contain_text("42-typed-in-the-browser")
        shot(page, "session-terminal")
        page.click("#terminate")
        status(page, FINAL)
        expect(rows).to_contain_text("terminal closed", timeout=30_000)  # the session ended it
    finally:
        # A failure above must not leave its container running past the stack.
        stack.gql(TERMINATE, id=session)


def test_a_folder_takes_an_upload_and_gives_it_back(
    page: Page, stack: Jetyard, researcher: Researcher, tmp_path: Path
) -> None:
    sign_in(page, stack.url, researcher)
    page.goto(f"{stack.url}/console/#/folders")
    page.fill("#new-folder-name", "results")
    page.click("#new-folder button[type=submit]")
    expect(page.locator("#entries")).to_be_visible()
    data = tmp_path / "weights.bin"
    data.write_bytes(bytes(range(256)) * 40_000)  # ~10 MiB: three upload chunks
    page.set_input_files("#upload-files", str(data))
    expect(page.locator("#entries tr[data-entry='weights.bin']")).to_be_visible(timeout=60_000)
    shot(page, "folder")
    with page.expect_download() as download:
        page.click("#entries tr[data-entry='weights.bin'] button:has-text('Download')")
    assert Path(download.value.path()).read_bytes() == data.read_bytes()
    page.goto(f"{stack.url}/console/#/folders")
    expect(page.locator("#folders tr[data-folder='results']")).to_be_visible()
    shot(page, "folders")


def test_quota_and_usage(page: Page, stack: Jetyard, researcher: Researcher) -> None:
    sign_in(page, stack.url, researcher)
    page.goto(f"{stack.url}/console/#/quota")
    for scope in ("keypair", "user", "project", "domain"):
        expect(page.locator(f"#quota tr[data-scope={scope}]")).to_be_visible()
    expect(page.locator("#usage-table, #usage-empty, #usage-missing")).to_be_visible()
    # Held and the limit are said apart (and what waits, when something does).
    cpu = page.locator("#quota tr[data-scope=keypair] [data-slot=cpu] .held")
    expect(cpu).to_contain_text(" held")
    expect(cpu).to_contain_text(" · limit ")
    shot(page, "quota")


ENDPOINT = """mutation($input: CreateEndpointInput!) { createEndpoint(input: $input) {
    status message endpoint { id url } } }"""
TOKEN = "mutation($id: String!) { createEndpointToken(id: $id) { token } }"


def as_researcher(stack: Jetyard, who: Researcher, query: str, **variables: Any) -> Any:
    answer = httpx.post(
        f"{stack.url}/graphql", json={"query": query, "variables": variables}, timeout=30,
        auth=JetyardAuth(who.access_key, who.secret_key),
    )  # fmt: skip
    answer.raise_for_status()
    return answer.json()


def test_an_endpoint_shows_its_replicas_states_and_traffic(
    page: Page, stack: Jetyard, researcher: Researcher
) -> None:
    made = as_researcher(stack, researcher, ENDPOINT, input={
        "name": "console-echo",
        "revision": {"image": MODEL_IMAGE, "port": 8000, "cpu": "0.25", "memory": "128m",
                     "command": ["python3", "/opt/jetyard/echo/server.py"],
                     "health": {"intervalS": 1, "warmupS": 60}},
        "replicas": 1,
    })  # fmt: skip
    assert "errors" not in made, made
    endpoint = made["data"]["createEndpoint"]["endpoint"]
    issued = as_researcher(stack, researcher, TOKEN, id=endpoint["id"])
    token = issued["data"]["createEndpointToken"]["token"]
    try:
        sign_in(page, stack.url, researcher)
        page.goto(f"{stack.url}/console/#/endpoints")
        row = page.locator("#endpoints tr[data-endpoint='console-echo']")
        expect(row.locator("[data-status]")).to_have_text("READY", timeout=90_000)
        bearer = {"Authorization": f"Bearer {token}"}
        for _ in range(20):  # traffic the proxies will report
            answered = httpx.get(endpoint["url"] + "whoami", headers=bearer, timeout=30)
            assert answered.status_code == 200, answered.text
        expect(row.locator(".traffic")).to_contain_text("req/s", timeout=15_000)
        shot(page, "endpoints")
        row.locator("a").click()
        replica = page.locator("#endpoint-replicas tr[data-replica='1']")
        expect(replica).to_contain_text("RUNNING")
        expect(replica).to_contain_text("HEALTHY")
        expect(replica).to_contain_text("ACTIVE")
        expect(replica).to_contain_text("GET /health: 200")
        expect(page.locator("#endpoint-facts")).to_contain_text("1 serving of 1 desired")
        shot(page, "endpoint")
    finally:
        destroy = "mutation($id: String!) { destroyEndpoint(id: $id) { status } }"
        as_researcher(stack, researcher, destroy, id=endpoint["id"])
