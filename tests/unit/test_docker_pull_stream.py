"""The Docker pull stream read as progress (``PullStream``), errors read as causes
(``classify``), and a reference's repository (``repository``), over status lines and messages
recorded from Docker 20.10 pulling from distribution 2.8 (``services/node/docker_pull.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.images import PullCause
from services.node.docker_pull import PullStream, classify, repository
from services.node.pulls import LayerProgress, PullProgress

A, B, BASE = "61e43cba4a15", "bce476621be6", "fecda964a940"
DIGEST = "sha256:aae0ea81647c69b68a89b305e62f33f1b41d672689af6518bca81690e06995bc"


def line(status: str, layer: str = "", **detail: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"status": status, "progressDetail": detail}
    if layer:
        entry["id"] = layer
    return entry


# A pull of an image of three layers: its base already here, two of 3 MB to download.
RECORDED = [
    {"status": "Pulling from t/img", "id": "v1"},
    line("Already exists", BASE),
    line("Pulling fs layer", A),
    line("Pulling fs layer", B),
    line("Downloading", A, current=36445, total=3146896),
    line("Downloading", B, current=36445, total=3146899),
    line("Verifying Checksum", A),
    line("Download complete", A),
    line("Extracting", A, current=32768, total=3146896),
    line("Verifying Checksum", B),
    line("Download complete", B),
    line("Extracting", A, current=3146896, total=3146896),
    line("Pull complete", A),
    line("Extracting", B, current=32768, total=3146899),
    line("Pull complete", B),
    {"status": f"Digest: {DIGEST}"},
    {"status": "Status: Downloaded newer image for 127.0.0.1:5000/t/img:v1"},
]


def test_a_recorded_pull_grows_to_its_total_and_names_its_digest() -> None:
    stream = PullStream()
    seen = [stream.progress for status in RECORDED if stream.feed(status)]
    done = [p.done_bytes for p in seen]
    assert done == sorted(done)  # never goes back
    assert seen[0] == PullProgress(0, 0, (LayerProgress(BASE, 0, 0),))  # the tag is no layer
    assert stream.progress == PullProgress(
        3146896 + 3146899,
        3146896 + 3146899,
        (LayerProgress(BASE, 0, 0), LayerProgress(A, 3146896, 3146896),
         LayerProgress(B, 3146899, 3146899)),
    )  # fmt: skip
    assert stream.digest == DIGEST
    assert stream.error is None


def test_the_total_grows_as_layers_start_downloading() -> None:
    stream = PullStream()
    for status in RECORDED[:5]:
        stream.feed(status)
    assert (stream.progress.done_bytes, stream.progress.total_bytes) == (36445, 3146896)


def test_a_layer_seen_only_extracting_takes_its_size_from_there() -> None:
    stream = PullStream()
    stream.feed(line("Pulling fs layer", A))
    stream.feed(line("Download complete", A))
    assert stream.progress.total_bytes == 0  # its size was never said
    stream.feed(line("Extracting", A, current=10, total=500))
    assert stream.progress == PullProgress(500, 500, (LayerProgress(A, 500, 500),))


def test_lines_that_change_nothing_say_so() -> None:
    stream = PullStream()
    assert stream.feed(line("Pulling fs layer", A))
    assert not stream.feed(line("Waiting", A))
    assert not stream.feed({"status": f"Digest: {DIGEST}"})
    assert stream.digest == DIGEST


def test_an_error_line_is_kept_with_its_cause() -> None:
    stream = PullStream()
    stream.feed(line("Downloading", A, current=1, total=10))
    stream.feed(
        {
            "errorDetail": {"message": "write /var/lib/docker/tmp/x: no space left on device"},
            "error": "write /var/lib/docker/tmp/x: no space left on device",
        }
    )
    assert stream.error is not None
    assert stream.error.cause == "disk-full"
    assert "no space left" in str(stream.error)


# (cause, message): real messages, hosts shortened.
MESSAGES: list[tuple[PullCause, str]] = [
    ("authentication", "unauthorized: authentication required"),
    ("authentication", 'Head "http://r:5000/v2/t/manifests/v1": no basic auth credentials'),
    ("authentication", "Get https://r/v2/: unauthorized: incorrect username or password"),
    ("authentication", "denied: requested access to the resource is denied"),
    ("not-found", "manifest for r:5000/t:nope not found: manifest unknown: manifest unknown"),
    ("not-found", "pull access denied for t, repository does not exist or may require 'login'"),
    ("unreachable", 'Get "http://r:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused'),
    ("unreachable", 'Get "https://r.invalid/v2/": dial tcp: lookup r.invalid: no such host'),
    ("unreachable", "Get https://r/v2/: net/http: TLS handshake timeout"),
    ("unreachable", "read tcp 10.0.0.2:4312->10.0.0.9:443: i/o timeout"),
    ("disk-full", "failed to register layer: write /usr/lib/x: no space left on device"),
    ("other", "unexpected EOF"),
]


@pytest.mark.parametrize(("cause", "message"), MESSAGES)
def test_classify(cause: PullCause, message: str) -> None:
    assert classify(message) == cause


@pytest.mark.parametrize(
    ("ref", "repo"),
    [
        ("busybox", "busybox"),
        ("busybox:1.36", "busybox"),
        ("docker.io/library/busybox:1.36", "busybox"),
        ("127.0.0.1:5000/t/img:v1", "127.0.0.1:5000/t/img"),
        ("127.0.0.1:5000/t/img", "127.0.0.1:5000/t/img"),
        ("127.0.0.1:5000/t/img@sha256:abc", "127.0.0.1:5000/t/img"),
        ("ghcr.io/org/img:v1@sha256:abc", "ghcr.io/org/img"),
    ],
)
def test_repository(ref: str, repo: str) -> None:
    assert repository(ref) == repo
