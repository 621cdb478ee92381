"""The trivial HTTP replica of model serving's fast tests (``images/echo/server.py``), run as
a real process on a free port and called over real HTTP: it echoes, tells its host apart,
holds a request as long as asked, streams server-sent events one at a time in chunks, fails
its health check or its requests on demand, drains on SIGTERM and crashes when told."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from jetyard.runtime.natsserver import free_port

SERVER = Path(__file__).parents[2] / "images" / "echo" / "server.py"


@dataclass
class Echo:
    process: subprocess.Popen[bytes]
    url: str


def start_echo(**env: str) -> Echo:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER)],
        env={**os.environ, "PORT": str(port), **env},
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/whoami", timeout=1)
            return Echo(process, url)
        except httpx.TransportError:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.05)
    process.kill()
    raise AssertionError("the echo server never answered")


@pytest.fixture
def echo() -> Iterator[Echo]:
    server = start_echo()
    yield server
    stop(server)


def stop(server: Echo) -> None:
    if server.process.poll() is None:
        server.process.kill()
    server.process.wait()
    if server.process.stderr:
        server.process.stderr.close()


def test_echo_says_what_came_and_which_host_answered(echo: Echo) -> None:
    answer = httpx.put(
        f"{echo.url}/some/path?a=1&b=two", content=b"hello", headers={"X-Test": "yes"}
    )
    assert answer.status_code == 200
    body = answer.json()
    assert (body["method"], body["path"], body["query"], body["body"]) == (
        "PUT",
        "/some/path",
        {"a": "1", "b": "two"},
        "hello",
    )
    assert body["headers"]["X-Test"] == "yes"
    assert body["hostname"] == answer.headers["X-Echo-Hostname"] == socket.gethostname()
    whoami = httpx.get(f"{echo.url}/whoami")
    assert whoami.text == socket.gethostname()
    assert httpx.get(f"{echo.url}/health").json() == {"status": "ok"}
    assert httpx.get(f"{echo.url}/status/418").status_code == 418
    assert httpx.get(f"{echo.url}/status/teapot").status_code == 400
    assert httpx.get(f"{echo.url}/sse?n=many").status_code == 400


def test_a_chunked_request_body_is_read_whole(echo: Echo) -> None:
    answer = httpx.post(f"{echo.url}/echo", content=iter([b"one ", b"two ", b"three"]))
    assert answer.json()["body"] == "one two three"
    assert answer.json()["headers"]["Transfer-Encoding"] == "chunked"


def test_slow_requests_are_held_side_by_side(echo: Echo) -> None:
    took: list[float] = []

    def slow() -> None:
        started = time.monotonic()
        assert httpx.get(f"{echo.url}/slow?ms=600", timeout=5).status_code == 200
        took.append(time.monotonic() - started)

    started = time.monotonic()
    threads = [threading.Thread(target=slow) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(took) == 3 and min(took) >= 0.6
    assert time.monotonic() - started < 1.5  # in parallel, not one after the other


def test_server_sent_events_come_one_at_a_time(echo: Echo) -> None:
    arrivals: list[tuple[float, str]] = []
    with httpx.stream("GET", f"{echo.url}/sse?n=4&ms=150", timeout=5) as answer:
        assert answer.headers["Content-Type"] == "text/event-stream"
        assert answer.headers["Transfer-Encoding"] == "chunked"
        for line in answer.iter_lines():
            if line.startswith(("data:", "event:")):
                arrivals.append((time.monotonic(), line))
    data = [(at, line) for at, line in arrivals if line.startswith('data: {"i"')]
    assert [line.split('"i": ')[1].split(",")[0] for _, line in data] == ["0", "1", "2", "3"]
    assert arrivals[-2][1] == "event: done"
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(data)]
    assert all(gap >= 0.1 for gap in gaps), gaps  # streamed as made, not buffered to the end


def test_health_and_requests_fail_on_demand(echo: Echo) -> None:
    assert httpx.post(f"{echo.url}/fail/health").json() == {"health": True, "requests": False}
    assert httpx.get(f"{echo.url}/health").status_code == 503
    assert httpx.get(f"{echo.url}/anything").status_code == 200  # only the health check
    httpx.delete(f"{echo.url}/fail/health")
    assert httpx.get(f"{echo.url}/health").status_code == 200
    httpx.post(f"{echo.url}/fail/requests")
    assert httpx.get(f"{echo.url}/anything").status_code == 500
    assert httpx.get(f"{echo.url}/fail").json() == {"health": False, "requests": True}
    httpx.delete(f"{echo.url}/fail/requests")
    assert httpx.get(f"{echo.url}/anything").status_code == 200
    assert httpx.post(f"{echo.url}/fail/nothing").status_code == 404


def test_health_fails_from_the_start_or_during_a_warm_up() -> None:
    failing = start_echo(FAIL_HEALTH="1")
    warming = start_echo(HEALTH_DELAY_S="1")
    try:
        assert httpx.get(f"{failing.url}/health").status_code == 503
        assert httpx.get(f"{warming.url}/health").status_code == 503
        time.sleep(1.1)
        assert httpx.get(f"{warming.url}/health").status_code == 200
        assert httpx.get(f"{failing.url}/health").status_code == 503
    finally:
        stop(failing)
        stop(warming)


def test_sigterm_lets_the_request_under_way_finish(echo: Echo) -> None:
    answers: list[int] = []
    slow = threading.Thread(
        target=lambda: answers.append(httpx.get(f"{echo.url}/slow?ms=800", timeout=5).status_code)
    )
    slow.start()
    time.sleep(0.3)
    echo.process.send_signal(signal.SIGTERM)
    slow.join()
    assert answers == [200]
    assert echo.process.wait(10) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{echo.url}/health")


def test_exit_ends_the_process_with_the_code_asked(echo: Echo) -> None:
    assert httpx.post(f"{echo.url}/exit?code=3").json() == {"exiting": 3}
    assert echo.process.wait(5) == 3
