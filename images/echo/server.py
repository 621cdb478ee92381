"""A trivial HTTP replica for model serving's fast tests: the standard library alone, so it runs
in any image with python3 (``jetyard-model:latest`` has it at ``/opt/jetyard/echo/server.py``,
its ``$PORT`` 8000 unless set; ``jetyard-jupyter:latest`` runs it from a mounted folder).

On ``$PORT`` (8080), HTTP/1.1 with keep-alive; every answer carries ``X-Echo-Hostname`` (the
container's hostname), so routing tests can tell replicas apart:
- ``GET /health``: 200 ``{"status": "ok"}``, or 503 while failing: from the start with
  ``FAIL_HEALTH=1``, for the first ``HEALTH_DELAY_S`` seconds (a warm-up), after
  ``POST /fail/health`` (until ``DELETE /fail/health``), or once SIGTERM has come (draining);
- ``POST /fail/requests`` (until ``DELETE``): every other route answers 500; ``GET /fail``:
  what fails now;
- ``GET /whoami``: the hostname, as text;
- ``/slow?ms=N``: the echo, N milliseconds later (requests in flight, for least-outstanding);
- ``GET /sse?n=N&ms=100``: N server-sent events, one per ``ms`` (100) milliseconds, chunked,
  then an ``event: done``;
- ``/status/CODE``: an answer with that status;
- ``POST /exit?code=N``: answers, then the process exits with N (a replica that crashes);
- anything else, any method: JSON with the method, path, query, headers, body and hostname.
SIGTERM drains: requests under way finish (an SSE stream to its end), then the process exits."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HOSTNAME = socket.gethostname()
STARTED = time.monotonic()
MAX_BODY = 8 << 20
failing = {"health": os.environ.get("FAIL_HEALTH") == "1", "requests": False}
draining = threading.Event()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "jetyard-echo/1"
    timeout = 5  # an idle keep-alive connection is closed after this long

    def setup(self) -> None:
        super().setup()
        # The head and the body go out in two writes: without this, Nagle holds the body
        # until the client acknowledges the head, which a delayed ACK puts off ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def route(self) -> None:
        try:
            self.answer()
        except ValueError as error:  # a length, a count or a status that is no number
            self.close_connection = True
            self.send_json(400, {"error": str(error)})

    # Every method goes to one place (the base looks ``do_<METHOD>`` up by name).
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = route  # noqa: N815 (the base's names)

    def answer(self) -> None:
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        body = self.read_body()
        path, method = url.path, self.command
        if path == "/health":
            warming = time.monotonic() - STARTED < float(os.environ.get("HEALTH_DELAY_S") or 0)
            down = failing["health"] or warming or draining.is_set()
            self.send_json(503 if down else 200, {"status": "failing" if down else "ok"})
        elif path.startswith("/fail"):
            self.fail(method, path.removeprefix("/fail").strip("/"))
        elif failing["requests"]:
            self.send_json(500, {"error": "failing on purpose (POST /fail/requests)"})
        elif path == "/whoami":
            self.send_bytes(200, HOSTNAME.encode(), "text/plain; charset=utf-8")
        elif path == "/sse":
            self.sse(int(query.get("n", 10)), int(query.get("ms", 100)))
        elif path.startswith("/status/"):
            self.send_json(int(path.rsplit("/", 1)[1]), self.echo(url.path, query, body))
        elif path == "/exit" and method == "POST":
            self.close_connection = True
            self.send_json(200, {"exiting": int(query.get("code", 1))})
            self.wfile.flush()
            os._exit(int(query.get("code", 1)))
        else:
            if path == "/slow":
                time.sleep(int(query.get("ms", 1000)) / 1000)
            self.send_json(200, self.echo(url.path, query, body))

    def fail(self, method: str, what: str) -> None:
        if what in failing and method in ("POST", "DELETE"):
            failing[what] = method == "POST"
        elif what or method != "GET":
            self.send_json(404, {"error": "POST or DELETE /fail/health or /fail/requests"})
            return
        self.send_json(200, failing)

    def echo(self, path: str, query: dict[str, str], body: bytes) -> dict[str, Any]:
        return {
            "method": self.command,
            "path": path,
            "query": query,
            "headers": dict(self.headers.items()),
            "body": body.decode(errors="replace"),
            "hostname": HOSTNAME,
        }

    def sse(self, n: int, ms: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Echo-Hostname", HOSTNAME)
        self.end_headers()
        for i in range(n):
            if i:
                time.sleep(ms / 1000)
            event = json.dumps({"i": i, "hostname": HOSTNAME})
            self.write_chunk(f"id: {i}\ndata: {event}\n\n".encode())
        self.write_chunk(b"event: done\ndata: {}\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.end_of_answer()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def read_body(self) -> bytes:
        """By its length or in chunks (a proxy may send either)."""
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.close_connection = True  # the rest is left unread
            return self.rfile.read(min(length, MAX_BODY))
        parts = []
        while length := int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16):
            parts.append(self.rfile.read(length))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)

    def send_json(self, status: int, document: Any) -> None:
        self.send_bytes(status, json.dumps(document).encode(), "application/json")

    def send_bytes(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("X-Echo-Hostname", HOSTNAME)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.end_of_answer()

    def end_of_answer(self) -> None:
        # While draining the connection closes after each answer (the headers are already out,
        # so no ``Connection: close``; a client reconnects, elsewhere).
        if draining.is_set():
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        if os.environ.get("ECHO_ACCESS_LOG") == "1":
            super().log_message(format, *args)


def main() -> None:
    port = int(os.environ.get("PORT") or 8080)
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = False  # server_close() waits for the requests under way

    def drain(signum: int, _frame: object) -> None:
        print(f"echo-server: signal {signum}: draining", file=sys.stderr, flush=True)
        draining.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, drain)
    signal.signal(signal.SIGINT, drain)
    print(f"echo-server: {HOSTNAME} listening on port {port}", file=sys.stderr, flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    print("echo-server: stopped", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
