"""How ``jetyard up`` tells that a part is healthy: the NATS server answering, a service's
``/healthz`` 200 (the gateway's says why not: views catching up, NATS unreachable), and how it
says that a part ended, with the end of its log. Reads no subject."""

from __future__ import annotations

import json
import signal
import socket
import urllib.error
import urllib.request
from pathlib import Path

from jetyard.runtime.data_dir import last_lines
from jetyard.runtime.natsserver import NatsServer


def ended(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with {returncode}"


def with_log(text: str, log: Path) -> str:
    lines = last_lines(log)
    if not lines:
        return f"{text} ({log} is empty)"
    return f"{text}. The end of {log}:\n" + "\n".join(f"    {line}" for line in lines)


def http_problem(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return None if response.status == 200 else f"{url} answers {response.status}"
    except urllib.error.HTTPError as exc:
        return f"{url} answers {exc.code}"
    except OSError as exc:
        return f"not answering on {url} yet ({exc})"


def nats_problem(server: NatsServer) -> str | None:
    assert server.process is not None
    if server.process.poll() is not None:
        return f"{ended(server.process.returncode)}; restarting"
    try:
        with socket.create_connection((server.host, server.port), 1.0):
            return None
    except OSError as exc:
        return f"not answering on {server.url} ({exc})"


def gateway_problem(port: int, host: str = "127.0.0.1") -> str | None:
    url = f"http://{host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return None if response.status == 200 else f"{url} answers {response.status}"
    except urllib.error.HTTPError as exc:  # 503: not caught up, or NATS unreachable
        try:
            body = json.loads(exc.read())
        except ValueError:
            return f"{url} answers {exc.code}"
        if body.get("status") == "catching-up":
            return (
                f"{url} says the views are catching up "
                f"(at {body.get('views_position')} of {body.get('log_end')})"
            )
        return f"{url} says {body.get('status')}: {body.get('error')}"
    except OSError as exc:
        return f"not answering on {url} yet ({exc})"
