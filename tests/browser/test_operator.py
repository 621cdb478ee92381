"""The operator pages in a real Chromium against a real ``jetyard up`` whose simulated machine has
four GPUs, signed in as the superadmin ``up`` made: the GPU map follows fractional sessions
without a reload and says in words why a waiting request does not fit; a node is cordoned and
uncordoned from its card; usage exported as CSV is the GraphQL answer for the same range; a
session's and a node's event logs open and grow live; people and policies are listed; in a
fair-share group the Queue page shows a waiting session's factors. Every page is saved under
``tests/browser/artifacts/operator-*.png``; every test fails on a page error or a request that
leaves this machine (``conftest.page``)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from jetyard.runtime.natsserver import free_port
from jetyard.sdk.auth import JetyardAuth
from tests.browser.support import Researcher, Watch, add_researcher, shot, sign_in
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until
from tests.integration.test_usage_gateway import as_csv

GPUS = 4
CREATE = "mutation($i: CreateSessionInput!) { createSession(input: $i) { status sessionId } }"
TERMINATE = "mutation($id: ID!) { terminateSession(id: $id) { status } }"
SESSION = "query($id: ID!) { session(id: $id) { status statusReason } }"
NODES = "{ nodes { id hostname state } }"
USAGE = """query($from: DateTime!, $to: DateTime!, $g: UsageGroup!) {
  usage(from: $from, to: $to, groupBy: $g) {
    rows { key name cpuCoreSeconds memoryGibSeconds gpuSeconds sessions
           gpuDeviceSeconds { node device seconds shareSeconds } } } }"""


@pytest.fixture(scope="module")
def gpu_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jetyard]:
    env = {"JETYARD_AGENT_SIMULATED_GPUS": str(GPUS)}
    data = Path(tmp_path_factory.mktemp("operator")) / "data"
    started = Jetyard(data, free_port(), "simulated", env)
    started.start(timeout=120)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def operator(gpu_stack: Jetyard) -> Researcher:
    """The superadmin ``jetyard up`` made on its first start."""
    a = gpu_stack.admin
    return Researcher(a["email"], a["user_id"], a["access_key"], a["secret_key"], a["password"])


@pytest.fixture
def sessions(gpu_stack: Jetyard) -> Iterator[list[str]]:
    """Sessions a test starts, ended when it ends (the next test finds the GPUs free)."""
    made: list[str] = []
    yield made
    for session_id in made:
        gpu_stack.gql(TERMINATE, id=session_id)
    wait_until(
        lambda: all(status(gpu_stack, s) in {"TERMINATED", "CANCELLED"} for s in made),
        "the test's sessions ended",
    )


def create(stack: Jetyard, made: list[str], **spec: Any) -> str:
    small = {"image": TEST_IMAGE, "cpu": "0.1", "memory": "32m", "command": ["run"]}
    answer = stack.gql(CREATE, i={**small, **spec})["data"]["createSession"]
    assert answer["status"] == "ACCEPTED", answer
    made.append(answer["sessionId"])
    return str(answer["sessionId"])


def status(stack: Jetyard, session_id: str) -> str:
    return str(stack.gql(SESSION, id=session_id)["data"]["session"]["status"])


def the_node(stack: Jetyard) -> dict[str, str]:
    (node,) = stack.gql(NODES)["data"]["nodes"]
    return dict(node)


def no_reloads(page: Page) -> list[object]:
    reloads: list[object] = []
    page.on("load", lambda loaded: reloads.append(loaded))
    return reloads


def test_the_gpu_map_follows_fractional_sessions_and_explains_the_fragmentation(
    page: Page, gpu_stack: Jetyard, operator: Researcher, sessions: list[str]
) -> None:
    node = the_node(gpu_stack)
    sign_in(page, gpu_stack.url, operator)
    page.goto(f"{gpu_stack.url}/console/#/operate/cluster")
    card = page.locator(f"#op-nodes .op-node[data-node='{node['id']}']")
    expect(card.locator(".op-gpu")).to_have_count(GPUS)
    expect(card.locator(".op-gpu[data-used='0']")).to_have_count(GPUS)
    expect(page.locator("#live-state")).to_have_text("live", timeout=20_000)
    reloads = no_reloads(page)
    shot(page, "operator-cluster-idle")

    # Half a GPU, then 0.6 (FILL: it does not fit beside the half, so it takes GPU 1).
    half = create(gpu_stack, sessions, gpu="0.5", name="half-gpu")
    expect(card.locator(".op-gpu[data-index='0']")).to_have_attribute("data-used", "50")
    segment = card.locator(f".op-gpu[data-index='0'] .op-gpu-seg[data-session='{half}']")
    expect(segment).to_have_attribute("title", re.compile(r"^0\.5 · session half-gpu of "))
    # The sessions on the node are drawn when its card is opened, and follow while it is.
    expect(card.locator(".op-kernels")).to_have_count(0)
    card.locator(".op-node-more summary").click()
    expect(card.locator(f".op-kernels tr[data-session='{half}']")).to_be_visible()
    sixty = create(gpu_stack, sessions, gpu="0.6", name="sixty")
    expect(card.locator(".op-gpu[data-index='1']")).to_have_attribute("data-used", "60")
    expect(card.locator(f".op-kernels tr[data-session='{sixty}']")).to_be_visible()
    # 2.9 GPUs are free, but 2.6 as shares needs 3 GPUs with 2.6 between them: 1 + 1 + 0.5.
    waiting = create(gpu_stack, sessions, gpu="2.6", name="big-share")
    wait_until(lambda: "fragmentation" in stack_reason(gpu_stack, waiting), "the request waited")
    note = page.locator(f"#op-notes li[data-session='{waiting}']")
    expect(note).to_have_attribute("data-kind", "fragmented")
    expect(note).to_contain_text("2.9 GPUs are free in group default, but no node has 2.6 free")
    expect(note).to_contain_text("0.5 + 0.4 of shared GPUs")
    expect(note).to_contain_text("GPU 0: 0.5 held by session half-gpu")
    expect(note).to_contain_text("The waiting 2.6-GPU request of session big-share")
    expect(page.locator("#op-cluster-summary")).to_contain_text("1 waiting")
    assert not reloads, "the page reloaded"
    shot(page, "operator-cluster-gpu-map")

    page.goto(f"{gpu_stack.url}/console/#/operate/queue")
    row = page.locator(f".op-queue[data-group='default'] tr[data-session='{waiting}']")
    expect(row).to_contain_text("1st")
    expect(row.locator(".op-why")).to_contain_text("fragmentation")
    expect(row.locator(".op-kind")).to_have_text("fragmented")
    shot(page, "operator-queue")


def stack_reason(stack: Jetyard, session_id: str) -> str:
    return str(stack.gql(SESSION, id=session_id)["data"]["session"]["statusReason"])


POLICY = """mutation($q: String!) {
    modifyResourceGroup(name: "default", queuePolicy: $q) { status message } }"""
FACTORS = "query($id: ID!) { session(id: $id) { fairShare { domain project user } } }"


def test_the_queue_shows_a_fair_share_groups_factors(
    page: Page, gpu_stack: Jetyard, operator: Researcher, sessions: list[str]
) -> None:
    changed = gpu_stack.gql(POLICY, q="fair-share")["data"]["modifyResourceGroup"]
    assert changed["status"] == "ACCEPTED", changed
    try:
        create(gpu_stack, sessions, gpu=str(GPUS), name="all-gpus")
        waiting = create(gpu_stack, sessions, gpu="1", name="fair-wait")
        wait_until(lambda: "; fair share: " in stack_reason(gpu_stack, waiting), "its factors")
        factors = gpu_stack.gql(FACTORS, id=waiting)["data"]["session"]["fairShare"]
        sign_in(page, gpu_stack.url, operator)
        page.goto(f"{gpu_stack.url}/console/#/operate/queue")
        queue = page.locator(".op-queue[data-group='default']")
        expect(queue.locator("thead")).to_contain_text("Fair share")
        cell = queue.locator(f"tr[data-session='{waiting}'] .op-fair-share")
        # The user's factor first, then the domain's and project's that order before it: the
        # numbers the API gives, two decimals.
        expect(cell).to_contain_text(f"{factors['user']:.2f}")
        expect(cell.locator(".sub")).to_have_text(
            f"domain {factors['domain']:.2f} · project {factors['project']:.2f}"
        )
        expect(cell).to_have_attribute("title", re.compile(r"^2\^\(-usage/share\)"))
        shot(page, "operator-queue-fair-share")
    finally:
        gpu_stack.gql(POLICY, q="fifo")


def test_an_operator_cordons_and_uncordons_a_node_from_its_card(
    page: Page, gpu_stack: Jetyard, operator: Researcher
) -> None:
    node = the_node(gpu_stack)
    sign_in(page, gpu_stack.url, operator)
    page.goto(f"{gpu_stack.url}/console/#/operate/cluster")
    card = page.locator(f"#op-nodes .op-node[data-node='{node['id']}']")
    expect(card).to_have_attribute("data-state", "schedulable")
    reloads = no_reloads(page)
    try:
        card.locator("button.op-cordon").click()
        card.locator(".op-node-form input[name=reason]").fill("firmware update")
        shot(page, "operator-cordon-form")
        card.locator(".op-node-form button[type=submit]").click()
        expect(card).to_have_attribute("data-state", "cordoned")
        expect(card.locator(".op-state")).to_have_text("cordoned")
        expect(card.locator(".op-node-reason")).to_contain_text("firmware update")
        expect(card.locator(".op-node-status")).to_contain_text("Cordon: accepted")
        assert the_node(gpu_stack)["state"] == "cordoned"
        shot(page, "operator-cluster-cordoned")

        card.locator("button.op-uncordon").click()
        card.locator(".op-node-form button[type=submit]").click()
        expect(card).to_have_attribute("data-state", "schedulable")
        assert the_node(gpu_stack)["state"] == "schedulable"
        assert not reloads, "the page reloaded"
    finally:
        if the_node(gpu_stack)["state"] != "schedulable":
            gpu_stack.gql("mutation($id: ID!) { uncordonNode(id: $id) { status } }", id=node["id"])


def test_usage_is_charted_and_its_csv_is_the_graphql_answer(
    page: Page, gpu_stack: Jetyard, operator: Researcher, sessions: list[str]
) -> None:
    used = create(gpu_stack, sessions, gpu="1", name="one-gpu")
    wait_until(lambda: status(gpu_stack, used) == "RUNNING", "the session ran")
    sign_in(page, gpu_stack.url, operator)
    page.goto(f"{gpu_stack.url}/console/#/operate/usage")
    form = page.locator("#op-usage-form")
    form.locator("select[name=groupBy]").select_option("USER")
    form.locator("button[type=submit]").click()
    result = page.locator("#op-usage-result")
    expect(result.locator(f"#op-usage-table tr[data-key='{operator.user_id}']")).to_be_visible()
    expect(result.locator("svg.op-bars .op-bar")).not_to_have_count(0)
    expect(result.locator("svg.op-columns rect")).not_to_have_count(0)
    shot(page, "operator-usage")
    asked = {
        "from": result.get_attribute("data-from"),
        "to": result.get_attribute("data-to"),
        "g": result.get_attribute("data-group-by"),
    }
    with page.expect_download() as downloading:
        page.click("#op-usage-csv")
    saved = Path(downloading.value.path())
    assert downloading.value.suggested_filename.startswith("usage-user-")
    text = saved.read_bytes().decode()  # not read_text(): it would turn CSV's \r\n into \n
    answer = gpu_stack.gql(USAGE, **asked)
    assert "errors" not in answer, answer
    report = answer["data"]["usage"]
    rows = report["rows"]
    assert any(r["key"] == operator.user_id and r["gpuSeconds"] > 0 for r in rows), rows
    assert list(csv.reader(io.StringIO(text))) == as_csv(report)
    # And byte for byte what the endpoint answers the same question.
    direct = httpx.get(
        f"{gpu_stack.url}/usage.csv",
        params={"from": asked["from"], "to": asked["to"], "groupBy": "user"},
        auth=gpu_stack.auth,
        timeout=30,
    )
    assert direct.content == saved.read_bytes()


def test_a_session_s_event_log_opens_filters_and_grows_live(
    page: Page, watch: Watch, gpu_stack: Jetyard, operator: Researcher, sessions: list[str]
) -> None:
    session = create(gpu_stack, sessions, type="batch", command=["sleep", "4"], name="audited")
    sign_in(page, gpu_stack.url, operator)
    page.goto(f"{gpu_stack.url}/console/#/operate/events/session/{session}")
    log = page.locator("#op-log")
    expect(log.locator("tr[data-name='SessionRequested']")).to_be_visible()
    reloads = no_reloads(page)
    # The session ends while the page is open: its last events arrive without a reload.
    expect(log.locator("tr[data-name='SessionTerminated']")).to_be_visible(timeout=60_000)
    expect(log.locator("tr[data-name='SessionStarted']")).to_be_visible()
    said = log.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.seq)")
    seqs = [int(s) for s in said]
    assert seqs == sorted(seqs) and len(seqs) >= 4, seqs
    log.locator("tr[data-name='SessionRequested'] details summary").click()
    expect(log.locator("tr[data-name='SessionRequested'] pre")).to_contain_text(TEST_IMAGE)
    assert not reloads, "the page reloaded"
    shot(page, "operator-audit-session")

    page.fill("#op-log-search", "terminated")
    expect(log.locator("tr[data-name='SessionRequested']")).to_be_hidden()
    expect(log.locator("tr[data-name='SessionTerminated']")).to_be_visible()
    page.fill("#op-log-search", "")
    page.select_option("#op-log-names", ["SessionStarted", "SessionTerminated"])
    page.click("#op-log-apply")
    expect(log.locator("tbody tr")).to_have_count(2)
    summary = page.locator("#op-log-summary")
    expect(summary).to_contain_text("only SessionStarted, SessionTerminated")

    node = the_node(gpu_stack)
    page.goto(f"{gpu_stack.url}/console/#/operate/events")
    expect(page.locator("#op-audit-open")).to_be_visible()
    shot(page, "operator-audit")
    page.click(f".op-audit-nodes a[href='#/operate/events/node/{node['id']}']")
    expect(log.locator("tr[data-name='NodeRegistered']")).to_be_visible()
    expect(log.locator("tr[data-name='ResourcesAllocated']").first).to_be_visible()
    shot(page, "operator-audit-node")
    assert not watch.errors


def test_an_auditor_reads_the_log_filters_it_and_cannot_act(
    page: Page, watch: Watch, gpu_stack: Jetyard, sessions: list[str]
) -> None:
    session = create(gpu_stack, sessions, type="batch", command=["exit", "0"], name="audited-2")
    auditor = add_researcher(gpu_stack, f"auditor-{session[:6]}", role="auditor")
    sign_in(page, gpu_stack.url, auditor)
    expect(page.locator("nav a[href='#/operate/log']")).to_be_visible()
    page.goto(f"{gpu_stack.url}/console/#/operate/log")
    rows = page.locator("#op-auditlog-rows tr")
    expect(rows.first).to_be_visible()
    page.select_option("#op-auditlog-filter select[name=type]", "session")
    page.fill("#op-auditlog-filter input[name=id]", session)
    page.click("#op-auditlog-filter button[type=submit]")
    expect(page.locator("#op-auditlog-rows tr[data-name='SessionRequested']")).to_be_visible()
    names = rows.evaluate_all("rows => rows.map(r => r.dataset.name)")
    assert names[0] == "SessionRequested" and len(names) >= 2, names
    assert set(rows.evaluate_all("rows => rows.map(r => r.dataset.domain)")) == {"default"}
    shot(page, "auditor-log")
    refused = as_auditor(
        gpu_stack, auditor, 'mutation { createVFolder(input: {name: "x"}) { status } }'
    )
    assert refused["errors"][0]["extensions"]["code"] == "forbidden"
    assert not watch.errors


def as_auditor(stack: Jetyard, who: Researcher, query: str) -> Any:
    answer = httpx.post(
        f"{stack.url}/graphql", json={"query": query},
        auth=JetyardAuth(who.access_key, who.secret_key), timeout=30,
    )  # fmt: skip
    return answer.json()


def test_people_projects_keypairs_and_policies_are_listed(
    page: Page, gpu_stack: Jetyard, operator: Researcher
) -> None:
    sign_in(page, gpu_stack.url, operator)
    expect(page.locator("#nav ul[aria-label=Operate]")).to_contain_text("Cluster")
    page.click("#nav a[href='#/operate/people']")
    users = page.locator("#op-users")
    row = users.locator(f"tr[data-user='{operator.user_id}']")
    expect(row).to_contain_text(operator.email)
    row.locator(".op-keys button").click()
    expect(row.locator(".op-keys")).to_contain_text(operator.access_key)
    expect(page.locator("#op-projects")).to_contain_text("default")
    expect(page.locator("#op-policies tbody tr")).not_to_have_count(0)
    expect(page.locator("#op-groups tr[data-group='default']")).to_be_visible()
    shot(page, "operator-people")
