"""``jetyard join HEAD-URL --token T``: make this machine a node of the cluster whose gateway
answers at HEAD-URL, and run its agent in the foreground.

It presents the join token at the gateway's ``POST /join`` (with the node id this data
directory kept from an earlier join, if any), and on success writes ``<data dir>/node.id``
(``services.node.identity``, kept on later joins) and ``<data dir>/agent.env`` (owner-only,
``KEY=value`` lines: NATS URL and credential, cluster id, resource group, host name,
backend), then becomes ``jetyard serve agent`` with that environment. A refused token prints
the gateway's reason, writes nothing and exits 1. Reads and writes no subject itself."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path
from typing import Any

import httpx

from jetyard.cli import common as ui
from jetyard.stacks import default_data_dir
from services.node.identity import NODE_ID_FILE, keep_node_id, read_node_id

ENV_FILE = "agent.env"
TIMEOUT_S = 30.0


def add_parser(sub: Any) -> None:
    join = sub.add_parser(
        "join", help="make this machine a node of a cluster (a join token from its admin)"
    )
    join.add_argument("head", help="the cluster's gateway, e.g. http://10.0.0.1:8080")
    join.add_argument(
        "--token",
        default=os.environ.get("JETYARD_JOIN_TOKEN"),
        help="the join token (`jetyard admin node token create`; env JETYARD_JOIN_TOKEN)",
    )
    join.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("JETYARD_AGENT_DATA_DIR", str(default_data_dir() / "node"))),
        help="where this node keeps its id, settings and logs (env JETYARD_AGENT_DATA_DIR)",
    )
    join.add_argument("--hostname", default=socket.gethostname(), help="the name it is shown by")
    join.add_argument("--resource-group", help="default: the join token's")
    join.add_argument(
        "--backend", choices=["auto", "docker", "simulated"], default="auto",
        help="containers on Docker, or simulated (no containers)",
    )  # fmt: skip
    join.add_argument(
        "--no-run", action="store_true", help="join and write agent.env, but do not start the agent"
    )


def exchange(head: str, token: str, hostname: str, node_id: str | None) -> dict[str, Any]:
    """The gateway's answer to the join; ``JoinRefusedError`` with its reason if refused."""
    asked: dict[str, Any] = {"token": token, "hostname": hostname}
    if node_id is not None:
        asked["node_id"] = node_id
    try:
        response = httpx.post(f"{head.rstrip('/')}/join", json=asked, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise JoinRefusedError(f"cannot reach the gateway at {head}: {exc}") from exc
    try:
        answer: Any = response.json()
    except ValueError:
        answer = None
    if response.status_code != 200 or not isinstance(answer, dict):
        said = answer.get("error") if isinstance(answer, dict) else None
        raise JoinRefusedError(said or f"the gateway answered HTTP {response.status_code}")
    return answer


class JoinRefusedError(Exception):
    pass


def agent_env(answer: dict[str, Any], args: argparse.Namespace) -> dict[str, str]:
    env = {
        "JETYARD_NATS_URL": ",".join(answer["nats_urls"]),
        "JETYARD_NATS_TOKEN": answer["nats_token"],
        "JETYARD_AGENT_DATA_DIR": str(args.data_dir.resolve()),
        "JETYARD_AGENT_HOSTNAME": args.hostname,
        "JETYARD_AGENT_CLUSTER_ID": answer.get("cluster_id") or "",
        "JETYARD_AGENT_RESOURCE_GROUP": args.resource_group or answer["resource_group"],
        "JETYARD_AGENT_BACKEND": args.backend,
    }
    if answer.get("terminal_key"):
        env["JETYARD_AGENT_TERMINAL_KEY"] = answer["terminal_key"]
    return {k: v for k, v in env.items() if v != ""}


def write_env(path: Path, env: dict[str, str]) -> None:
    """Owner-only from its first byte (it holds the NATS credential)."""
    aside = path.with_name(f".{path.name}.tmp")
    aside.unlink(missing_ok=True)
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.writelines(f"{key}={value}\n" for key, value in env.items())
    aside.replace(path)


def run(args: argparse.Namespace) -> int:
    if not args.token:
        print("jetyard join: --token is required (or JETYARD_JOIN_TOKEN)", file=sys.stderr)
        return ui.USAGE
    data: Path = args.data_dir.expanduser()
    args.data_dir = data
    try:
        kept = read_node_id(data / NODE_ID_FILE)
    except ValueError as exc:  # a node.id that holds no id: a new one would be another node
        print(f"jetyard join: {exc}", file=sys.stderr)
        return ui.USAGE
    try:
        answer = exchange(args.head, args.token, args.hostname, kept)
    except JoinRefusedError as exc:
        print(f"jetyard join: refused: {exc}", file=sys.stderr)
        return ui.REFUSED
    node_id = keep_node_id(data / NODE_ID_FILE, str(answer["node_id"]))
    env = agent_env(answer, args)
    write_env(data / ENV_FILE, env)
    print(
        f"joined as node {node_id} ({args.hostname}, group {env['JETYARD_AGENT_RESOURCE_GROUP']})"
    )
    print(f"settings in {data / ENV_FILE} (readable only by you)", flush=True)
    if args.no_run:
        print(f"start the agent with: set -a; . {data / ENV_FILE}; jetyard serve agent")
        return 0
    print(
        "agent running (Ctrl-C stops it; run this under systemd to keep it: "
        f"EnvironmentFile={data / ENV_FILE}, ExecStart=jetyard serve agent)",
        flush=True,
    )
    command = [sys.executable, "-m", "jetyard.cli", "serve", "agent"]
    return os.execve(sys.executable, command, {**os.environ, **env})  # becomes the agent
