"""What keeps running when ``jetyard up`` stops: the sessions' containers. Stopping the services
does not stop them (a new ``up`` on the same data directory finds them again by their labels,
and a session lives through its manager's restart); ``up`` says which are left and how to end
them, and with ``--stop-sessions`` ends them first, through the log like any terminate (the
scheduler asks the agent to stop each kernel; the final reason names ``jetyard up``).

Reads the Docker engine (containers labelled with this installation's cluster id, running);
sends ``cmd.session.terminate`` only with ``--stop-sessions``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import aiodocker

from commands.bus import CommandBus
from commands.messages import TerminateSession
from events.bus import connect
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.settings import NatsSettings
from services.node.backend import LABEL_CLUSTER, LABEL_SESSION

UP = Actor.service("jetyard-up")
REASON = "jetyard up was stopped with --stop-sessions"
END_WAIT_S = 30.0


@dataclass(frozen=True, order=True)
class Left:
    container: str
    session_id: str


async def _running(cluster_id: str) -> list[Left] | None:
    """This installation's running session containers; None when no Docker engine answers."""
    try:
        docker = aiodocker.Docker()
    except (OSError, ValueError, aiodocker.DockerError):
        return None
    try:
        filters = json.dumps({"label": [f"{LABEL_CLUSTER}={cluster_id}"], "status": ["running"]})
        found = await docker.containers.list(filters=filters)
    except (OSError, aiodocker.DockerError):
        return None
    finally:
        await docker.close()
    return sorted(
        Left(str(c["Names"][0]).lstrip("/"), str((c["Labels"] or {}).get(LABEL_SESSION, "")))
        for c in found
    )


def left_running(cluster_id: str) -> list[Left] | None:
    return asyncio.run(_running(cluster_id)) if cluster_id else None


def sessions_of(left: list[Left]) -> list[str]:
    return sorted({one.session_id for one in left if one.session_id})


async def _end(nats: NatsSettings, cluster_id: str, session_ids: list[str]) -> list[Left]:
    bus = await connect(nats, name="jetyard-up-stop-sessions")
    try:
        commands = CommandBus(bus)
        for session_id in session_ids:
            await commands.send(TerminateSession(
                actor=UP, tenant=SYSTEM_TENANT, session_id=session_id, reason=REASON
            ))  # fmt: skip
    finally:
        await bus.close()
    deadline = time.monotonic() + END_WAIT_S
    while True:
        left = await _running(cluster_id) or []
        if not left or time.monotonic() >= deadline:
            return left
        await asyncio.sleep(0.5)


def end_sessions(nats: NatsSettings, cluster_id: str, session_ids: list[str]) -> list[Left]:
    """Terminate ``session_ids`` through the log and wait (up to ``END_WAIT_S``) for their
    containers to stop; what is still running then."""
    return asyncio.run(_end(nats, cluster_id, session_ids))


def said_left(left: list[Left] | None, data_dir: str) -> list[str]:
    """What ``up`` says about the containers still running once it stopped."""
    if not left:
        return []
    sessions = sessions_of(left)
    shown = ", ".join(s[:8] for s in sessions[:10]) + (" …" if len(sessions) > 10 else "")
    return [
        f"{len(left)} session container(s) keep running ({len(sessions)} session(s): {shown}).",
        f"A new `jetyard up --data-dir {data_dir}` takes them up again (then `jetyard rm` "
        "ends one); started with --stop-sessions, `jetyard up` ends them when it stops.",
    ]
