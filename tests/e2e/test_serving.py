"""Model serving end to end on a real ``jetyard up`` with Docker, driven as a user drives it
(``jetyard endpoint`` and ``jetyard vfolder``; requests over HTTP to the endpoint's URL):

- the real model (``jetyard-model``: WordLlama embeddings, its files uploaded into a folder that
  every replica mounts read-only) behind two replicas answers ``/v1/embeddings`` with a token,
  refuses a request without one or with a revoked one; a replica's container killed under load:
  requests keep succeeding (at most the one in flight fails) and a new replica takes its place;
- autoscaling on requests in flight: a load step raises the replicas, they fall back after the
  cooldown; scaled to zero, the first request is held and answered once a replica is up;
- a rolling update under constant load fails no request, and a revision that never becomes
  healthy is rolled back by itself.

The autoscaling and rollout tests run the echo replica (``images/echo/server.py``, in the model
image) so that what is measured is the controller and the proxy, not the model.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.appproxy_support import running_stack
from tests.e2e.conftest import Jetyard, wait_until
from tests.e2e.test_vfolders import admin_of
from tests.e2e.user_support import JETYARD

ROOT = Path(__file__).resolve().parents[2]
MODEL_IMAGE = "jetyard-model:latest"
ECHO = "python3 /opt/jetyard/echo/server.py"
MODEL = "python3 /opt/jetyard/model/server.py"
FAST_HEALTH = ("--health-interval", "1s", "--warmup", "15s")
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def model_image() -> str:
    subprocess.run([str(ROOT / "scripts" / "build-model-image")], check=True, timeout=600)
    return MODEL_IMAGE


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, model_image: str) -> Iterator[Jetyard]:
    yield from running_stack(tmp_path_factory.mktemp("serving"))


def endpoint_cli(stack: Jetyard, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    admin = stack.admin
    env = {
        **os.environ,
        "JETYARD_ENDPOINT": stack.url,
        "JETYARD_ACCESS_KEY": admin["access_key"],
        "JETYARD_SECRET_KEY": admin["secret_key"],
    }
    done = subprocess.run(
        [JETYARD, "endpoint", *args], env=env, capture_output=True, text=True, timeout=120
    )
    if ok:
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def shown(stack: Jetyard, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(endpoint_cli(stack, "show", name, "--json").stdout)
    return found


def wait_endpoint(
    stack: Jetyard, name: str, check: Callable[[dict[str, Any]], bool], what: str,
    timeout: float = 180,
) -> dict[str, Any]:  # fmt: skip
    seen: dict[str, Any] = {}

    def looked() -> bool:
        nonlocal seen
        seen = shown(stack, name)
        return check(seen)

    try:
        wait_until(looked, what, timeout)
    except AssertionError:
        raise AssertionError(f"{what}; last seen: {json.dumps(seen, indent=1)}") from None
    return seen


def serving(endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r for r in endpoint["replicas"]
        if (r["lifecycle"], r["health"], r["traffic"]) == ("RUNNING", "HEALTHY", "ACTIVE")
    ]  # fmt: skip


def ready(replicas: int) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["status"] == "READY" and len(serving(e)) == e["desiredReplicas"] == replicas


def token_for(stack: Jetyard, name: str) -> tuple[str, str]:
    """(token id, token) of a new token."""
    issued = json.loads(endpoint_cli(stack, "token", "create", name, "--json").stdout)
    return issued["tokenId"], issued["token"]


@dataclass
class Load:
    """``clients`` threads sending requests one after another until stopped; every answer's
    status (or the exception) kept."""

    url: str
    token: str
    clients: int = 2
    body: dict[str, Any] | None = None
    path: str = "whoami"
    statuses: list[int | str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Load:
        for _ in range(self.clients):
            thread = threading.Thread(target=self._run, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(timeout=30, headers=headers) as client:
            while not self._stop.is_set():
                try:
                    if self.body is None:
                        answer = client.get(self.url + self.path)
                    else:
                        answer = client.post(self.url + self.path, json=self.body)
                    self.statuses.append(answer.status_code)
                except httpx.HTTPError as exc:
                    self.statuses.append(type(exc).__name__)

    @property
    def failed(self) -> list[int | str]:
        return [s for s in self.statuses if s != 200]


def replica_containers(session_id: str) -> list[str]:
    ours = ["docker", "ps", "--quiet", "--filter", f"label=jetyard.session_id={session_id}"]
    return subprocess.run(ours, capture_output=True, text=True, check=True).stdout.split()


def test_the_real_model_behind_two_replicas_with_tokens_and_a_replica_lost(
    stack: Jetyard, tmp_path: Path
) -> None:
    files = tmp_path / "model"
    subprocess.run([str(ROOT / "scripts" / "model-files"), str(files)], check=True, timeout=600)
    admin = admin_of(stack)
    admin.ok("create", "wordllama")
    for path in sorted(files.iterdir()):
        admin.ok("upload", "wordllama", str(path))

    created = endpoint_cli(
        stack, "create", "embed", "--image", MODEL_IMAGE, "--port", "8000",
        "--model", "wordllama", "--command", MODEL, "--cpu", "0.5", "--memory", "512m",
        "--replicas", "2", "--max", "3", *FAST_HEALTH,
    )  # fmt: skip
    assert "created embed" in created.stdout, created.stdout
    endpoint = wait_endpoint(stack, "embed", ready(2), "embed READY with 2 replicas serving")
    url = endpoint["url"]
    token_id, token = token_for(stack, "embed")
    sentences = ["A man is playing a guitar on stage.", "Someone performs music with a guitar."]

    answer = httpx.post(
        url + "v1/embeddings", json={"model": "wordllama-l2-supercat-256", "input": sentences},
        headers={"Authorization": f"Bearer {token}"}, timeout=30,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    vectors = [item["embedding"] for item in answer.json()["data"]]
    assert [len(v) for v in vectors] == [256, 256]
    cosine = sum(a * b for a, b in zip(*vectors, strict=True))
    assert cosine > 0.5, cosine  # a real model: the two sentences mean much the same
    assert httpx.post(url + "v1/embeddings", json={"input": "x"}, timeout=30).status_code == 401
    wrong = {"Authorization": f"Bearer {token[:-2]}xx"}
    assert httpx.post(url + "v1/embeddings", json={"input": "x"}, headers=wrong).status_code == 401

    # One replica's container killed while requests flow: at most the one in flight at that
    # replica fails; the controller replaces it.
    body = {"model": "wordllama-l2-supercat-256", "input": "load"}
    victim = serving(endpoint)[0]
    with Load(url, token, clients=2, body=body, path="v1/embeddings") as load:
        time.sleep(2)
        (container,) = replica_containers(victim["sessionId"])
        subprocess.run(["docker", "kill", container], check=True, capture_output=True)
        replaced = wait_endpoint(
            stack, "embed",
            lambda e: ready(2)(e) and victim["replica"] not in [r["replica"] for r in serving(e)],
            "a new replica serving in place of the killed one",
        )  # fmt: skip
        time.sleep(1)
    assert len(load.statuses) > 50, load.statuses
    assert len(load.failed) <= 2, load.failed
    ended = next(r for r in replaced["replicas"] if r["replica"] == victim["replica"])
    assert ended["lifecycle"] in ("TERMINATED", "FAILED"), ended

    endpoint_cli(stack, "token", "revoke", "embed", token_id)
    refused_at = time.monotonic()
    while True:
        again = httpx.post(url + "v1/embeddings", json=body,
                           headers={"Authorization": f"Bearer {token}"}, timeout=30)  # fmt: skip
        if again.status_code == 401:
            break
        assert time.monotonic() - refused_at < 5, "a revoked token was still taken after 5 s"
    assert "revoked" in again.text
    endpoint_cli(stack, "rm", "embed")
    wait_endpoint(stack, "embed", lambda e: e["status"] == "DESTROYED", "embed destroyed", 120)
    assert httpx.post(url + "v1/embeddings", json=body).status_code in (404, 410)


def test_a_load_step_scales_up_the_cooldown_brings_it_down_and_zero_wakes(
    stack: Jetyard,
) -> None:
    endpoint_cli(
        stack, "create", "steps", "--image", MODEL_IMAGE, "--port", "8000", "--command", ECHO,
        "--cpu", "0.25", "--memory", "128m", "--replicas", "1", "--min", "1", "--max", "3",
        "--rule", "inflight>1.5<0.5:step=1,cooldown=5s,window=5s", *FAST_HEALTH,
    )  # fmt: skip
    endpoint = wait_endpoint(stack, "steps", ready(1), "steps READY with 1 replica")
    url = endpoint["url"]
    _, token = token_for(stack, "steps")

    stepped_at = time.monotonic()
    with Load(url, token, clients=8, path="slow?ms=300") as load:
        wait_endpoint(stack, "steps", ready(3), "scaled up to 3 replicas under load", 120)
        up_s = time.monotonic() - stepped_at
    assert load.failed == [], load.failed
    decisions = shown(stack, "steps")["scalingHistory"]
    assert any(d["source"] == "rule" and d["replicas"] > d["previous"] for d in decisions)
    assert up_s < 60, up_s

    wait_endpoint(stack, "steps", ready(1), "back to 1 replica after the cooldown", 120)
    down = shown(stack, "steps")["scalingHistory"][0]
    assert down["source"] == "rule" and down["replicas"] < down["previous"], down

    # Scaled to zero: the first request is held and answered once a replica serves.
    endpoint_cli(stack, "modify", "steps", "--min", "0", "--no-rules")
    endpoint_cli(stack, "scale", "steps", "0")
    wait_endpoint(stack, "steps", lambda e: e["status"] == "SCALED_TO_ZERO" and not serving(e),
                  "steps scaled to zero")  # fmt: skip
    woken_at = time.monotonic()
    first = httpx.get(url + "whoami", headers={"Authorization": f"Bearer {token}"}, timeout=150)
    assert first.status_code == 200, first.text
    assert time.monotonic() - woken_at < 120
    woke = shown(stack, "steps")["scalingHistory"][0]
    assert (woke["source"], woke["replicas"]) == ("wake", 1), woke
    endpoint_cli(stack, "rm", "steps")


def test_a_rolling_update_fails_nothing_and_a_broken_revision_rolls_back(
    stack: Jetyard,
) -> None:
    endpoint_cli(
        stack, "create", "rolling", "--image", MODEL_IMAGE, "--port", "8000", "--command", ECHO,
        "--cpu", "0.25", "--memory", "128m", "--replicas", "2", "--max", "4",
        "--env", "VERSION=1", *FAST_HEALTH,
    )  # fmt: skip
    endpoint = wait_endpoint(stack, "rolling", ready(2), "rolling READY with 2 replicas")
    url = endpoint["url"]
    _, token = token_for(stack, "rolling")

    with Load(url, token, clients=3) as load:
        time.sleep(1)
        endpoint_cli(stack, "update", "rolling", "--env", "VERSION=2", "--reason", "v2")
        rolled = wait_endpoint(
            stack, "rolling",
            lambda e: ready(2)(e) and e["currentRevision"] == 2 and e["targetRevision"] is None
            and {r["revision"] for r in serving(e)} == {2},
            "every replica on revision 2",
        )  # fmt: skip
        time.sleep(1)
    assert len(load.statuses) > 50, load.statuses
    assert load.failed == [], load.failed
    assert {r["revision"] for r in rolled["replicas"] if r["lifecycle"] == "RUNNING"} == {2}

    # A revision whose health check never passes: rolled back, and nothing failed meanwhile.
    with Load(url, token, clients=3) as load:
        endpoint_cli(stack, "update", "rolling", "--env", "FAIL_HEALTH=1", "--reason", "broken")
        back = wait_endpoint(
            stack, "rolling",
            lambda e: e["currentRevision"] == 2 and e["targetRevision"] is None
            and any(r["revision"] == 3 and r["rolledBackReason"] for r in e["revisions"]),
            "revision 3 rolled back", timeout=240,
        )  # fmt: skip
    assert load.failed == [], load.failed
    broken = next(r for r in back["revisions"] if r["revision"] == 3)
    assert "503" in broken["rolledBackReason"], broken
    assert ready(2)(back)
    endpoint_cli(stack, "rm", "rolling")
