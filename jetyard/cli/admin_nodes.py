"""``jetyard admin node``: machines joining and leaving the cluster (superadmins), on the
gateway's GraphQL. ``token create [--expires 1h] [--group G] [--note N]`` prints a join token
(once) and the exact ``jetyard join`` line to run on the new machine; ``token ls``;
``token revoke ID``; ``ls`` (the nodes); ``drain NODE [--deadline 10m]`` (no new sessions
there; what runs ends, or is stopped at the deadline); ``remove NODE`` takes a drained node
out for good."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from jetyard.cli import common as ui
from jetyard.sdk.async_client import AsyncClient

GRAPHQL_INT_MAX = 2**31 - 1
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
NODE_FIELDS = "id hostname resourceGroup state"
TOKEN_FIELDS = "id resourceGroup note createdAt expiresAt expired revoked nodes"


def duration_s(text: str) -> int:
    """``90``, ``90s``, ``15m``, ``1h``, ``7d`` in seconds."""
    found = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text)
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30m, 1h or 7d")
    seconds = int(found.group(1)) * UNITS[found.group(2) or "s"]
    if seconds > GRAPHQL_INT_MAX:  # the API's Int; the rules' own bounds are said by the API
        raise argparse.ArgumentTypeError(f"{text!r} is longer than the API takes")
    return seconds


def add_parsers(what: Any) -> None:
    node = what.add_parser(
        "node", help="machines: join tokens, draining and removing a node (superadmins)"
    )
    verbs = node.add_subparsers(dest="admin_verb", required=True)
    token = verbs.add_parser("token", help="join tokens: create, ls, revoke")
    tverbs = token.add_subparsers(dest="token_verb", required=True)
    create = tverbs.add_parser("create", help="a join token, shown once, with its join command")
    create.add_argument("--expires", type=duration_s, default=3600, help="e.g. 30m, 1h, 7d")
    create.add_argument("--group", default="default", help="the nodes' resource group")
    create.add_argument("--note", default="", help="what it is for")
    create.add_argument(
        "--quiet", action="store_true", help="print the token alone (TOKEN=$(jetyard ...))"
    )
    listed = tverbs.add_parser("ls", help="join tokens (never their secrets)")
    listed.add_argument("--json", action="store_true", help="JSON lines")
    revoke = tverbs.add_parser("revoke", help="no machine joins with it from now on")
    revoke.add_argument("token_id")
    nodes = verbs.add_parser("ls", help="the cluster's nodes: id, host name, group, state")
    nodes.add_argument("--json", action="store_true", help="JSON lines")
    drain = verbs.add_parser("drain", help="no new sessions on a node; what runs there ends")
    drain.add_argument("node_id")
    drain.add_argument("--deadline", type=duration_s, help="stop what still runs then, e.g. 10m")
    drain.add_argument("--reason", default="drained by an operator")
    remove = verbs.add_parser("remove", help="take a drained node out of the cluster for good")
    remove.add_argument("node_id")
    remove.add_argument("--reason", default="removed by an operator")


async def call(jy: AsyncClient, args: argparse.Namespace) -> int:
    if args.admin_verb == "ls":
        nodes = await _listed(jy, "nodes", NODE_FIELDS)
        if args.json:
            ui.json_lines(nodes)
            return 0
        ui.table(
            ("ID", "HOST", "GROUP", "STATE"),
            ((n["id"], n["hostname"], n["resourceGroup"], n["state"]) for n in nodes),
        )
        return 0
    if args.admin_verb == "drain":
        data = await jy.graphql(
            "mutation($id: ID!, $reason: String!, $s: Int) { drainNode(id: $id, reason: $reason, "
            "deadlineSeconds: $s) { message } }",
            {"id": args.node_id, "reason": args.reason, "s": args.deadline},
        )
        print(data["drainNode"]["message"])
        return 0
    if args.admin_verb == "remove":
        data = await jy.graphql(
            "mutation($id: ID!, $reason: String!) { removeNode(id: $id, reason: $reason) "
            "{ message } }",
            {"id": args.node_id, "reason": args.reason},
        )
        print(data["removeNode"]["message"])
        return 0
    if args.token_verb == "create":
        data = await jy.graphql(
            "mutation($s: Int!, $g: String!, $n: String!) { createJoinToken("
            "expiresInSeconds: $s, resourceGroup: $g, note: $n) "
            "{ tokenId token expiresAt outcome { message } } }",
            {"s": args.expires, "g": args.group, "n": args.note},
        )
        made = data["createJoinToken"]
        if args.quiet:
            print(made["token"])
            return 0
        print(f"join token {made['tokenId']} (group {args.group}, expires {made['expiresAt']})")
        print(made["token"])
        print("On the new machine, run:")
        print(f"  jetyard join {jy.endpoint} --token {made['token']}")
        print(
            "(the token is shown this once; anyone holding it joins a machine until it expires "
            f"or `jetyard admin node token revoke {made['tokenId']}`)",
            file=sys.stderr,
        )
        return 0
    if args.token_verb == "revoke":
        data = await jy.graphql(
            "mutation($id: ID!) { revokeJoinToken(id: $id) { message } }", {"id": args.token_id}
        )
        print(data["revokeJoinToken"]["message"])
        return 0
    tokens = await _listed(jy, "joinTokens", TOKEN_FIELDS)
    if args.json:
        ui.json_lines(tokens)
        return 0
    ui.table(
        ("ID", "GROUP", "EXPIRES", "STATE", "NODES", "NOTE"),
        (
            (t["id"], t["resourceGroup"], t["expiresAt"], _state(t), len(t["nodes"]), t["note"])
            for t in tokens
        ),
    )
    return 0


async def _listed(jy: AsyncClient, query: str, fields: str) -> list[dict[str, Any]]:
    """A list query's rows."""
    rows: list[dict[str, Any]] = (await jy.graphql(f"{{ {query} {{ {fields} }} }}"))[query]
    return rows


def _state(token: dict[str, Any]) -> str:
    if token["revoked"]:
        return "revoked"
    return "expired" if token["expired"] else "valid"
