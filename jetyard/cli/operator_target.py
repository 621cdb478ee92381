"""Which stack the operator commands (``jetyard log``, ``streams``, ``quarantine``,
``projections rebuild``) act on: the NATS server named by ``--url`` (or
``JETYARD_NATS_URL``); else the data directory named by ``--data-dir`` (or
``JETYARD_DATA_DIR``), through the ``nats.env`` and ``run/stack.json`` that ``jetyard up``
wrote there; else the one ``jetyard up`` running on this machine (``jetyard.stacks``). With
none of these, or several stacks running, they stop with ``NoStackError`` saying what to
give: never a silent default."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from jetyard.stacks import NoStackError, read_env_file, recorded, the_running_one
from projections.settings import ProjectionSettings
from schemas.settings import NatsSettings


def data_dir(args: argparse.Namespace) -> Path:
    given = getattr(args, "data_dir", None) or os.environ.get("JETYARD_DATA_DIR")
    if given:
        return Path(given).expanduser()
    return Path(the_running_one().data_dir)


def nats_settings(args: argparse.Namespace) -> NatsSettings:
    if args.url or os.environ.get("JETYARD_NATS_URL"):
        overrides = {k: v for k, v in {"url": args.url, "token": args.token}.items() if v}
        return NatsSettings(**overrides)
    where = data_dir(args)
    env_file = where / "nats.env"
    try:
        found = read_env_file(env_file)
    except OSError:
        raise NoStackError(
            f"{env_file} is missing: no `jetyard up` has started on {where} (or give the "
            "NATS server with --url)"
        ) from None
    return NatsSettings(
        url=found["JETYARD_NATS_URL"], token=args.token or found.get("JETYARD_NATS_TOKEN")
    )


def projection_settings(args: argparse.Namespace) -> ProjectionSettings:
    """The views of the same stack: ``JETYARD_PROJECTIONS_DATABASE_URL`` if set, else the
    database its ``jetyard up`` used (``run/stack.json``), else ``views.db`` in its data
    directory."""
    if os.environ.get("JETYARD_PROJECTIONS_DATABASE_URL"):
        return ProjectionSettings()
    where = data_dir(args)
    record = recorded(where)  # none: ProjectionSettings' own default, views.db in ``where``
    return ProjectionSettings(data_dir=where, database_url=record.views_url if record else "")


def with_nats_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options that name the stack a command acts on (``--data-dir``, ``--url``,
    ``--token``), added to ``p``."""
    p.add_argument(
        "--data-dir",
        help="the stack whose data directory this is (env JETYARD_DATA_DIR; default: "
        "the running `jetyard up`)",
    )
    p.add_argument("--url", help="NATS URL instead (env JETYARD_NATS_URL)")
    p.add_argument("--token", help="NATS token (env JETYARD_NATS_TOKEN)")
    return p
