"""``jetyard join`` end to end: an admin makes a join token with ``jetyard admin node token
create``; a second agent (its own data directory, the simulated backend, as on another
machine) joins with ``jetyard join`` and registers under its own node id, kept when it joins
again; a wrong, an expired and a revoked token are refused with the reason and nothing is
written; ``jetyard admin node remove`` takes the node out for good: it leaves ``nodes``, its
agent stops saying why, and it cannot join again."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from schemas.ids import new_id
from tests.e2e.conftest import Jetyard, wait_until
from tests.e2e.user_support import JETYARD, jetyard, keypair_env, stack_for, user_env

NODES = "{ nodes { id hostname resourceGroup state } }"
TOKENS = "{ joinTokens { id nodes expired revoked resourceGroup } }"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Jetyard]:
    env = user_env(tmp_path)
    up = stack_for(tmp_path, env, "simulated").start(timeout=120)
    yield up
    up.stop()


def token_of(env: dict[str, str], *args: str) -> tuple[str, str]:
    """(token, the join line printed) of ``jetyard admin node token create``."""
    made = jetyard(env, "admin", "node", "token", "create", *args)
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    token = next(line for line in lines if line.startswith("jyjoin_"))
    (command,) = [line.strip() for line in lines if line.strip().startswith("jetyard join ")]
    return token, command


def joined(env: dict[str, str], url: str, token: str, data: Path, hostname: str) -> Path:
    """Start ``jetyard join`` (it becomes the agent); its output goes to a log, returned."""
    log = data.parent / f"{hostname}-{new_id()[:6]}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [JETYARD, "join", url, "--token", token, "--data-dir", str(data),
             "--hostname", hostname, "--backend", "simulated"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    _agents.append(process)
    return log


_agents: list[subprocess.Popen[bytes]] = []


@pytest.fixture(autouse=True)
def stop_agents() -> Iterator[None]:
    yield
    while _agents:
        process = _agents.pop()
        if process.poll() is None:
            process.kill()
            process.wait()


def refused(env: dict[str, str], url: str, token: str, data: Path) -> str:
    done = jetyard(env, "join", url, "--token", token, "--data-dir", str(data), "--no-run")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert not (data / "agent.env").exists() and not (data / "node.id").exists()
    return done.stderr


def node_row(stack: Jetyard, node_id: str) -> dict[str, str] | None:
    rows = stack.gql(NODES)["data"]["nodes"]
    return next((r for r in rows if r["id"] == node_id), None)


def test_join_with_good_wrong_expired_and_revoked_tokens_then_remove(
    stack: Jetyard, tmp_path: Path
) -> None:
    env = user_env(tmp_path, **keypair_env(stack))
    token, command = token_of(env, "--expires", "1h", "--group", "default", "--note", "e2e")
    assert command == f"jetyard join {stack.url} --token {token}"

    # Refused: nothing is written, the reason is said.
    elsewhere = tmp_path / "elsewhere"
    token_id = token.split("_")[1]
    wrong = f"jyjoin_{token_id}_{'x' * 43}"
    assert "unknown join token" in refused(env, stack.url, wrong, elsewhere)
    short, _ = token_of(env, "--expires", "1s")
    time.sleep(1.5)
    said = refused(env, stack.url, short, elsewhere)
    assert f"join token {short.split('_')[1]} expired at " in said
    revoked, _ = token_of(env, "--expires", "1h")
    revoked_id = revoked.split("_")[1]
    done = jetyard(env, "admin", "node", "token", "revoke", revoked_id)
    assert done.returncode == 0 and "revoked" in done.stdout, done.stderr
    assert f"join token {revoked_id} was revoked" in refused(env, stack.url, revoked, elsewhere)

    # A good token: the agent registers under the id kept in its data directory.
    log = joined(env, stack.url, token, elsewhere, "elsewhere-1")
    wait_until(lambda: "agent running" in log.read_text(), "join said the agent runs")
    node_id = (elsewhere / "node.id").read_text().strip()
    assert f"joined as node {node_id}" in log.read_text()
    assert stat.S_IMODE((elsewhere / "agent.env").stat().st_mode) == 0o600
    kept = dict(line.split("=", 1) for line in (elsewhere / "agent.env").read_text().splitlines())
    assert kept["JETYARD_NATS_TOKEN"] == stack.nats_env()["JETYARD_NATS_TOKEN"]
    assert kept["JETYARD_NATS_URL"] == stack.nats_env()["JETYARD_NATS_URL"]
    wait_until(lambda: node_row(stack, node_id) is not None, "the joined node was listed")
    assert node_row(stack, node_id) == {
        "id": node_id, "hostname": "elsewhere-1", "resourceGroup": "default",
        "state": "schedulable",
    }  # fmt: skip
    tokens = {t["id"]: t for t in stack.gql(TOKENS)["data"]["joinTokens"]}
    assert tokens[token_id]["nodes"] == [node_id]
    assert tokens[revoked_id]["revoked"] and tokens[short.split("_")[1]]["expired"]

    # Joining again from the same data directory keeps the node id.
    agent = _agents[-1]
    agent.send_signal(signal.SIGINT)
    agent.wait(30)
    again = joined(env, stack.url, token, elsewhere, "elsewhere-1")
    wait_until(lambda: "agent running" in again.read_text(), "the second join ran the agent")
    assert f"joined as node {node_id}" in again.read_text()

    # Drained, then removed for good: it leaves the listing, its agent stops, it cannot join
    # again.
    done = jetyard(env, "admin", "node", "drain", node_id, "--deadline", "10m")
    assert done.returncode == 0 and "draining" in done.stdout, done.stderr
    wait_until(lambda: (node_row(stack, node_id) or {}).get("state") == "drained", "drained")
    done = jetyard(env, "admin", "node", "remove", node_id, "--reason", "retired")
    assert done.returncode == 0 and "removed from the cluster" in done.stdout, done.stderr
    wait_until(lambda: node_row(stack, node_id) is None, "the removed node left the listing")
    agent = _agents[-1]
    wait_until(lambda: agent.poll() is not None, "the removed node's agent stopped")
    assert agent.returncode != 0
    assert f"node {node_id} was removed from the cluster; not registering" in again.read_text()
    done = jetyard(env, "join", stack.url, "--token", token, "--data-dir", str(elsewhere))
    assert done.returncode == 1
    assert f"node {node_id} was removed from the cluster on " in done.stderr
    assert "it cannot join again" in done.stderr
    # The log keeps who joined with which token.
    audit = stack.gql(TOKENS)["data"]["joinTokens"]
    assert next(t for t in audit if t["id"] == token_id)["nodes"] == [node_id]
    assert os.path.exists(elsewhere / "node.id")


def test_removing_up_s_own_node_does_not_wedge_up(stack: Jetyard, tmp_path: Path) -> None:
    env = user_env(tmp_path, **keypair_env(stack))
    wait_until(lambda: len(stack.gql(NODES)["data"]["nodes"]) == 1, "up's own node was listed")
    (local,) = stack.gql(NODES)["data"]["nodes"]
    done = jetyard(env, "admin", "node", "remove", local["id"])
    assert done.returncode == 0, done.stderr
    agent_log = stack.data_dir / "logs" / "agent.log"
    said = f"node {local['id']} was removed from the cluster; not registering"
    wait_until(lambda: said in agent_log.read_text(), "up's agent said it was removed")
    wait_until(lambda: node_row(stack, local["id"]) is None, "the node left the listing")
    # Not started again and again: `up` says it stays down (exit status STOPPED_FOR_GOOD).
    wait_until(lambda: "agent stopped for good" in stack.output(), "up said the agent stays down")
    assert agent_log.read_text().count("agent starting") == 1
    # `up` goes on serving (the agent is said to be down), and stops cleanly.
    assert stack.gql("{ viewer { role } }")["data"]["viewer"]["role"] == "superadmin"
    assert stack.process is not None and stack.process.poll() is None
    assert stack.stop() == 0


class Listening(Jetyard):
    """A stack started with ``--listen 127.0.0.2``: another address than the loopback one a
    stack listens on by default (Linux routes all of 127/8 to the loopback device)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.2:{self.port}"


def test_up_listen_binds_nats_and_the_gateway_there_and_joins_hand_it_out(
    tmp_path: Path,
) -> None:
    env = user_env(tmp_path)
    base = stack_for(tmp_path, env, "simulated")
    stack = Listening(
        base.data_dir, base.port, "simulated", env=base.env, args=("--listen", "127.0.0.2")
    )
    stack.start(timeout=120)
    try:
        stack.wait_output(f"jetyard join http://127.0.0.2:{stack.port} --token <token>")
        nats_url = stack.nats_env()["JETYARD_NATS_URL"]
        assert nats_url.startswith("nats://127.0.0.2:")
        with pytest.raises(httpx.ConnectError):  # not on the default loopback address
            httpx.get(f"http://127.0.0.1:{stack.port}/healthz", timeout=2)
        env = user_env(tmp_path, **keypair_env(stack))
        token, command = token_of(env)
        assert command == f"jetyard join http://127.0.0.2:{stack.port} --token {token}"
        data = tmp_path / "other"
        log = joined(env, stack.url, token, data, "other-1")
        wait_until(lambda: "agent running" in log.read_text(), "join ran the agent")
        kept = dict(line.split("=", 1) for line in (data / "agent.env").read_text().splitlines())
        assert kept["JETYARD_NATS_URL"] == nats_url
        node_id = (data / "node.id").read_text().strip()
        wait_until(lambda: node_row(stack, node_id) is not None, "the joined node was listed")
    finally:
        stack.stop()
