"""docs/multi-machine.md, run as written: its blocks marked ``<!-- guide: head -->`` run on a
head machine and those marked ``<!-- guide: gpu -->`` on a GPU server, in order. Each machine
is a network namespace on a lab bridge (``tests.netns_support``) with a host name of its own;
the GPU server runs its own ``dockerd``. A block marked ``keeps running until "TEXT"`` is a
foreground command (``jetyard up``, ``jetyard join``): it is started and the guide goes on once
it has printed TEXT.

Around the guide, only what a reader brings: the suite's venv on ``PATH``, ``HEAD`` set to the
head's address, the join token carried from the head to the GPU server (the file the guide
writes), and the test image loaded into the GPU server's engine. The head's own agent is put in
a resource group of its own (``JETYARD_AGENT_RESOURCE_GROUP``), so the guide's session can only
be placed on the GPU server that joined.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet

from events.bus import connect
from jetyard.sdk import JetyardAuth
from schemas.settings import NatsSettings
from schemas.subjects import EVENTS_STREAM
from tests.e2e.conftest import TEST_IMAGE
from tests.e2e.user_support import user_env
from tests.netns_support import Host, lab

ROOT = Path(__file__).parents[2]
GUIDE = ROOT / "docs" / "multi-machine.md"
VENV_BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(600)

BLOCK = re.compile(
    r'<!-- guide: (head|gpu)(?:, keeps running until "([^"]+)")? -->\n```bash\n(.*?)```\n',
    re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    machine: str
    until: str | None
    script: str


def guide_blocks() -> list[Block]:
    return [Block(m, until or None, s) for m, until, s in BLOCK.findall(GUIDE.read_text())]


def test_the_guide_has_blocks_for_both_machines() -> None:
    blocks = guide_blocks()
    assert {b.machine for b in blocks} == {"head", "gpu"}
    assert sum(1 for b in blocks if b.until) == 2  # jetyard up, jetyard join


@dataclass
class Machine:
    host: Host
    name: str
    home: Path
    env: dict[str, str]

    def argv(self, script: str) -> list[str]:
        """``script`` in bash on this machine: its namespace, and a host name of its own (a UTS
        namespace: the machines of a lab are not all named after the test machine)."""
        named = f'hostname {self.name} && exec bash -euo pipefail -c "$0"'
        return self.host.nsenter(["unshare", "--uts", "sh", "-c", named, script])


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if process.poll() is not None:
            raise AssertionError(f"exited {process.returncode} before {text!r}: {log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} within {timeout}s: {log.read_text()}")
        time.sleep(0.3)


def test_the_multi_machine_guide_runs_as_written(tmp_path: Path) -> None:
    with lab(tmp_path / "lab") as net:
        head_host, gpu_host = net.host("head"), net.host("gpu1")
        engine = gpu_host.dockerd()
        engine.load_image(TEST_IMAGE)
        path = f"{VENV_BIN}:{os.environ['PATH']}"
        machines: dict[str, Machine] = {}
        for role, host, name, extra in (
            ("head", head_host, "head", {"JETYARD_AGENT_RESOURCE_GROUP": "heads",
                                         "JETYARD_AGENT_BACKEND": "simulated"}),
            ("gpu", gpu_host, "gpu1", {"DOCKER_HOST": engine.url}),
        ):  # fmt: skip
            home = tmp_path / role
            home.mkdir()
            env = user_env(home, HOME=str(home), PATH=path, HEAD=head_host.address, **extra)
            env.pop("JETYARD_DATA_DIR", None)
            machines[role] = Machine(host, name, home, env)
        running: list[subprocess.Popen[bytes]] = []
        outputs: list[str] = []
        try:
            for index, block in enumerate(guide_blocks()):
                machine = machines[block.machine]
                carried = machines["head"].home / "join-token"
                if block.machine == "gpu" and carried.exists():
                    shutil.copy(carried, machine.home / "join-token")  # carried by hand
                if block.until is not None:
                    log = tmp_path / f"block-{index}-{block.machine}.log"
                    with open(log, "wb") as out:
                        process = subprocess.Popen(
                            machine.argv(block.script), cwd=machine.home, env=machine.env,
                            stdout=out, stderr=subprocess.STDOUT,
                        )  # fmt: skip
                    running.append(process)
                    wait_for(log, block.until, process, 240)
                    continue
                done = subprocess.run(
                    machine.argv(block.script), cwd=machine.home, env=machine.env,
                    capture_output=True, text=True, timeout=240,
                )  # fmt: skip
                assert done.returncode == 0, (block.script, done.stdout, done.stderr)
                outputs.append(done.stdout)
            text = "\n".join(outputs)
            assert "jyjoin_" in text and "jetyard join http://" in text  # the token, once
            assert "gpu1" in text  # in `jetyard admin node ls`
            assert "hello from a GPU server" in text  # ran in the GPU server's own engine
            # Removed: the GPU server's agent stops by itself, saying why.
            joined = running[1]
            joined.wait(60)
            assert joined.returncode != 0
            join_log = next(tmp_path.glob("block-*-gpu.log")).read_text()
            assert "was removed from the cluster" in join_log
        finally:
            for process in reversed(running):
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(60)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()


HA_BLOCK = re.compile(
    r'<!-- guide-ha: (each member|each head|once)(?:, keeps running until "([^"]+)")? -->\n'
    r"```bash\n(.*?)```\n",
    re.DOTALL,
)


def test_the_guides_three_head_installation_runs_as_written(tmp_path: Path) -> None:
    """The guide's "A log that survives a machine": its NATS member block on three hosts, its
    streams block once, its services block on two of them (every service with a replica on
    another machine), its bootstrap block once; then the streams are at three replicas, the
    `JY_EVENTS` leader's server is SIGKILLed, and a domain created through a gateway is
    accepted (the services ride over the election, with no restart)."""
    blocks = HA_BLOCK.findall(GUIDE.read_text())
    assert [b[0] for b in blocks] == ["each member", "once", "each head", "once"]
    (_, nats_ready, member), (_, _, streams), (_, serving, services), (_, _, first) = blocks
    token, key = secrets.token_urlsafe(32), Fernet.generate_key().decode()
    path = f"{VENV_BIN}:{os.environ['PATH']}"
    with lab(tmp_path / "lab") as net:
        hosts = [net.host(name) for name in ("n1", "n2", "n3")]
        envs: dict[str, dict[str, str]] = {}
        for host in hosts:
            peers = [h.address for h in hosts if h is not host]
            home = tmp_path / host.name
            home.mkdir()
            (home / "deploy").symlink_to(ROOT / "deploy")  # run from a checkout
            envs[host.name] = user_env(
                home, PATH=path, HOME=str(home), NAME=host.name, ME=host.address,
                PEER_A=peers[0], PEER_B=peers[1], JY_NATS_TOKEN=token, SECRETS_KEY=key,
            )  # fmt: skip
        running: dict[str, subprocess.Popen[bytes]] = {}

        def start(host: Host, script: str, ready: str, what: str) -> None:
            log = tmp_path / host.name / f"{what}.log"
            with open(log, "wb") as out:
                running[f"{what}-{host.name}"] = host.popen(
                    ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path / host.name,
                    env=envs[host.name], stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip

        def wait_all(what: str, ready: str, on: list[Host]) -> None:
            for host in on:
                log = tmp_path / host.name / f"{what}.log"
                wait_for(log, ready, running[f"{what}-{host.name}"], 180)

        def once(host: Host, script: str) -> str:
            done = subprocess.run(
                host.nsenter(["bash", "-euo", "pipefail", "-c", script]),
                cwd=tmp_path / host.name, env=envs[host.name], capture_output=True, text=True,
                timeout=180,
            )  # fmt: skip
            assert done.returncode == 0, (script, done.stdout, done.stderr)
            return done.stdout

        try:
            for host in hosts:
                start(host, member, nats_ready, "nats")
            wait_all("nats", nats_ready, hosts)
            once(hosts[0], streams)
            for host in hosts[:2]:
                start(host, services, serving, "services")
            wait_all("services", serving, hosts[:2])
            said = once(hosts[0], first)
            assert "superadmin" in said
            assert (tmp_path / "n1" / "join-token").read_text().startswith("jyjoin_")
            admin = json.loads((tmp_path / "n1" / "jetyard-admin" / "admin.json").read_text())
            gateways = [f"http://{h.address}:8080" for h in hosts[:2]]
            urls = ",".join(f"nats://{h.address}:4222" for h in hosts)
            members = {h.name: running[f"nats-{h.name}"] for h in hosts}
            asyncio.run(rides_over_its_leader(urls, token, members, gateways, admin))
        finally:
            for process in reversed(list(running.values())):
                if process.poll() is None:
                    process.send_signal(signal.SIGINT)  # bash passes it on to its services
            for process in running.values():
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


async def rides_over_its_leader(
    urls: str, token: str, members: dict[str, subprocess.Popen[bytes]], gateways: list[str],
    admin: dict[str, str],
) -> None:  # fmt: skip
    """Streams at three replicas; the ``JY_EVENTS`` leader SIGKILLed; a domain created through
    each gateway is accepted after the election — also through the gateway of the head whose
    NATS server died (its services moved to the other two members)."""
    settings = NatsSettings(url=urls, token=token, replicas=3, request_timeout_s=5.0)
    bus = await connect(settings, name="guide-ha")
    auth = JetyardAuth(admin["access_key"], admin["secret_key"])
    try:
        info = await bus.js.stream_info(EVENTS_STREAM)
        assert info.config.num_replicas == 3
        assert info.cluster is not None and info.cluster.leader is not None
        assert len(info.cluster.replicas or []) == 2
        leader = info.cluster.leader
        members[leader].send_signal(signal.SIGKILL)
        await asyncio.to_thread(members[leader].wait)
        async with httpx.AsyncClient(timeout=30) as client:
            for index, gateway in enumerate(gateways):
                name = f"after-loss-{index}"
                query = (
                    f'mutation {{ createDomain(name: "{name}") {{ status message commandId }} }}'
                )
                deadline = time.monotonic() + 60
                while True:
                    try:
                        answer = (
                            await client.post(
                                f"{gateway}/graphql", json={"query": query}, auth=auth
                            )
                        ).json()
                    except httpx.HTTPError as exc:  # this head's gateway went with its server
                        answer = {"errors": [{"message": repr(exc)}]}
                    if "errors" not in answer:
                        break
                    assert time.monotonic() < deadline, answer
                    await asyncio.sleep(1)
                created = answer["data"]["createDomain"]
                # Decided past the gateway's wait (a busy machine, the log's new leader):
                # PENDING with its command id, and the outcome is asked for, as api.md says.
                outcome = "query($id: ID!) { commandOutcome(id: $id) { status message } }"
                while created["status"] == "PENDING":
                    assert time.monotonic() < deadline, created
                    await asyncio.sleep(1)
                    asked = await client.post(
                        f"{gateway}/graphql", auth=auth,
                        json={"query": outcome, "variables": {"id": created["commandId"]}},
                    )  # fmt: skip
                    decided = asked.json()["data"]["commandOutcome"]  # null: not yet
                    created = {**created, **(decided or {})}
                assert created["status"] == "ACCEPTED", created
        after = await bus.js.stream_info(EVENTS_STREAM)
        assert after.cluster is not None and after.cluster.leader not in (None, leader)
    finally:
        await bus.close()
