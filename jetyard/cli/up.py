"""``jetyard up`` (the whole system on this machine, ``jetyard.runtime.up``) and ``jetyard serve
SERVICE`` (one service against an external NATS, ``jetyard.runtime.serve``): their arguments,
from the command line or ``JETYARD_*``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from jetyard.runtime.serve import SERVICES, serve
from jetyard.runtime.supervisor import UpOptions
from jetyard.runtime.up import up
from jetyard.stacks import default_data_dir

COMMANDS = ("up", "serve")


def add_up_parser(sub: Any) -> None:
    command = sub.add_parser(
        "up", help="start the whole system on this machine (embedded defaults)"
    )
    command.add_argument(
        "--data-dir",
        default=os.environ.get("JETYARD_DATA_DIR", str(default_data_dir())),
        help="where the log, views and logs live (env JETYARD_DATA_DIR)",
    )
    command.add_argument(
        "--gateway-port",
        type=int,
        default=int(os.environ.get("JETYARD_GATEWAY_PORT", "8080")),
        help="GraphQL port (env JETYARD_GATEWAY_PORT)",
    )
    command.add_argument(
        "--nats-port",
        type=int,
        default=int(os.environ.get("JETYARD_NATS_PORT", "0")),
        help="NATS port, 0 for a free one (env JETYARD_NATS_PORT)",
    )
    command.add_argument(
        "--listen",
        type=listen_address,
        default=os.environ.get("JETYARD_UP_LISTEN", "127.0.0.1"),
        help="the address NATS and the gateway listen on, one other machines reach this one at "
        "(they join with `jetyard join`; NATS still asks for its token); default 127.0.0.1 "
        "(env JETYARD_UP_LISTEN)",
    )
    command.add_argument(
        "--agent-backend",
        choices=["auto", "docker", "simulated"],
        default=os.environ.get("JETYARD_AGENT_BACKEND", "auto"),
        help="containers on Docker, or simulated (env JETYARD_AGENT_BACKEND)",
    )
    command.add_argument(
        "--stop-sessions",
        action="store_true",
        help="on Ctrl-C, end every running session first (by default their containers keep "
        "running, and the next `jetyard up` takes them up again)",
    )


def listen_address(text: str) -> str:
    """A concrete address: what is listened on is also what joining machines are told."""
    if text in ("0.0.0.0", "::", "[::]", ""):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an address other machines can be told: give this machine's "
            "address on their network (e.g. 10.0.0.5)"
        )
    return text


def add_serve_parser(sub: Any) -> None:
    command = sub.add_parser("serve", help="run one service against an external NATS (JETYARD_*)")
    command.add_argument("service", choices=sorted(SERVICES))


def run(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return serve(args.service)
    options = UpOptions(
        data_dir=Path(args.data_dir).expanduser(),
        gateway_port=args.gateway_port,
        nats_port=args.nats_port,
        agent_backend=args.agent_backend,
        restart_delay_s=float(os.environ.get("JETYARD_UP_RESTART_DELAY_S", "1.0")),
        stop_sessions=args.stop_sessions,
        listen=args.listen,
    )
    return up(options)
