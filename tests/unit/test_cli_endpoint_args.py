"""``jetyard endpoint``'s small languages (``jetyard.cli.endpoints_args``): scaling rules and
durations, each mistake a sentence that says the accepted forms."""

from __future__ import annotations

import argparse

import pytest

from jetyard.cli.endpoints_args import duration_s, scaling_rule
from jetyard.cli.main import parse


def test_rules_read_as_the_sdks_rule_mappings() -> None:
    assert scaling_rule("rps>10") == {"metric": "rps", "scale_up_above": 10.0}
    assert scaling_rule("inflight>4<1") == {
        "metric": "inflight", "scale_up_above": 4.0, "scale_down_below": 1.0,
    }  # fmt: skip
    assert scaling_rule("cpu<20:step=2,cooldown=2m,window=45") == {
        "metric": "cpu", "scale_down_below": 20.0, "step": 2, "cooldown_s": 120.0,
        "window_s": 45.0,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("rps", "is not METRIC>UP, METRIC<DOWN or METRIC>UP<DOWN"),
        ("watts>3", "the metric must be one of rps, inflight, cpu, gpu"),
        ("rps>10:steps=2", "'steps=2' is not step=N, cooldown=DURATION or window=DURATION"),
        ("rps>1.2.3", "'1.2.3' is not a number"),
        ("rps>1:cooldown=soon", "'soon' is not a duration"),
    ],
)
def test_a_bad_rule_says_the_forms(text: str, error: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        scaling_rule(text)
    assert error in str(raised.value)


def test_durations_take_a_unit() -> None:
    assert [duration_s(t) for t in ("90", "90s", "15m", "12h", "30d")] == [
        90, 90, 900, 43_200, 2_592_000,
    ]  # fmt: skip
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
        duration_s("a month")


def test_create_reads_every_option() -> None:
    args = parse([
        "endpoint", "create", "echo", "--image", "srv:1", "--port", "8000", "--model", "llm",
        "--command", "serve {model_path} --fast", "--replicas", "2", "--max", "4",
        "--rule", "rps>10:step=1,cooldown=60", "--env", "A=b=c", "--public", "--warmup", "5m",
    ])  # fmt: skip
    assert (args.name, args.image, args.port, args.model, args.replicas) == (
        "echo", "srv:1", 8000, "llm", 2,
    )  # fmt: skip
    assert (args.command, args.server_command) == ("endpoint", "serve {model_path} --fast")
    assert args.rules == [{"metric": "rps", "scale_up_above": 10.0, "step": 1, "cooldown_s": 60.0}]
    assert (args.env, args.public, args.warmup, args.max_replicas) == ([("A", "b=c")], True, 300, 4)
    token = parse(["endpoint", "token", "create", "echo", "--expires", "7d"])
    assert (token.token_verb, token.expires) == ("create", 604_800)
