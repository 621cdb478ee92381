"""The real model of model serving, in its image on real Docker (``scripts/build-model-image``:
Debian's python3, the wordllama wheel from PyPI with its trained weights inside, and an
OpenAI-compatible server; built here without a registry, cached between runs).

A container of the image answers /health 503 while its model loads and 200 after; its
``/v1/embeddings`` gives 256-dimension unit vectors in OpenAI's shape, the same for the same
text, closer for sentences that mean the same than for unrelated ones; bad requests get 400
in OpenAI's error shape. The model's files copied out of the package (``scripts/model-files``)
and mounted read-only as a model folder give the same vectors; a folder without them never
turns healthy and says why. ``docker stop`` drains it in well under Docker's 10 s grace. The
trivial echo replica runs from the same image. Containers carry a test cluster id of their
own (no agent's) and are removed after. Docker is required: without it this test fails."""

from __future__ import annotations

import base64
import math
import struct
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jetyard.runtime.natsserver import free_port
from tests.e2e.conftest import wait_until

IMAGE = "jetyard-model:latest"
SCRIPTS = Path(__file__).parents[2] / "scripts"
BUILD_TIMEOUT_S = 600  # a first build (debootstrap, some 50 MB of wheels) took 70 s here
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT_S + 120)  # any test may be the one that builds
MODEL = "wordllama-l2-supercat-256"
DIM = 256
CLUSTER = f"test-model-image-{uuid.uuid4().hex[:8]}"
SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar.",
    "The stock market fell sharply on Monday.",
]


@pytest.fixture(scope="module")
def model_image() -> Iterator[str]:
    subprocess.run([str(SCRIPTS / "build-model-image")], check=True, timeout=BUILD_TIMEOUT_S)
    yield IMAGE
    ours = ["docker", "ps", "--all", "--quiet", "--filter", f"label=jetyard.cluster_id={CLUSTER}"]
    left = subprocess.run(ours, capture_output=True, text=True, check=True).stdout.split()
    if left:
        subprocess.run(["docker", "rm", "-f", *left], capture_output=True, check=False)


Run = Callable[..., str]


@pytest.fixture
def run_container(model_image: str) -> Iterator[Run]:
    """``run(*args, env=..., port=8000)``: a container of the image (``args`` before the
    image: mounts; the command after it with ``command=[...]``), published on a free local
    port; its URL. Removed after the test."""
    started: list[str] = []

    def run(*args: str, env: dict[str, str] | None = None, port: int = 8000,
            command: list[str] | None = None) -> str:  # fmt: skip
        host_port = free_port()
        env_args = [arg for k, v in (env or {}).items() for arg in ("--env", f"{k}={v}")]
        argv = ["docker", "run", "--detach", "--label", f"jetyard.cluster_id={CLUSTER}",
                "--publish", f"127.0.0.1:{host_port}:{port}", *env_args, *args, model_image,
                *(command or [])]  # fmt: skip
        container = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        started.append(container.strip())
        return f"http://127.0.0.1:{host_port}"

    yield run
    if started:
        subprocess.run(["docker", "rm", "-f", *started], capture_output=True, check=False)


def health(url: str) -> tuple[int, dict[str, Any]] | None:
    """/health's status and body, or None while nothing answers (Docker's port proxy may
    accept and drop a connection before the server listens)."""
    try:
        answer = httpx.get(f"{url}/health", timeout=2)
    except httpx.TransportError:
        return None
    return answer.status_code, answer.json()


def wait_healthy(url: str, timeout: float = 60) -> None:
    wait_until(lambda: (health(url) or (0,))[0] == 200, f"{url} healthy", timeout)


def embed(url: str, **request: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/embeddings", json={"model": MODEL, **request}, timeout=10)


def vectors_of(url: str, texts: list[str]) -> list[list[float]]:
    answer = embed(url, input=texts)
    assert answer.status_code == 200, answer.text
    return [item["embedding"] for item in answer.json()["data"]]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.hypot(*a) / math.hypot(*b)


def test_health_is_503_while_the_model_loads_then_200(run_container: Run) -> None:
    url = run_container(env={"JETYARD_MODEL_WARMUP_S": "2"})
    wait_until(lambda: health(url) is not None, "the server answering", 30)
    assert health(url) == (503, {"status": "loading", "error": None})
    wait_healthy(url)
    assert health(url) == (200, {"status": "ok", "model": MODEL, "dim": DIM})
    models = httpx.get(f"{url}/v1/models").json()
    assert [card["id"] for card in models["data"]] == [MODEL]


def test_embeddings_are_real_deterministic_and_closer_for_similar_sentences(
    run_container: Run,
) -> None:
    url = run_container()
    wait_healthy(url)
    answer = embed(url, input=SENTENCES[:2])
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["object"], body["model"]) == ("list", MODEL)
    assert [(item["object"], item["index"]) for item in body["data"]] == [
        ("embedding", 0),
        ("embedding", 1),
    ]
    tokens = body["usage"]["prompt_tokens"]
    assert tokens > 10 and body["usage"]["total_tokens"] == tokens
    first, second = (item["embedding"] for item in body["data"])
    assert len(first) == len(second) == DIM
    assert math.isclose(math.hypot(*first), 1, rel_tol=1e-4)
    assert len({round(x, 6) for x in first}) > DIM // 2  # a real vector, not a constant

    again = vectors_of(url, [SENTENCES[1], SENTENCES[0], SENTENCES[2]])
    assert [again[1], again[0]] == [first, second]  # the same text, the same vector
    similar, unrelated = cosine(first, second), cosine(first, again[2])
    assert similar > 0.5 > 0.2 > unrelated, (similar, unrelated)

    single = embed(url, input=SENTENCES[0], encoding_format="base64", dimensions=64).json()
    packed = base64.b64decode(single["data"][0]["embedding"])
    short = struct.unpack("<64f", packed)
    assert math.isclose(math.hypot(*short), 1, rel_tol=1e-4)
    assert cosine(list(short), first[:64]) > 0.9999  # the same vector, cut and renormalised


@pytest.mark.parametrize(
    ("request_body", "param"),
    [
        ({"model": MODEL}, "input"),
        ({"model": MODEL, "input": ""}, "input"),
        ({"model": MODEL, "input": []}, "input"),
        ({"model": MODEL, "input": ["text", 3]}, "input"),
        ({"model": MODEL, "input": "text", "dimensions": 0}, "dimensions"),
        ({"model": MODEL, "input": "text", "dimensions": 257}, "dimensions"),
        ({"model": MODEL, "input": "text", "encoding_format": "int8"}, "encoding_format"),
        ({"model": MODEL, "input": [[1, 2], [32000]]}, "input"),
        ("not json", None),
    ],
)
def test_a_bad_request_gets_400_in_openais_error_shape(
    model_server: str, request_body: Any, param: str | None
) -> None:
    if isinstance(request_body, str):
        answer = httpx.post(f"{model_server}/v1/embeddings", content=request_body)
    else:
        answer = httpx.post(f"{model_server}/v1/embeddings", json=request_body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert error["message"]


def test_another_models_name_and_unknown_routes_get_404(model_server: str) -> None:
    answer = embed(model_server, model="text-embedding-3-small", input="text")
    assert answer.status_code == 404 and answer.json()["error"]["param"] == "model"
    assert httpx.post(f"{model_server}/v1/completions", json={}).status_code == 404


@pytest.fixture(scope="module")
def model_server(model_image: str) -> Iterator[str]:
    """One healthy container for the tests that only send requests."""
    port = free_port()
    argv = ["docker", "run", "--detach", "--label", f"jetyard.cluster_id={CLUSTER}",
            "--publish", f"127.0.0.1:{port}:8000", model_image]  # fmt: skip
    container = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)


def test_a_model_folder_copied_from_the_package_gives_the_same_vectors(
    run_container: Run, model_server: str, tmp_path: Path
) -> None:
    folder = tmp_path / "wordllama"
    subprocess.run([str(SCRIPTS / "model-files"), str(folder)], check=True, timeout=120)
    assert {p.name for p in folder.iterdir()} == {"model.safetensors", "tokenizer.json",
                                                   "SOURCE.txt"}  # fmt: skip
    url = run_container("--volume", f"{folder}:/models/wordllama:ro",
                        env={"JETYARD_MODEL_PATH": "/models/wordllama"})  # fmt: skip
    wait_healthy(url)
    assert vectors_of(url, SENTENCES) == vectors_of(model_server, SENTENCES)


def test_a_folder_without_the_model_never_turns_healthy_and_says_why(
    run_container: Run, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    url = run_container("--volume", f"{empty}:/models/none:ro",
                        env={"JETYARD_MODEL_PATH": "/models/none"})  # fmt: skip
    wait_until(lambda: (health(url) or (0, {}))[1].get("status") == "failed", "failed", 30)
    status, body = health(url) or (0, {})
    assert status == 503 and "model.safetensors" in body["error"], body
    assert embed(url, input="text").status_code == 503


def test_docker_stop_drains_in_well_under_the_grace_period(model_image: str) -> None:
    argv = ["docker", "run", "--detach", "--label", f"jetyard.cluster_id={CLUSTER}", model_image]
    container = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    try:
        time.sleep(1)
        started = time.monotonic()
        subprocess.run(["docker", "stop", container], capture_output=True, check=True)
        assert time.monotonic() - started < 5
        state = ["docker", "inspect", "--format", "{{.State.ExitCode}}", container]
        assert subprocess.run(state, capture_output=True, text=True).stdout.strip() == "0"
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)


def test_the_echo_replica_runs_from_the_same_image(run_container: Run) -> None:
    url = run_container(
        port=8080, env={"PORT": "8080"}, command=["python3", "/opt/jetyard/echo/server.py"]
    )
    wait_healthy(url, 30)
    whoami = httpx.get(f"{url}/whoami").text
    assert len(whoami) == 12  # Docker names a container's host by the start of its id
    assert httpx.post(f"{url}/x", content=b"hi").json()["hostname"] == whoami
