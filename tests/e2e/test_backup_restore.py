"""A backup of a running installation with users, folders and sessions, restored into a new
one: the views rebuilt from the restored log equal the old installation's, the restored log
verifies, the old keypairs sign in, and a new session runs. A backup that does not verify is
refused with nothing written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from events.bus import connect
from jetyard.runtime.natsserver import NatsServer, free_port
from jetyard.sdk.auth import JetyardAuth
from projections.db import create_engine
from projections.runner import Projector
from schemas.settings import NatsSettings
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until
from tests.e2e.user_support import jetyard, user_env
from tests.integration.projection_support import dump

CREATE = "mutation($i: CreateSessionInput!) { createSession(input: $i) { status sessionId } }"
SESSION = "query($id: ID!) { session(id: $id) { status } }"
FOLDER = "mutation($i: CreateVFolderInput!) { createVFolder(input: $i) { status } }"
USER = """mutation($e: String!) { createUser(email: $e, password: "pw-123456",
  domain: "default", role: "user") { id } }"""


def gql(url: str, auth: JetyardAuth, query: str, **variables: Any) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/graphql", json={"query": query, "variables": variables}, auth=auth, timeout=30
    )
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


def session(stack: Jetyard, auth: JetyardAuth, **spec: Any) -> str:
    small = {"image": TEST_IMAGE, "cpu": "0.25", "memory": "64m"}
    made = gql(stack.url, auth, CREATE, i={**small, **spec})["createSession"]
    assert made["status"] == "ACCEPTED", made
    return str(made["sessionId"])


def status(stack: Jetyard, auth: JetyardAuth, session_id: str) -> str:
    return str(gql(stack.url, auth, SESSION, id=session_id)["session"]["status"])


async def views_of_log(data_dir: Path, into: Path) -> dict[str, list[Any]]:
    """The views rebuilt from the log in ``data_dir`` alone (its own NATS server, as
    ``jetyard up`` would start it), into a fresh SQLite database."""
    port = int((data_dir / "nats.port").read_text())
    token = (data_dir / "nats.token").read_text().strip()
    server = NatsServer(data_dir=data_dir / "nats", port=port, token=token).start()
    engine = create_engine(f"sqlite+aiosqlite:///{into}")
    try:
        bus = await connect(NatsSettings(url=server.url, token=token), name="tests-restore")
        try:
            projector = Projector(engine, bus)
            await projector.catch_up(timeout=2.0)
            await projector.close()
            return await dump(engine)
        finally:
            await bus.close()
    finally:
        await engine.dispose()
        server.stop()


async def views_of(database: Path) -> dict[str, list[Any]]:
    engine = create_engine(f"sqlite+aiosqlite:///{database}")
    try:
        return await dump(engine)
    finally:
        await engine.dispose()


def test_a_backup_restored_into_a_new_installation_is_the_same_and_runs(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    old = Jetyard(tmp_path / "old", free_port(), "simulated", env=env).start(timeout=120)
    auth = old.auth
    gql(old.url, auth, USER, e="colleague@example.org")
    made = gql(old.url, auth, FOLDER, i={"name": "results"})["createVFolder"]
    assert made["status"] == "ACCEPTED", made
    done = session(old, auth, type="batch", command=["exit", "0"])
    running = session(old, auth, command=["run"])
    wait_until(lambda: status(old, auth, done) == "TERMINATED", "the batch session ended")
    wait_until(lambda: status(old, auth, running) == "RUNNING", "the other one runs")

    backup = tmp_path / "backup.jsonl"
    where = ("--data-dir", str(old.data_dir))
    written = jetyard(env, "backup", str(backup), *where)
    assert written.returncode == 0, written.stderr
    assert old.stop() == 0
    before = asyncio.run(views_of(old.data_dir / "views.db"))

    new_dir = tmp_path / "new"
    tampered = tmp_path / "tampered.jsonl"
    lines = backup.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if json.loads(line).get("seq") == 3)
    lines[at] = lines[at].replace('"data": "', '"data": "AAAA', 1)
    tampered.write_text("".join(lines))
    keys = ("--secrets-key", str(old.data_dir / "secrets.key"))
    sealing = ("--seal-key", str(old.data_dir / "seal.key"))
    refused = jetyard(env, "restore", str(tampered), "--data-dir", str(new_dir), *keys, *sealing)
    assert refused.returncode == 2 and "does not verify (position 3" in refused.stderr, (
        refused.stderr
    )
    assert not new_dir.exists()  # refused before anything was made

    fresh = tmp_path / "fresh"
    restored = jetyard(env, "restore", str(backup), "--data-dir", str(fresh), *keys, *sealing)
    assert restored.returncode == 0, restored.stderr
    assert "verified and restored" in restored.stdout
    after = asyncio.run(views_of_log(fresh, tmp_path / "rebuilt.db"))
    assert after == before

    new = Jetyard(fresh, free_port(), "simulated", env=env).start(timeout=120)
    assert gql(new.url, auth, "{ viewer { userId } }")["viewer"]["userId"]  # the old keypair
    ran = session(new, auth, type="batch", command=["exit", "0"])
    wait_until(lambda: status(new, auth, ran) == "TERMINATED", "a new session ran")
    verified = jetyard(env, "audit", "verify", "--data-dir", str(fresh))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert new.stop() == 0
