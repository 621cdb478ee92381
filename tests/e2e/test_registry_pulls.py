"""Images from a lab's registry, end to end on ``jetyard up`` with Docker: a real registry with
htpasswd authentication (``tests/registry_support``), an image pushed to it and absent from the
engine; the admin adds the registry and rescans it; a session for the image goes PENDING →
SCHEDULED → PULLING (progress growing to the total) → RUNNING; a second session does not pull
again; wrong credentials end a session with a reason naming authentication; the password is in
no event, log line or answer; and an agent killed mid-pull leaves nothing PULLING."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetyard.runtime.natsserver import free_port
from tests.e2e.conftest import Jetyard, wait_until
from tests.e2e.test_crashes import _restarted
from tests.e2e.test_session_path import CREATE, SESSION, wait_status
from tests.registry_support import (
    Registry,
    build_layered_image,
    push,
    remove_local_image,
    running_registry,
    throttled,
    trust_ca_for_docker,
)

pytestmark = pytest.mark.timeout(300)

ADD = """mutation($name: String!, $url: String!, $user: String!, $password: String!) {
  addRegistry(name: $name, url: $url, username: $user, password: $password) { status message }
}"""
MODIFY = """mutation($name: String!, $password: String!) {
  modifyRegistry(name: $name, password: $password) { status message }
}"""
RESCAN = """mutation($name: String!) {
  rescanRegistry(name: $name) { registry registered updated unchanged skipped { reference reason } }
}"""
EVENTS = """query($kind: String!, $id: ID!, $after: Int!) {
  eventLog(aggregate: $kind, id: $id, after: $after, first: 200) {
    events { seq name payload } }
}"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jetyard]:
    """One ``jetyard up`` for the module (each test uses registries of its own names); an
    agent killed by a test is back within a second."""
    data = tmp_path_factory.mktemp("stack") / "data"
    env = {"JETYARD_UP_RESTART_DELAY_S": "1"}
    started = Jetyard(data, free_port(), "docker", env=env).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with running_registry(tmp_path_factory.mktemp("registry")) as reg:
        yield reg


def _image(registry: Registry, tag: str, *, layers: int = 2, size: int = 4 << 20) -> str:
    """A fresh multi-layer image in the registry, absent from the engine: its reference."""
    local = build_layered_image(f"jy-pull-src-{uuid.uuid4().hex[:8]}:v1", layers, size)
    repo = f"lab-{uuid.uuid4().hex[:8]}/tool:{tag}"
    try:
        push(registry, local, repo)
    finally:
        remove_local_image(local)
    return f"{registry.host}/{repo}"


def _events(stack: Jetyard, kind: str, ident: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        after = found[-1]["seq"] if found else 0
        page = stack.gql(EVENTS, kind=kind, id=ident, after=after)["data"]["eventLog"]["events"]
        found += page
        if len(page) < 200:
            return found


def _run(stack: Jetyard, image: str, command: list[str]) -> str:
    created = stack.gql(CREATE, input={
        "image": image, "cpu": "0.5", "memory": "64m", "command": command,
    })  # fmt: skip
    assert (created.get("data") or {}).get("createSession", {}).get("status") == "ACCEPTED", created
    return str(created["data"]["createSession"]["sessionId"])


def _pulls(stack: Jetyard, node: str, reference: str) -> list[dict[str, Any]]:
    return [
        e for e in _events(stack, "agent", node)
        if e["name"].startswith("ImagePull") and e["payload"]["reference"] == reference
    ]  # fmt: skip


def test_a_session_pulls_from_the_lab_registry_with_progress_once(
    registry: Registry, stack: Jetyard
) -> None:
    first = _image(registry, "v1", layers=3, size=6 << 20)
    second = _image(registry, "v1")
    try:
        name = f"lab{uuid.uuid4().hex[:6]}"
        added = stack.gql(ADD, name=name, url=registry.url, user=registry.username,
                          password=registry.password)  # fmt: skip
        assert added["data"]["addRegistry"]["status"] == "ACCEPTED", added
        scanned = stack.gql(RESCAN, name=name)["data"]["rescanRegistry"]
        assert {first, second} <= set(scanned["registered"]), scanned
        again = stack.gql(RESCAN, name=name)["data"]["rescanRegistry"]
        assert again["registered"] == [] and again["updated"] == [], again  # nothing twice

        session_id = _run(stack, first, ["sh", "-c", "echo pulled and ran"])
        ended = wait_status(stack, session_id, {"TERMINATED", "ERROR"}, timeout=120)
        statuses = [h["status"] for h in ended["history"]]
        assert ended["status"] == "TERMINATED" and ended["exitCode"] == 0, ended
        assert statuses[0] == "PENDING"
        assert statuses.index("SCHEDULED") < statuses.index("PULLING") < statuses.index("RUNNING")
        assert "pulled and ran" in stack.gql(SESSION, id=session_id)["data"]["sessionLogs"]
        node = ended["nodeIds"][0]
        pulls = _pulls(stack, node, first)
        names = [e["name"] for e in pulls]
        assert names[0] == "ImagePullStarted" and names[-1] == "ImagePullFinished", names
        progress = [e["payload"] for e in pulls if e["name"] == "ImagePullProgressed"]
        done = [p["done_bytes"] for p in progress]
        assert done == sorted(done) and progress[-1]["done_bytes"] == progress[-1]["total_bytes"]
        assert progress[-1]["total_bytes"] >= 3 * (6 << 20) // 2  # random bytes: near 18 MiB

        # The node holds it now: a second session runs without a pull.
        again_id = _run(stack, first, ["true"])
        rerun = wait_status(stack, again_id, {"TERMINATED", "ERROR"}, timeout=60)
        assert rerun["status"] == "TERMINATED", rerun
        assert "PULLING" not in [h["status"] for h in rerun["history"]]
        assert [e["name"] for e in _pulls(stack, node, first)].count("ImagePullStarted") == 1

        # Wrong credentials: the session ends with a reason naming authentication.
        wrong = f"wrong-{uuid.uuid4().hex}"
        changed = stack.gql(MODIFY, name=name, password=wrong)["data"]["modifyRegistry"]
        assert changed["status"] == "ACCEPTED", changed
        refused_id = _run(stack, second, ["true"])
        refused = wait_status(stack, refused_id, {"TERMINATED", "ERROR", "CANCELLED"}, timeout=90)
        assert refused["status"] == "ERROR", refused
        assert "authentication" in refused["statusReason"], refused

        # The secrets are in no event, no log line and no answer.
        dump = _whole_log(stack)
        listed = json.dumps(stack.gql("{ registries { name url username hasSecret } }"))
        for secret in (registry.password, wrong):
            assert secret not in dump
            assert secret not in stack.output()
            assert secret not in listed
        assert '"hasSecret": true' in listed
    finally:
        for ref in (first, second):
            remove_local_image(ref)


def test_an_agent_killed_mid_pull_leaves_no_session_pulling(
    registry: Registry, stack: Jetyard
) -> None:
    """The registry is reached through a proxy that sends 1 MiB/s a connection, so each 4 MiB
    layer takes about four seconds: the agent is killed once the pull's first progress is on
    the log."""
    with throttled(registry, 1 << 20) as slow:
        pushed = _image(registry, "big", layers=3, size=4 << 20)
        image = pushed.replace(registry.host, slow.host, 1)  # the same image, the slow way
        try:
            name = f"lab{uuid.uuid4().hex[:6]}"
            stack.gql(ADD, name=name, url=slow.url, user=slow.username,
                      password=slow.password)  # fmt: skip
            assert image in stack.gql(RESCAN, name=name)["data"]["rescanRegistry"]["registered"]
            session_id = _run(stack, image, ["true"])
            pulling = wait_status(stack, session_id, {"PULLING"}, timeout=60)
            node = pulling["nodeIds"][0]
            wait_until(
                lambda: "ImagePullProgressed" in [e["name"] for e in _pulls(stack, node, image)],
                "the pull's first progress", timeout=30,
            )  # fmt: skip
            agent = stack.pid_of("agent")
            os.kill(agent, signal.SIGKILL)
            at_kill = [e["name"] for e in _pulls(stack, node, image)]
            assert "ImagePullFinished" not in at_kill, at_kill  # killed mid-pull
            _restarted(stack, "agent", agent)
            ended = wait_status(stack, session_id, {"TERMINATED", "ERROR"}, timeout=120)
            assert ended["status"] == "TERMINATED", ended
            names = [e["name"] for e in _pulls(stack, node, image)]
            # The restarted agent began the pull again and finished it: nothing stays PULLING.
            assert names.count("ImagePullStarted") == 2, names
            assert names[-1] == "ImagePullFinished", names
            wait_until(lambda: _nothing_pulling(stack, node), "the node reports no pull in flight")
        finally:
            remove_local_image(image)
            remove_local_image(pushed)


def _nothing_pulling(stack: Jetyard, node: str) -> bool:
    started: dict[str, int] = {}
    for event in _events(stack, "agent", node):
        ref = event["payload"].get("reference")
        if event["name"] == "ImagePullStarted":
            started[ref] = started.get(ref, 0) + 1
        elif event["name"] in ("ImagePullFinished", "ImagePullFailed"):
            started[ref] = 0
    return not any(started.values())


def _whole_log(stack: Jetyard) -> str:
    """Every stored message of every stream, as the NATS server has it on disk."""
    root = stack.data_dir
    chunks = []
    for path in root.rglob("*"):
        if path.is_file():
            chunks.append(path.read_bytes().decode(errors="replace"))
    docker_logs = subprocess.run(["docker", "ps", "-aq"], capture_output=True, text=True)
    return "\n".join(chunks) + docker_logs.stdout


@contextlib.contextmanager
def hosts_entry(name: str) -> Iterator[None]:
    """``name`` resolves to 127.0.0.1 on this machine (its engine too) for the block."""
    hosts = Path("/etc/hosts")
    line = f"127.0.0.1 {name}\n"
    hosts.write_text(hosts.read_text() + line)
    try:
        yield
    finally:
        hosts.write_text(hosts.read_text().replace(line, ""))


def test_a_registry_under_its_own_name_is_trusted_through_the_labs_ca(
    stack: Jetyard, tmp_path: Path
) -> None:
    """TLS with a CA the test made: the gateway's rescan checks the certificate against the
    CA given with the registry, the engine's pull against the CA in its certs.d (docs/images.md,
    "A lab's own CA"); without the CA the rescan is refused as a TLS failure."""
    name = f"registry-{uuid.uuid4().hex[:6]}.jetyard.test"
    with running_registry(tmp_path, tls_name=name) as reg, hosts_entry(name):
        port = reg.host.rsplit(":", 1)[1]
        named = dataclasses.replace(reg, host=f"{name}:{port}", url=f"https://{name}:{port}")
        with trust_ca_for_docker(named):
            image = _image(named, "v1", layers=1, size=1 << 20)
            untrusted, lab = f"untrusted{name[9:15]}", f"lab{name[9:15]}"
            try:
                plain = stack.gql(ADD, name=untrusted, url=named.url, user=reg.username,
                                  password=reg.password)  # fmt: skip
                assert plain["data"]["addRegistry"]["status"] == "ACCEPTED", plain
                refused = stack.gql(RESCAN, name=untrusted)
                assert refused["errors"][0]["extensions"]["code"] == "registry-tls", refused
                added = stack.gql(ADD_CA, name=lab, url=named.url, user=reg.username,
                                  password=reg.password, ca=reg.ca_pem)  # fmt: skip
                assert added["data"]["addRegistry"]["status"] == "ACCEPTED", added
                found = stack.gql(RESCAN, name=lab)["data"]["rescanRegistry"]
                assert image in found["registered"], found
                session_id = _run(stack, image, ["sh", "-c", "echo over tls"])
                ended = wait_status(stack, session_id, {"TERMINATED", "ERROR"}, timeout=120)
                assert ended["status"] == "TERMINATED", ended
                assert "PULLING" in [h["status"] for h in ended["history"]]
            finally:
                remove_local_image(image)


ADD_CA = """mutation($name: String!, $url: String!, $user: String!, $password: String!,
                    $ca: String!) {
  addRegistry(name: $name, url: $url, username: $user, password: $password, caPem: $ca) {
    status message }
}"""


POLICY = """mutation($name: String!, $policy: String) {
  setImagePullPolicy(name: $name, policy: $policy) { status message }
}"""


def test_the_digest_policy_runs_what_the_rescan_saw_though_the_tag_moved(
    registry: Registry, stack: Jetyard
) -> None:
    image = _image(registry, "v1")
    repo_tag, scanned = image.split("/", 1)[1], ""
    try:
        name = f"lab{uuid.uuid4().hex[:6]}"
        stack.gql(ADD, name=name, url=registry.url, user=registry.username,
                  password=registry.password)  # fmt: skip
        assert image in stack.gql(RESCAN, name=name)["data"]["rescanRegistry"]["registered"]
        seen = stack.gql("{ images(first: 500) { name digest } }")["data"]["images"]
        scanned = next(i["digest"] for i in seen if i["name"] == image)
        pinned = stack.gql(POLICY, name=image, policy="digest")["data"]["setImagePullPolicy"]
        assert pinned["status"] == "ACCEPTED", pinned
        # The tag moves in the registry after the rescan (another image pushed under it).
        moved_from = build_layered_image(f"jy-pull-src-{uuid.uuid4().hex[:8]}:v2", 1, 1 << 20)
        try:
            moved = push(registry, moved_from, repo_tag)
        finally:
            remove_local_image(moved_from)
        assert moved != scanned
        session_id = _run(stack, image, ["true"])
        ended = wait_status(stack, session_id, {"TERMINATED", "ERROR"}, timeout=120)
        assert ended["status"] == "TERMINATED", ended
        pinned_ref = f"{image.rsplit(':', 1)[0]}@{scanned}"
        pulls = _pulls(stack, ended["nodeIds"][0], pinned_ref)
        finished = [e["payload"] for e in pulls if e["name"] == "ImagePullFinished"]
        assert [f["digest"] for f in finished] == [scanned], pulls  # the rescan's, not the tag's
    finally:
        remove_local_image(image)
        if scanned:
            remove_local_image(f"{image.rsplit(':', 1)[0]}@{scanned}")
