"""The ``jetyard`` command line's arguments: ``run IMAGE [options] -- CMD...`` split at its
``--`` (options inside the command left alone), mounts and env pairs, ``--json`` on every
listing, the login choices, and the completion scripts argcomplete writes; ``jetyard log``'s
lines are JSON objects carrying their ``seq``."""

from __future__ import annotations

import argparse
import json

import pytest

from jetyard.cli.completion import SHELLS, script
from jetyard.cli.main import parse
from jetyard.cli.operator import _json_line
from jetyard.cli.sessions_args import env_pair, mount, split_command


def _parse(*argv: str) -> argparse.Namespace:
    return parse(list(argv))


def test_run_takes_its_command_after_the_double_dash() -> None:
    args = _parse("run", "img:1", "--cpu", "0.5", "--mount", "data:/d:ro", "-e", "A=b=c",
                  "--", "sh", "-c", "echo --cpu 9; exit 3")  # fmt: skip
    assert (args.command, args.image, args.cpu, args.type) == ("run", "img:1", "0.5", "batch")
    assert args.cmd == ["sh", "-c", "echo --cpu 9; exit 3"]
    assert args.mount == [{"folder": "data", "path": "/d", "read_only": True}]
    assert args.env == [("A", "b=c")]
    assert _parse("run", "img", "true").cmd == ["true"]
    assert _parse("run", "img", "--type", "interactive").cmd == []
    assert split_command(["vfolder", "rm", "--", "-odd"]) == (["vfolder", "rm", "--", "-odd"], None)


def test_mounts_and_env_pairs() -> None:
    assert mount("data") == {"folder": "data", "path": None, "read_only": False}
    assert mount("data::ro") == {"folder": "data", "path": None, "read_only": True}
    assert mount("data:/x:rw")["read_only"] is False
    for bad in (":/x", "data:/x:rx"):
        with pytest.raises(argparse.ArgumentTypeError):
            mount(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        env_pair("NOVALUE")


def test_every_listing_has_json() -> None:
    for argv in (("ps",), ("apps", "s1"), ("vfolder", "ls"), ("vfolder", "files", "f")):
        assert _parse(*argv, "--json").json is True
    assert _parse("ps", "-a").all is True
    assert _parse("logs", "s1", "-f", "--kernel", "1").kernel == "1"
    assert _parse("rm", "s1", "s2").sessions == ["s1", "s2"]


def test_login_takes_a_keypair_or_an_email(capsys: pytest.CaptureFixture[str]) -> None:
    assert _parse("login", "--email", "a@b.org").email == "a@b.org"
    args = _parse("login", "--endpoint", "http://gw:1", "--access-key", "AK")
    assert (args.endpoint, args.access_key, args.secret_key) == ("http://gw:1", "AK", None)
    for argv in (("login",), ("login", "--email", "a@b.org", "--access-key", "AK")):
        with pytest.raises(SystemExit):
            _parse(*argv)
    capsys.readouterr()


def test_operator_commands_take_a_data_dir() -> None:
    for argv in (("log",), ("projections", "rebuild"), ("quarantine",), ("streams",)):
        assert _parse(*argv, "--data-dir", "/srv/jy").data_dir == "/srv/jy"


def test_completion_scripts_ask_jetyard_itself() -> None:
    for shell in SHELLS:
        text = script(shell)
        assert "jetyard" in text and "_ARGCOMPLETE" in text
    assert _parse("completion", "fish").shell == "fish"


def test_log_lines_are_json_objects_with_their_seq() -> None:
    line = _json_line(42, {"name": "SessionCreated", "payload": {"a": 1}})
    assert json.loads(line) == {"seq": 42, "name": "SessionCreated", "payload": {"a": 1}}


def test_admin_user_create_takes_a_fair_share_within_its_bounds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ("admin", "user", "create", "a@b.org", "--project", "vision")
    assert _parse(*argv).fair_share is None  # left out: the gateway's default, 1
    assert _parse(*argv, "--fair-share", "1").fair_share == 1
    assert _parse(*argv, "--fair-share", "10000").fair_share == 10_000
    for bad in ("0", "-1", "10001", "1.5", "many"):
        with pytest.raises(SystemExit) as exited:
            _parse(*argv, "--fair-share", bad)
        assert exited.value.code == 2
        said = f"argument --fair-share: a share is a whole number from 1 to 10000, got {bad!r}"
        assert said in capsys.readouterr().err
