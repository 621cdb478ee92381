"""``/metrics`` of a whole ``jetyard up`` (simulated machine with two GPUs): every service named
in ``prometheus-targets.json`` answers a page Prometheus' parser reads, and its figures agree
with the GraphQL API — sessions by status, the queue's length, node states and each GPU's
allocation against ``nodes``, HTTP requests grown by exactly the requests made, the events
every service appended adding up to the log's last sequence, the views' lag gone to 0."""

from __future__ import annotations

import json
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from jetyard.runtime.natsserver import free_port
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until
from tests.metrics_support import Scraped, documented, family

SERVICES = {
    "projections", "tenancy", "scheduler", "agent", "storage", "appproxy", "serving", "sealer",
    "gateway",
}  # fmt: skip
CREATE = """
mutation($input: CreateSessionInput!) { createSession(input: $input) { status sessionId } }"""
SESSIONS = "{ sessions(first: 20) { edges { node { id status history { status } } } } }"
SESSION = "query($id: ID!) { session(id: $id) { status queuePosition queueLength } }"
NODES = "{ nodes { id hostname state used { gpu } capacity { gpu } } }"


def targets(stack: Jetyard) -> dict[str, str]:
    """Service -> its /metrics URL, from the file ``up`` writes for Prometheus."""
    groups = json.loads((stack.data_dir / "prometheus-targets.json").read_text())
    return {g["labels"]["service"]: f"http://{g['targets'][0]}/metrics" for g in groups}


def scrape(url: str) -> Scraped:
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, (url, response.status_code)
    assert response.headers["content-type"].startswith("text/plain")
    return Scraped(response.text)


def create(stack: Jetyard, **spec: Any) -> str:
    small = {"image": TEST_IMAGE, "cpu": "0.25", "memory": "64m"}  # the machine may have 2 cores
    answer = stack.gql(CREATE, input={**small, **spec})["data"]["createSession"]
    assert answer["status"] == "ACCEPTED", answer
    session_id: str = answer["sessionId"]
    return session_id


def status_of(stack: Jetyard, session_id: str) -> dict[str, Any]:
    found: dict[str, Any] = stack.gql(SESSION, id=session_id)["data"]["session"]
    return found


def agreeing(check: Any, what: str, timeout: float = 30.0) -> None:
    """Views, the scheduler and the scrape settle at their own pace: ask until they agree."""
    last: list[str] = []

    def agrees() -> bool:
        try:
            check()
        except AssertionError as exc:
            last[:] = [str(exc)]
            return False
        return True

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if agrees():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} never agreed: {last}")


def test_every_service_s_metrics_parse_and_agree_with_the_api(tmp_path: Path) -> None:
    env = {"JETYARD_AGENT_SIMULATED_GPUS": "2"}
    stack = Jetyard(tmp_path / "data", free_port(), "simulated", env).start(timeout=120)
    urls = targets(stack)
    assert set(urls) == SERVICES
    assert urls["gateway"] == f"{stack.url}/metrics"
    for url in urls.values():
        scrape(url)  # every page parses

    whole = create(stack, gpu="1", command=["run"])
    shared = create(stack, gpu="0.5", command=["run"])
    done = create(stack, type="batch", command=["exit", "0"])
    waiting = create(stack, gpu="2", command=["run"])
    wait_until(lambda: status_of(stack, whole)["status"] == "RUNNING", "the whole GPU ran")
    wait_until(lambda: status_of(stack, shared)["status"] == "RUNNING", "the share ran")
    wait_until(lambda: status_of(stack, done)["status"] == "TERMINATED", "the batch ended")
    wait_until(lambda: status_of(stack, waiting)["queueLength"] == 1, "the queue showed it")

    def sessions_agree() -> None:
        sessions = [e["node"] for e in stack.gql(SESSIONS)["data"]["sessions"]["edges"]]
        by_status = Counter(s["status"] for s in sessions)
        page = scrape(urls["scheduler"])
        scraped = {
            status: page.total("jetyard_sessions", status=status)
            for status in {dict(k)["status"] for k in page.where("jetyard_sessions")}
        }
        assert {s: n for s, n in scraped.items() if n} == dict(by_status)
        in_default = {"resource_group": "default"}
        shown = status_of(stack, waiting)["queueLength"]
        assert page.get("jetyard_queue_length", **in_default) == shown
        assert page.get("jetyard_queue_oldest_wait_seconds", **in_default) > 0
        placed = sum("SCHEDULED" in [h["status"] for h in s["history"]] for s in sessions)
        assert page.get("jetyard_scheduling_latency_seconds_count", **in_default) == placed

    agreeing(sessions_agree, "sessions by status")

    def nodes_agree() -> None:
        nodes = stack.gql(NODES)["data"]["nodes"]
        page = scrape(urls["scheduler"])
        assert page.total("jetyard_nodes") == len(nodes)
        for state, count in Counter(n["state"] for n in nodes).items():
            assert page.total("jetyard_nodes", state=state) == count
        for node in nodes:
            devices = page.where("jetyard_gpu_allocated", node=node["id"])
            assert len(devices) == int(Decimal(node["capacity"]["gpu"])) == 2
            assert sorted(devices.values()) == [0.5, 1.0]
            held = Decimal(str(sum(devices.values())))
            assert held == Decimal(node["used"]["gpu"]) == Decimal("1.5")
            assert page.get(
                "jetyard_node_allocated", node=node["id"], hostname=node["hostname"],
                resource_group="default", resource="gpu",
            ) == 1.5  # fmt: skip

    agreeing(nodes_agree, "nodes and GPUs")

    # HTTP requests: exactly the requests made, by route template and status.
    requests = "jetyard_http_requests_total"
    graphql = {"route": "/graphql", "method": "POST", "status": "200"}
    before = scrape(urls["gateway"]).value(requests, **graphql) or 0
    for _ in range(5):
        stack.gql("{ viewer { userId } }")
    assert scrape(urls["gateway"]).get(requests, **graphql) == before + 5
    storage_health = {"route": "/healthz", "method": "GET", "status": "200"}
    before = scrape(urls["storage"]).value(requests, **storage_health) or 0
    assert httpx.get(urls["storage"].removesuffix("/metrics") + "/healthz").status_code == 200
    assert scrape(urls["storage"]).get(requests, **storage_health) == before + 1
    # Proxy traffic: a request for an app no session has is a 404 through the proxy.
    proxied = {"kind": "http", "code": "4xx"}
    before = scrape(urls["appproxy"]).value("jetyard_proxy_requests_total", **proxied) or 0
    proxy = urls["appproxy"].removesuffix("/metrics")
    assert httpx.get(f"{proxy}/apps/nosuch/app/").status_code == 404
    assert scrape(urls["appproxy"]).get("jetyard_proxy_requests_total", **proxied) == before + 1

    def log_agrees() -> None:
        pages = {service: scrape(url) for service, url in urls.items()}
        last = pages["projections"].get("jetyard_log_last_sequence")
        appended = sum(p.total("jetyard_events_appended_total") for p in pages.values())
        assert appended == last  # every writer is one of these processes, none restarted
        assert pages["sealer"].get("jetyard_seal_position") == last  # sealed within seconds
        assert pages["sealer"].get("jetyard_seal_lag_events") == 0
        lag = pages["projections"].get("jetyard_consumer_lag", consumer="projections", kind="views")
        assert lag == 0
        for service, consumer, kind in (
            ("scheduler", "scheduler", "fold"),
            ("scheduler", "scheduler", "commands"),
            ("tenancy", "tenancy", "fold"),
            ("storage", "storage", "commands"),
            ("appproxy", "appproxy", "fold"),
            ("serving", "serving", "fold"),
            ("serving", "serving", "commands"),
            ("gateway", "gateway-quotas", "fold"),
        ):
            assert pages[service].get("jetyard_consumer_lag", consumer=consumer, kind=kind) == 0

    agreeing(log_agrees, "the log and its consumers")
    served = set()
    for url in urls.values():
        page = scrape(url)
        # Declared counts: a family labelled per endpoint has samples only once an endpoint
        # was asked something (none is here), but its page says it is there.
        served |= {family(name) for name in page.names()} | page.declared()
    assert documented() - served == set()  # every metric docs/metrics.md names is served
    assert stack.stop() == 0
