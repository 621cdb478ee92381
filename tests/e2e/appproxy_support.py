"""What the tests (and the bench) of apps through the proxy on a real ``jetyard up`` with Docker
share: a stack whose proxy has a port of its own, an image registered with its service-ports
label, a session of it once its app is reported open, the app's ``startApp`` URL, and a small
web image (busybox ``httpd``) built here and removed after."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jetyard.runtime.natsserver import free_port
from schemas.service_ports import BACKENDAI_LABEL
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until
from tests.e2e.test_vfolders import User

REGISTER = """mutation($name: String!, $labels: [ImageLabelInput!]) {
    registerImage(name: $name, labels: $labels) { status message } }"""
IMAGES = "{ images { name servicePorts { name protocol ports public } } }"
CREATE = """mutation($input: CreateSessionInput!) {
    createSession(input: $input) { status message sessionId } }"""
PORTS = """query($id: ID!) { session(id: $id) {
    status servicePorts { name protocol port state } } }"""
START = """mutation($id: ID!, $app: String!) { startApp(sessionId: $id, app: $app) {
    url expiresAt } }"""
TERMINATE = "mutation($id: ID!) { terminateSession(id: $id) { status } }"
HTTPD = ["httpd", "-f", "-p", "8080", "-h", "/www"]
WEB_LABEL = "web:http:8080"


def docker_stack(data_dir: Path, **env: str) -> Jetyard:
    """A stack on Docker (not started yet) whose proxy has a port of its own (6022 may be
    another stack's)."""
    return Jetyard(data_dir, free_port(), "docker",
                   env={"JETYARD_APPPROXY_PORT": str(free_port()), **env})  # fmt: skip


def running_stack(tmp_path: Path, **env: str) -> Iterator[Jetyard]:
    """For a fixture: ``docker_stack`` started, then stopped and its containers removed,
    whatever the test left running."""
    stack = docker_stack(tmp_path / "data", **env).start()
    yield stack
    stack.stop()
    cluster = (stack.data_dir / "cluster.id").read_text().strip()
    ours = ["docker", "ps", "--all", "--quiet", "--filter", f"label=jetyard.cluster_id={cluster}"]
    _remove_containers(ours)


def register(stack: Jetyard, image: str, label: str) -> None:
    """The admin registers ``image`` with its service-ports label."""
    registered = stack.gql(REGISTER, name=image, labels=[{"key": BACKENDAI_LABEL, "value": label}])
    assert registered["data"]["registerImage"]["status"] == "ACCEPTED", registered


def run_app_session(user: User, spec: dict[str, Any], app: str, port: int) -> str:
    """A session of ``spec`` (``CreateSessionInput``), once it runs with ``app`` reported open
    on ``port`` (its only app)."""
    answer = user.gql(CREATE, input=spec)
    assert "errors" not in answer and answer["data"]["createSession"]["status"] == "ACCEPTED", (
        answer
    )
    session_id: str = answer["data"]["createSession"]["sessionId"]
    seen: dict[str, Any] = {}

    def open_() -> bool:
        nonlocal seen
        seen = user.gql(PORTS, id=session_id)["data"]["session"] or {}
        return seen.get("status") == "RUNNING" and bool(seen.get("servicePorts"))

    wait_until(open_, f"session {session_id} RUNNING with {app} reported ({seen})", 120)
    assert seen["servicePorts"] == [
        {"name": app, "protocol": "http", "port": port, "state": "open"}
    ], seen
    return session_id


def start_app(user: User, session_id: str, app: str) -> str:
    """The app's URL from ``startApp`` (its token in the query)."""
    answer = user.gql(START, id=session_id, app=app)
    assert "errors" not in answer, answer
    url: str = answer["data"]["startApp"]["url"]
    return url


def user_id(stack: Jetyard, email: str) -> str:
    users = stack.gql("{ users { id email } }")
    assert "errors" not in users, users
    (found,) = [u["id"] for u in users["data"]["users"] if u["email"] == email]
    return str(found)


def build_web_image(tag: str, context: Path, files: dict[str, bytes]) -> None:
    """An image FROM the test image with the label ``WEB_LABEL`` and ``httpd`` on 8080
    serving ``files`` from ``/www``; ``context`` (made here) is its build context."""
    context.mkdir()
    for name, content in files.items():
        (context / name).write_bytes(content)
    (context / "Dockerfile").write_text(
        f"FROM {TEST_IMAGE}\n"
        f'LABEL {BACKENDAI_LABEL}="{WEB_LABEL}"\n'
        f"COPY {' '.join(files)} /www/\n"
        f"CMD {json.dumps(HTTPD)}\n"
    )
    built = subprocess.run(["docker", "build", "--quiet", "--tag", tag, str(context)],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr


def remove_image(tag: str) -> None:
    """The image, once its containers are gone (they would keep it, untagged)."""
    _remove_containers(["docker", "ps", "--all", "--quiet", "--filter", f"ancestor={tag}"])
    subprocess.run(["docker", "image", "rm", "--force", tag], capture_output=True, timeout=60)


def _remove_containers(listing: list[str]) -> None:
    containers = subprocess.run(listing, capture_output=True, text=True, timeout=60).stdout.split()
    if containers:
        subprocess.run(["docker", "rm", "--force", *containers], capture_output=True, timeout=60)
