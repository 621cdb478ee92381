"""What ``jetyard run`` says of an image pull and what ``jetyard registry`` says of a rescan
(``jetyard.cli.pulls``, ``jetyard.cli.registry``), and the registry commands' arguments: the
password is never one of them, a pull policy is one of the four."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from jetyard.cli.main import parse
from jetyard.cli.pulls import PullDisplay, pull_text
from jetyard.cli.registry import rescan_text, summary
from jetyard.sdk.models import ImagePull, PullLayer, RescanProgress, RescanResult, SkippedTag

REF = "registry.lab:5000/team/tool:v1"
NODE = "b7cd1f6e-8686-4aca-855f-96e2a6892fb1"


def _pull(status: str = "pulling", done: int = 0, total: int = 0, **more: object) -> ImagePull:
    layers = [
        PullLayer(layer="aaa", done_bytes=4 << 20, total_bytes=4 << 20),
        PullLayer(layer="bbb", done_bytes=1 << 20, total_bytes=8 << 20),
    ]
    fields: dict[str, object] = {
        "node_id": NODE, "node_name": "gpu-7", "reference": REF, "status": status,
        "done_bytes": done, "total_bytes": total, "layers": layers, "cause": "", "reason": "",
    }  # fmt: skip
    return ImagePull.model_validate(fields | more)


@pytest.mark.parametrize(
    ("pull", "total", "said"),
    [
        (_pull(layers=[]), 0, f"pulling {REF} on gpu-7"),
        (_pull(done=5 << 20, total=12 << 20), 0,
         f"pulling {REF} on gpu-7: 5 MiB of 12 MiB (1 of 2 layers)"),
        (_pull(done=1536, layers=[]), 0, f"pulling {REF} on gpu-7: 1.5 KiB"),
        (_pull("finished"), 12 << 20, f"pulled {REF} on gpu-7 (12 MiB)"),
        (_pull("finished"), 0, f"pulled {REF} on gpu-7"),
        (_pull("failed", cause="authentication", reason="the registry refused the login"), 0,
         f"pulling {REF} on gpu-7 failed (authentication): the registry refused the login"),
        (_pull("failed"), 0, f"pulling {REF} on gpu-7 failed: no reason given"),
    ],
)  # fmt: skip
def test_a_pull_in_words(pull: ImagePull, total: int, said: str) -> None:
    assert pull_text(pull, total) == said


def test_off_a_terminal_a_pull_is_a_line_when_it_starts_and_one_when_it_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    display = PullDisplay(Console(file=io.StringIO(), force_terminal=False))
    display.show(_pull(layers=[]))
    for done in (1 << 20, 6 << 20, 12 << 20):
        display.show(_pull(done=done, total=12 << 20))
    display.show(_pull("finished", layers=[]))
    display.stop()
    assert capsys.readouterr().err.splitlines() == [
        f"jetyard: pulling {REF} on gpu-7",
        f"jetyard: pulled {REF} on gpu-7 (12 MiB)",
    ]


def test_on_a_terminal_a_pull_is_a_bar_in_binary_units() -> None:
    screen = io.StringIO()
    display = PullDisplay(Console(file=screen, force_terminal=True, width=160))
    display.show(_pull(done=3 << 20, total=12 << 20))
    display.bars.refresh()
    drawn = screen.getvalue()
    assert f"{REF} on gpu-7" in drawn and "3.0/12.0 MiB" in drawn, drawn
    display.show(_pull("finished", layers=[]))
    display.stop()
    assert f"jetyard: pulled {REF} on gpu-7 (12 MiB)" in screen.getvalue()


def test_a_rescan_in_words() -> None:
    progress = RescanProgress(repositories_done=2, repositories_total=3, tags_done=7,
                              tags_total=12)  # fmt: skip
    assert rescan_text("lab", progress) == "rescanning lab: 2 of 3 repositories, 7 of 12 tags"
    result = RescanResult(
        registry="lab", registered=["r/a:v1", "r/b:v1"], updated=["r/c:v2"], unchanged=4,
        skipped=[SkippedTag(reference="r/d:v1", reason="no amd64 image")],
    )  # fmt: skip
    assert summary(result) == [
        "registry lab: 2 registered, 1 updated, 4 unchanged, 1 skipped",
        "registered  r/a:v1",
        "registered  r/b:v1",
        "updated     r/c:v2",
        "skipped     r/d:v1: no amd64 image",
    ]
    nothing = RescanResult(registry="lab", registered=[], updated=[], unchanged=5, skipped=[])
    assert summary(nothing) == ["registry lab: 0 registered, 0 updated, 5 unchanged, 0 skipped"]


def test_the_registry_arguments() -> None:
    added = parse([
        "registry", "add", "lab", "https://r.lab:5000", "--username", "ci", "--password-stdin",
        "--project", "default/research", "--no-verify-tls",
    ])  # fmt: skip
    assert (added.name, added.url, added.username, added.password_stdin) == (
        "lab", "https://r.lab:5000", "ci", True,
    )  # fmt: skip
    assert added.project == ["default/research"] and added.verify_tls is False
    assert parse(["registry", "add", "lab", "https://r.lab"]).verify_tls is None  # the default
    rescan = parse(["registry", "rescan", "lab", "-r", "team/a", "-r", "team/b", "--json"])
    assert rescan.repository == ["team/a", "team/b"] and rescan.json
    assert parse(["registry", "pull-policy", REF, "group"]).policy == "group"


@pytest.mark.parametrize(
    "argv",
    [
        ["registry", "add", "lab", "https://r.lab", "--password", "hunter2"],
        ["registry", "pull-policy", REF, "sometimes"],
        ["registry", "rescan"],
    ],
)
def test_usage_mistakes_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
