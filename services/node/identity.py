"""Which node an agent is: its node id, resolved once at start-up, before the agent is built.
Reads and writes no subjects; reads ``<data dir>/node.id`` and writes it on the first start.

The id must outlive restarts (the node's ledger, the agent's aggregate and its containers'
labels carry it) and must not come from the host name alone: two agents on one machine with
two data directories are two nodes. In order:

1. ``JETYARD_AGENT_NODE_ID``, when set by hand;
2. the id kept in ``<data dir>/node.id`` (owner-only);
3. on the first start, a fresh random id, kept there.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from schemas.ids import check_token, new_id, node_id_for_host
from services.node.settings import AgentSettings

log = logging.getLogger(__name__)

NODE_ID_FILE = "node.id"


def resolve_node_id(settings: AgentSettings) -> str:
    """The node id this agent acts under (see the module's docstring)."""
    path = settings.data_dir / NODE_ID_FILE
    kept = read_node_id(path)
    if settings.node_id is not None:
        if kept is not None and kept != settings.node_id:
            log.warning(
                "JETYARD_AGENT_NODE_ID=%s, but %s says %s: acting as %s (the containers of %s "
                "are not this agent's)",
                settings.node_id, path, kept, settings.node_id, kept,
            )  # fmt: skip
        return settings.node_id
    if kept is not None:
        return kept
    if settings.data_dir.exists():
        # A data directory from before node ids were kept: its agent ran as the id derived
        # from its cluster id and host name, which its ledger, its aggregate and its
        # containers' labels carry. A new id would orphan those containers and leave the
        # old node to be declared lost, so it keeps that one (from now on, in node.id).
        return keep_node_id(path, node_id_for_host(settings.hostname, settings.cluster_id))
    return keep_node_id(path, new_id())


def read_node_id(path: Path) -> str | None:
    """The id kept in ``path``; None if there is no such file. A file that holds no valid id
    is an error, never replaced: a new id would make this agent another node."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return check_token(text, what=f"the node id in {path}")


def keep_node_id(path: Path, node_id: str) -> str:
    """Write ``node_id`` to ``path`` (owner-only) unless it exists, and return what it then
    holds. Written aside and linked into place: a concurrent first start never reads half a
    file, and whichever links first decides for both."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.{new_id()}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(f"{node_id}\n")
        os.link(aside, path)
    except FileExistsError:
        pass
    finally:
        aside.unlink(missing_ok=True)
    kept = read_node_id(path)
    assert kept is not None, f"{path} was just written"
    return kept
