"""``jetyard endpoint``: model-serving endpoints from the shell, through the SDK
(``jetyard.sdk.endpoints``): ``create``, ``ls``, ``show``, ``scale``, ``update``, ``modify``,
``rm`` and ``token create|ls|revoke`` (a token is printed once, when it is made). Signs in as
the other user commands do. Its arguments and their small languages (scaling rules,
durations) are in ``jetyard.cli.endpoints_args``. Exit status 0 done, 1 refused by the gateway
(its words), 2 a usage or credentials problem."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from typing import Any

from jetyard.cli import common as ui
from jetyard.cli.endpoints_args import add_parser
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import ConfigError, Credentials
from jetyard.sdk.endpoints import Endpoints
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models.endpoints import Endpoint, EndpointDetail

__all__ = ["add_parser", "run"]


def revision_of(args: argparse.Namespace) -> dict[str, Any]:
    """The revision options given, as the SDK's keyword arguments."""
    health = {"path": args.health_path, "interval_s": args.health_interval,
              "warmup_s": args.warmup}  # fmt: skip
    given = {
        "image": args.image, "port": args.port, "model": args.model,
        "model_mount": args.model_mount, "model_version": args.model_version,
        "command": None if args.server_command is None else shlex.split(args.server_command),
        "env": None if args.env is None else dict(args.env), "cpu": args.cpu,
        "memory": args.memory, "gpu": args.gpu, "resource_group": args.resource_group,
        "health": {k: v for k, v in health.items() if v is not None} or None,
    }  # fmt: skip
    return {k: v for k, v in given.items() if v is not None}


def _replicas(endpoint: Endpoint) -> str:
    return f"{endpoint.serving_replicas}/{endpoint.desired_replicas}"


def _bounds(endpoint: Endpoint) -> str:
    return f"{endpoint.min_replicas}..{endpoint.max_replicas}"


def _listing(found: list[Endpoint]) -> None:
    columns = ("name", "status", "serving", "bounds", "revision", "public", "url", "id")
    ui.table(columns, (
        (e.name, e.status, _replicas(e), _bounds(e),
         e.current_revision if e.target_revision is None
         else f"{e.current_revision} -> {e.target_revision}",
         "yes" if e.open_to_public else "no", e.url, e.id)
        for e in found
    ))  # fmt: skip


def _traffic(endpoint: EndpointDetail) -> str:
    t = endpoint.traffic
    if t.requests_per_second is None:
        return "- (no app proxy reports)"
    latency = "" if t.p50_ms is None else f", p50 {t.p50_ms:.1f} ms, p99 {t.p99_ms or 0:.1f} ms"
    return f"{t.requests_per_second:.1f} req/s, {t.inflight or 0} in flight{latency}"


def _show(endpoint: EndpointDetail) -> None:
    out = ui.console()
    rev = f"{endpoint.current_revision}" + (
        f" (rolling to {endpoint.target_revision})" if endpoint.target_revision else ""
    )
    for key, value in (
        ("name", endpoint.name), ("id", endpoint.id), ("status", endpoint.status),
        ("url", endpoint.url), ("traffic", _traffic(endpoint)),
        ("replicas", f"{_replicas(endpoint)} serving, bounds {_bounds(endpoint)}"),
        ("revision", rev), ("public", "yes" if endpoint.open_to_public else "no"),
        ("last scaled", endpoint.last_scaling_reason or "-"),
    ):  # fmt: skip
        out.print(f"{key:>12}: {value}", markup=False, highlight=False)
    for rule in endpoint.rules:
        up = "" if rule.scale_up_above is None else f">{rule.scale_up_above:g}"
        down = "" if rule.scale_down_below is None else f"<{rule.scale_down_below:g}"
        text = f"{rule.metric}{up}{down}:step={rule.step},cooldown={rule.cooldown_s:g}s"
        out.print(f"{'rule':>12}: {text},window={rule.window_s:g}s", markup=False)
    print("\nrevisions")
    ui.table(("revision", "image", "port", "model", "version", "added", "rolled back"), (
        (r.revision, r.image, r.port, r.model_folder, r.model_version or None,
         r.added_at.isoformat(timespec="seconds"), r.rolled_back_reason)
        for r in endpoint.revisions
    ))  # fmt: skip
    print("\nreplicas")
    ui.table(("replica", "revision", "lifecycle", "health", "traffic", "reason", "session"), (
        (r.replica, r.revision, r.lifecycle, r.health, r.traffic, r.reason, r.session_id)
        for r in endpoint.replicas
    ))  # fmt: skip
    print("\nscaling")
    ui.table(("at", "replicas", "source", "reason"), (
        (s.at.isoformat(timespec="seconds"), f"{s.previous} -> {s.replicas}", s.source, s.reason)
        for s in endpoint.scaling_history
    ))  # fmt: skip


async def _dispatch(jy: Endpoints, args: argparse.Namespace) -> None:
    verb = args.verb
    if verb == "create":
        created = await jy.create(
            args.name, replicas=args.replicas, min_replicas=args.min_replicas,
            max_replicas=args.max_replicas, rules=args.rules, open_to_public=args.public,
            project=args.project, **revision_of(args),
        )  # fmt: skip
        print(
            json.dumps(created.as_json())
            if args.json
            else f"created {created.name} ({created.status}): {created.url}"
        )
    elif verb == "ls":
        found = await jy.list(destroyed=args.all)
        ui.json_lines(e.as_json() for e in found) if args.json else _listing(found)
    elif verb == "show":
        shown = await jy.get(args.name, ended_replicas=args.ended)
        print(json.dumps(shown.as_json())) if args.json else _show(shown)
    elif verb == "scale":
        scaled = await jy.scale(args.name, args.replicas)
        print(f"scaled {scaled.name} to {scaled.desired_replicas} ({scaled.status})")
    elif verb == "update":
        updated = await jy.update(args.name, reason=args.reason, **revision_of(args))
        print(f"updated {updated.name}: rolling to revision {updated.target_revision}")
    elif verb == "modify":
        rules = [] if args.no_rules else args.rules
        changed = await jy.modify(
            args.name, rules=rules, open_to_public=args.public,
            min_replicas=args.min_replicas, max_replicas=args.max_replicas,
        )  # fmt: skip
        print(f"modified {changed.name}: bounds {_bounds(changed)}, {len(changed.rules)} rules")
    elif verb == "rm":
        gone = await jy.destroy(args.name, reason=args.reason)
        print(f"rm {gone.name}: {gone.status}")
    else:
        await _token(jy, args)


async def _token(jy: Endpoints, args: argparse.Namespace) -> None:
    if args.token_verb == "create":
        issued = await jy.create_token(args.name, expires_in_s=int(args.expires), note=args.note)
        if args.json:
            print(json.dumps(issued.as_json()))
            return
        print(issued.token)
        expires = issued.expires_at.isoformat(timespec="seconds")
        print(f"token {issued.token_id}, valid until {expires}: it is shown only now "
              "(send it as 'Authorization: Bearer <token>')", file=sys.stderr)  # fmt: skip
    elif args.token_verb == "ls":
        tokens = await jy.tokens(args.name)
        if args.json:
            ui.json_lines(t.as_json() for t in tokens)
            return
        ui.table(("token", "note", "issued", "expires", "revoked"), (
            (t.token_id, t.note or None, t.issued_at.isoformat(timespec="seconds"),
             t.expires_at.isoformat(timespec="seconds"),
             None if t.revoked_at is None else f"{t.revoked_at:%Y-%m-%d %H:%M} {t.revoke_reason}")
            for t in tokens
        ))  # fmt: skip
    else:
        await jy.revoke_token(args.name, args.token_id, reason=args.reason)
        print(f"revoked token {args.token_id} of {args.name}")


async def _run(args: argparse.Namespace, signed_in: Credentials) -> None:
    async with AsyncClient.from_config(signed_in) as client:
        await _dispatch(client.endpoints, args)


def run(args: argparse.Namespace) -> int:
    try:
        signed_in = ui.credentials(args)
    except ConfigError as exc:
        print(f"jetyard endpoint: {exc}", file=sys.stderr)
        return ui.USAGE
    try:
        asyncio.run(_run(args, signed_in))
    except JetyardError as exc:
        print(f"jetyard endpoint {args.verb}: {exc}", file=sys.stderr)
        return ui.REFUSED
    except KeyboardInterrupt:
        return ui.INTERRUPTED
    return 0
