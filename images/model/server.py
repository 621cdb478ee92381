"""An OpenAI-compatible embeddings server for WordLlama, the real model of Jetyard's model
serving (``scripts/build-model-image`` puts it in ``jetyard-model:latest``).

WordLlama (the ``wordllama`` wheel on PyPI) is a static sentence-embedding model: token
embeddings taken from Llama 2 and trained on sentence pairs, averaged over a text's tokens.
Its weights ship inside the wheel, so nothing is downloaded at run time. The server loads them
from ``$JETYARD_MODEL_PATH`` when set (a model folder holding ``model.safetensors`` and
``tokenizer.json``, as ``scripts/model-files`` writes it), else from the installed package.

Routes, the standard library's HTTP server (HTTP/1.1, keep-alive) on ``$PORT`` (8000):
- ``GET /health``: 200 once the model is loaded; 503 with ``status`` ``loading``, ``failed``
  (and the error: a model folder without its files never becomes healthy, and says why) or
  ``draining`` (after SIGTERM);
- ``GET /v1/models``: the one model, by its name (``$JETYARD_MODEL_NAME``);
- ``POST /v1/embeddings``: OpenAI's request (``input``: a string, strings, token ids or lists
  of them; ``encoding_format`` ``float`` or ``base64``; ``dimensions`` up to 256, the model
  being trained to be cut short) and answer, unit-length vectors; errors in OpenAI's shape
  (400 for a bad request, 404 for another model's name, 503 while loading).
``$JETYARD_MODEL_WARMUP_S`` holds readiness back that many more seconds (warm-up tests).
SIGTERM drains: /health turns 503, requests under way finish, then the process exits."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# wordllama, numpy, safetensors and tokenizers are the image's packages, not the project's:
# imported where used (mypy's ``import-not-found`` ignored there).
MODEL_NAME = os.environ.get("JETYARD_MODEL_NAME", "wordllama-l2-supercat-256")
WEIGHTS, TOKENIZER = "model.safetensors", "tokenizer.json"
PACKAGE_FILES = {
    WEIGHTS: "weights/l2_supercat_256.safetensors",
    TOKENIZER: "tokenizers/l2_supercat_tokenizer_config.json",
}
"""The model folder's files, and where the wordllama package keeps each."""
MAX_BODY = 8 << 20
MAX_INPUTS = 2048
MAX_TOKENS = 8192
"""Per input, as OpenAI's embedding models."""
CREATED = int(time.time())


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.status = param, status


class Model:
    """The loaded model (its state read by /health), loaded once in a background thread."""

    def __init__(self) -> None:
        self.state, self.error, self.dim = "loading", "", 0
        self.inference: Any = None

    def files(self) -> dict[str, Path]:
        folder = os.environ.get("JETYARD_MODEL_PATH")
        if folder:
            return {name: Path(folder) / name for name in PACKAGE_FILES}
        import wordllama  # type: ignore[import-not-found]

        root = Path(wordllama.__file__).parent
        return {name: root / inside for name, inside in PACKAGE_FILES.items()}

    def load(self) -> None:
        started = time.monotonic()
        try:
            from safetensors import safe_open  # type: ignore[import-not-found]
            from tokenizers import Tokenizer  # type: ignore[import-not-found]
            from wordllama.inference import WordLlamaInference  # type: ignore[import-not-found]

            files = self.files()
            log(f"loading {MODEL_NAME}: {files[WEIGHTS]}, {files[TOKENIZER]}")
            for path in files.values():
                if not path.is_file():
                    raise FileNotFoundError(f"the model folder has no {path.name} ({path})")
            with safe_open(str(files[WEIGHTS]), framework="np") as weights:
                embedding = weights.get_tensor("embedding.weight")
            inference = WordLlamaInference(embedding, Tokenizer.from_file(str(files[TOKENIZER])))
            self.dim = int(inference.embedding.shape[1])
            self.inference = inference
        except Exception as error:  # any failure is the model's state
            self.state, self.error = "failed", f"{type(error).__name__}: {error}"
            log(f"the model failed to load: {self.error}")
            return
        took = time.monotonic() - started
        log(f"loaded in {took:.2f}s: {embedding.shape[0]} tokens x {self.dim}")
        time.sleep(float(os.environ.get("JETYARD_MODEL_WARMUP_S") or 0))
        self.state = "ready"

    def embed(self, inputs: list[str] | list[list[int]], dimensions: int) -> tuple[Any, int]:
        """Unit vectors of ``dimensions`` for the inputs, and how many tokens they held."""
        import numpy as np  # type: ignore[import-not-found]

        model = self.inference
        if isinstance(inputs[0], str):
            counts = [int(sum(e.attention_mask)) for e in model.tokenize(inputs)]
            vectors = model.embed(inputs, norm=False)
        else:
            vocab = model.embedding.shape[0]
            if any(not 0 <= token < vocab for ids in inputs for token in ids):
                raise BadRequest(f"token ids must lie in [0, {vocab})", "input")
            counts = [len(ids) for ids in inputs]
            vectors = np.stack([model.embedding[np.asarray(ids)].mean(axis=0) for ids in inputs])
        if max(counts) > MAX_TOKENS:
            raise BadRequest(f"an input has more than {MAX_TOKENS} tokens", "input")
        vectors = np.ascontiguousarray(vectors[:, :dimensions], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.where(norms == 0, 1, norms)
        return vectors, sum(counts)


def parse_request(body: bytes, dim: int) -> tuple[list[Any], str, int]:
    """The inputs, encoding and dimensions of an embeddings request, or ``BadRequest``."""
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise BadRequest(f"the body is not JSON: {error}") from None
    if not isinstance(request, dict):
        raise BadRequest("the body must be a JSON object")
    model = request.get("model")
    if model is not None and model != MODEL_NAME:
        raise BadRequest(f"the model '{model}' does not exist (this serves '{MODEL_NAME}')",
                         "model", 404)  # fmt: skip
    raw = request.get("input")
    if isinstance(raw, str) or (isinstance(raw, list) and raw and _is_ids(raw)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise BadRequest("'input' must be a non-empty string, array of strings or of token ids",
                         "input")  # fmt: skip
    if len(raw) > MAX_INPUTS:
        raise BadRequest(f"'input' may hold at most {MAX_INPUTS} items", "input")
    texts = all(isinstance(item, str) and item for item in raw)
    if not texts and not all(isinstance(item, list) and item and _is_ids(item) for item in raw):
        raise BadRequest("every input must be a non-empty string, or every one a non-empty "
                         "array of token ids", "input")  # fmt: skip
    encoding = request.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise BadRequest("'encoding_format' must be 'float' or 'base64'", "encoding_format")
    dimensions = request.get("dimensions", dim)
    if type(dimensions) is not int or not 1 <= dimensions <= dim:
        raise BadRequest(f"'dimensions' must be an integer from 1 to {dim}", "dimensions")
    return raw, encoding, dimensions


def _is_ids(items: list[Any]) -> bool:
    return all(type(item) is int for item in items)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "jetyard-model/1"
    timeout = 5  # an idle keep-alive connection is closed after this long

    def setup(self) -> None:
        super().setup()
        # The head and the body go out in two writes: without this, Nagle holds the body
        # until the client acknowledges the head, which a delayed ACK puts off ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    model: Model
    draining: threading.Event

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/health":
            model = self.model
            if self.draining.is_set():
                self.send_json(503, {"status": "draining"})
            elif model.state == "ready":
                self.send_json(200, {"status": "ok", "model": MODEL_NAME, "dim": model.dim})
            else:
                self.send_json(503, {"status": model.state, "error": model.error or None})
        elif path == "/v1/models":
            card = {"id": MODEL_NAME, "object": "model", "created": CREATED, "owned_by": "jetyard"}
            self.send_json(200, {"object": "list", "data": [card]})
        else:
            self.send_error_json(404, f"no route GET {path}", code="not_found")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            body = read_body(self)
        except BadRequest as error:
            self.close_connection = True
            self.send_error_json(error.status, str(error))
            return
        if path != "/v1/embeddings":
            self.send_error_json(404, f"no route POST {path}", code="not_found")
            return
        model = self.model
        if model.state != "ready":
            self.send_error_json(503, f"the model is {model.state}", "service_unavailable")
            return
        try:
            inputs, encoding, dimensions = parse_request(body, model.dim)
            vectors, tokens = model.embed(inputs, dimensions)
        except BadRequest as error:
            self.send_error_json(error.status, str(error), param=error.param)
            return
        except Exception as error:  # a bug, said as OpenAI says its own
            log(f"embedding failed: {type(error).__name__}: {error}")
            self.send_error_json(500, f"the server failed: {error}", "server_error")
            return
        data = [
            {"object": "embedding", "index": i,
             "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode()
             if encoding == "base64" else v.tolist()}
            for i, v in enumerate(vectors)
        ]  # fmt: skip
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self.send_json(200, {"object": "list", "data": data, "model": MODEL_NAME, "usage": usage})

    def do_PUT(self) -> None:
        self.close_connection = True  # its body is left unread
        self.send_error_json(405, f"{self.command} is not allowed here")

    do_DELETE = do_PATCH = do_PUT  # noqa: N815 (the base's names)

    def send_error_json(self, status: int, message: str, kind: str = "invalid_request_error",
                        param: str | None = None, code: str | None = None) -> None:  # fmt: skip
        error = {"message": message, "type": kind, "param": param, "code": code}
        self.send_json(status, {"error": error})

    def send_json(self, status: int, document: Any) -> None:
        payload = json.dumps(document, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if self.draining.is_set():
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        if os.environ.get("JETYARD_ACCESS_LOG") == "1":
            super().log_message(format, *args)


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body, by its length or in chunks (a proxy may send either)."""
    try:
        return _read_body(handler)
    except ValueError:  # a length that is no number
        raise BadRequest("the body's length cannot be read") from None


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        parts: list[bytes] = []
        size = 0
        while True:
            length = int(handler.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if length == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            size += length
            if size > MAX_BODY:
                raise BadRequest(f"the body is over {MAX_BODY} bytes", status=413)
            parts.append(handler.rfile.read(length))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    if length > MAX_BODY:
        raise BadRequest(f"the body is over {MAX_BODY} bytes", status=413)
    return handler.rfile.read(length)


def log(message: str) -> None:
    print(f"model-server: {message}", file=sys.stderr, flush=True)


def main() -> None:
    port = int(os.environ.get("PORT") or 8000)
    model, draining = Model(), threading.Event()
    Handler.model, Handler.draining = model, draining
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = False  # server_close() waits for the requests under way

    def drain(signum: int, _frame: object) -> None:
        log(f"signal {signum}: draining")
        draining.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, drain)
    signal.signal(signal.SIGINT, drain)
    threading.Thread(target=model.load, name="load", daemon=True).start()
    log(f"listening on port {port}")
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    log("stopped")


if __name__ == "__main__":
    main()
