"""``jetyard endpoint``'s arguments: the parser of every verb, and the two small languages its
options speak, both pure so that they are tested alone:

- a scaling rule, ``METRIC>UP``, ``METRIC<DOWN`` or ``METRIC>UP<DOWN``, then optionally
  ``:step=N,cooldown=DURATION,window=DURATION``; e.g. ``rps>10:step=2,cooldown=2m`` (add 2
  replicas when a replica takes more than 10 requests a second, then wait 2 minutes), or
  ``inflight>4<1`` (up above 4 requests in flight per replica, down below 1). Metrics: rps,
  inflight (per replica), cpu, gpu (percent of what each replica was allocated).
- a duration, ``90``, ``90s``, ``15m``, ``12h`` or ``30d`` (seconds when no unit is given).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from jetyard.cli.common import add_credential_options

METRICS = ("rps", "inflight", "cpu", "gpu")
HELP = """Model-serving endpoints: each replica is an inference session of yours; the app proxy
serves the endpoint at /e/NAME/ (with 'Authorization: Bearer <token>' unless it is public).

Scaling rules (--rule, repeatable): METRIC>UP, METRIC<DOWN or METRIC>UP<DOWN, then optionally
:step=N,cooldown=DURATION,window=DURATION. Metrics: rps and inflight (per replica), cpu and gpu
(percent of what each replica was allocated). Examples:
  rps>10:step=2,cooldown=2m   add 2 replicas when each takes over 10 requests a second
  inflight>4<1                up above 4 requests in flight per replica, down below 1
Durations: 90, 90s, 15m, 12h, 30d."""
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}
_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([smhd]?)$")
_RULE = re.compile(
    r"^(?P<metric>[a-z]+)(?:>(?P<up>[0-9.]+))?(?:<(?P<down>[0-9.]+))?(?::(?P<options>.*))?$"
)
_OPTIONS = {"step": "step", "cooldown": "cooldown_s", "window": "window_s"}


def duration_s(text: str) -> float:
    """``30d`` -> 2592000.0; an ``ArgumentTypeError`` saying the forms otherwise."""
    found = _DURATION.match(text.strip().lower())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: use seconds, or a number with s, m, h or d (30d)"
        )
    return float(found.group(1)) * _UNITS[found.group(2)]


def scaling_rule(text: str) -> dict[str, Any]:
    """One ``--rule`` as the SDK's rule mapping (``ScalingRuleInput`` fields in snake_case)."""
    found = _RULE.match(text.strip())
    if found is None or (found["up"] is None and found["down"] is None):
        raise argparse.ArgumentTypeError(
            f"rule {text!r} is not METRIC>UP, METRIC<DOWN or METRIC>UP<DOWN, optionally "
            "followed by :step=N,cooldown=DURATION,window=DURATION (e.g. rps>10:step=1,"
            "cooldown=60)"
        )
    if found["metric"] not in METRICS:
        raise argparse.ArgumentTypeError(
            f"rule {text!r}: the metric must be one of {', '.join(METRICS)}"
        )
    rule: dict[str, Any] = {"metric": found["metric"]}
    for key, name in (("up", "scale_up_above"), ("down", "scale_down_below")):
        if found[key] is not None:
            rule[name] = _number(text, found[key])
    for option in filter(None, (found["options"] or "").split(",")):
        key, _, value = option.partition("=")
        if key.strip() not in _OPTIONS or not value:
            raise argparse.ArgumentTypeError(
                f"rule {text!r}: {option!r} is not step=N, cooldown=DURATION or window=DURATION"
            )
        name = _OPTIONS[key.strip()]
        rule[name] = int(_number(text, value)) if name == "step" else duration_s(value)
    return rule


def _number(rule: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"rule {rule!r}: {text!r} is not a number") from None


def env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--env {text!r} is not NAME=VALUE")
    return name, value


def _revision_options(parser: argparse.ArgumentParser, *, create: bool) -> None:
    parser.add_argument("--image", required=create, help="the model server's image")
    parser.add_argument("--port", type=int, help="the port it serves on (or the model's "
                        "model-definition.json)")  # fmt: skip
    parser.add_argument("--model", metavar="FOLDER", help="the model's folder, mounted read-only")
    parser.add_argument("--model-mount", help="where it is mounted (default /models)")
    parser.add_argument("--model-version", help="a label of the model's version")
    # Its own dest: ``args.command`` is the top-level command's name (``endpoint``).
    parser.add_argument(
        "--command", dest="server_command",
        help="the server's command, e.g. 'serve {model_path}' ({model_path}: the model's mount)",
    )  # fmt: skip
    parser.add_argument("--env", type=env_pair, action="append", metavar="NAME=VALUE")
    parser.add_argument("--cpu", help="cores per replica (default 1)")
    parser.add_argument("--memory", help="per replica, e.g. 2g (default 1g)")
    parser.add_argument("--gpu", help="GPUs per replica (default 0)")
    parser.add_argument("--resource-group")
    parser.add_argument("--health-path", help="probed with GET (default /health)")
    parser.add_argument("--health-interval", type=duration_s, help="between probes (default 5s)")
    parser.add_argument("--warmup", type=duration_s, help="time to pass a first probe (5m)")


def _scaling_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--min", type=int, dest="min_replicas", help="fewest replicas")
    parser.add_argument("--max", type=int, dest="max_replicas", help="most replicas")
    parser.add_argument("--rule", type=scaling_rule, action="append", dest="rules",
                        help="an autoscaling rule, e.g. 'rps>10:step=1,cooldown=60' "
                        "(repeatable; see `jetyard endpoint --help`)")  # fmt: skip


def add_parser(sub: Any) -> None:
    """``jetyard endpoint ...`` under the main parser's subcommands."""
    endpoint = sub.add_parser(
        "endpoint", help="model-serving endpoints: create, ls, show, scale, update, rm, token",
        description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    add_credential_options(endpoint)
    verbs = endpoint.add_subparsers(dest="verb", required=True)

    create = verbs.add_parser("create", help="serve a model: its replicas are your sessions")
    create.add_argument("name", help="3-63 of a-z, 0-9, '-'; its URL is /e/NAME/")
    _revision_options(create, create=True)
    create.add_argument("--replicas", type=int, default=1, help="desired replicas (default 1)")
    _scaling_options(create)
    create.add_argument("--public", action="store_true", help="answer without a token")
    create.add_argument("--project", help="the project it is charged to")
    create.add_argument("--json", action="store_true")

    listing = verbs.add_parser("ls", help="the endpoints you see")
    listing.add_argument("--all", "-a", action="store_true", help="destroyed ones too")
    listing.add_argument("--json", action="store_true", help="JSON lines, one endpoint each")

    show = verbs.add_parser("show", help="one endpoint: revisions, replicas, tokens, scaling")
    show.add_argument("name")
    show.add_argument("--ended", type=int, default=5, help="ended replicas shown (default 5)")
    show.add_argument("--json", action="store_true")

    scale = verbs.add_parser("scale", help="set the desired replica count")
    scale.add_argument("name")
    scale.add_argument("replicas", type=int)

    update = verbs.add_parser("update", help="roll to a new revision (what is left out stays)")
    update.add_argument("name")
    _revision_options(update, create=False)
    update.add_argument("--reason", default="")

    modify = verbs.add_parser("modify", help="change bounds, rules or openness")
    modify.add_argument("name")
    _scaling_options(modify)
    modify.add_argument("--no-rules", action="store_true", help="remove every rule")
    public = modify.add_mutually_exclusive_group()
    public.add_argument("--public", action="store_true", default=None)
    public.add_argument("--private", action="store_false", dest="public")

    rm = verbs.add_parser("rm", help="destroy an endpoint (its name is free afterwards)")
    rm.add_argument("name")
    rm.add_argument("--reason", default="")

    token = verbs.add_parser("token", help="the endpoint's bearer tokens")
    tokens = token.add_subparsers(dest="token_verb", required=True)
    made = tokens.add_parser("create", help="a new token, printed once")
    made.add_argument("name")
    made.add_argument("--expires", type=duration_s, default=30 * 86_400.0,
                      help="how long it is valid (default 30d)")  # fmt: skip
    made.add_argument("--note", default="")
    made.add_argument("--json", action="store_true")
    listed = tokens.add_parser("ls", help="its tokens (never their secrets)")
    listed.add_argument("name")
    listed.add_argument("--json", action="store_true")
    revoke = tokens.add_parser("revoke", help="refuse a token from now on")
    revoke.add_argument("name")
    revoke.add_argument("token_id")
    revoke.add_argument("--reason", default="")
