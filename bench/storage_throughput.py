"""Storage data plane throughput: a file uploaded (tus PATCH) and downloaded through the data
plane, next to, in the same run and on the same disk:
  - ``cp`` of the file,
  - ``curl`` of it from a plain static file server (``python -m http.server``) for downloads,
  - ``curl -T`` of it to a plain stdlib PUT server that writes the body to a file, for uploads
    (the same client, curl, for every HTTP transfer),
  - and to a bare uvicorn app doing the same: the data plane's server stack without Jetyard,
    which tells the stack's own ceiling from the data plane's cost.
Uploads land in files in the same directory and are durable (fsync) before they are
answered, by both servers; downloads are read into /dev/null (the server is measured), then
fetched once more into files; every copy is checked by SHA-256 afterwards. Dirty pages are
written back (sync) before each run. A warm-up round of every run goes first, untimed.
Prints MB/s for each, the data plane's ratio to the plain servers, and the high-water mark of
the data plane's memory (VmHWM) against its size when idle.

Run:  python -m bench.storage_throughput [--size 1G] [--quick] [--dir /some/disk] [--repeat 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from jetyard.runtime.natsserver import free_port
from services.storage.tokens import Claims, Operation, issue
from services.storage.volumes import LocalVolume

KEY = "bench-storage-key-" + "k" * 32
MiB = 1024 * 1024
_PUT_SERVER = """
import http.server, os, sys
class Put(http.server.BaseHTTPRequestHandler):
    def do_PUT(self):
        left = int(self.headers["Content-Length"])
        with open(sys.argv[2], "wb") as out:
            while left:
                chunk = self.rfile.read(min(1 << 20, left))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
            out.flush()
            os.fsync(out.fileno())  # durable before answering, as the data plane's uploads
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Put).serve_forever()
"""
# The same server stack as the data plane (uvicorn, its HTTP parser, uvloop) with nothing of
# Jetyard: each body written to a file and fsynced. The ceiling the stack itself sets.
_UVICORN_SINK = """
import os, sys, uvicorn
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            kind = message["type"].rsplit(".", 1)[1]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    fd = None
    if scope["method"] == "PUT":
        fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    more = True
    while more:
        message = await receive()
        if fd is not None and message.get("body"):
            os.write(fd, message["body"])
        more = message.get("more_body", False)
    if fd is not None:
        os.fsync(fd)
        os.close(fd)
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
_DATA_PLANE = (
    "from services.storage.dataplane import run; "
    "from services.storage.settings import StorageSettings; run(StorageSettings())"
)


def size_of(text: str) -> int:
    units = {"K": 1024, "M": MiB, "G": 1024 * MiB}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def make_file(path: Path, size: int) -> str:
    digest, block = hashlib.sha256(), os.urandom(8 * MiB)
    with open(path, "wb") as out:
        written = 0
        while written < size:
            piece = (written.to_bytes(8, "big") + block[8:])[: size - written]
            out.write(piece)
            digest.update(piece)
            written += len(piece)
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(8 * MiB):
            digest.update(chunk)
    return digest.hexdigest()


Run = tuple[Callable[[], None], Callable[[], None]]  # (the transfer, what precedes it)


def timed_rounds(runs: dict[str, Run], repeat: int) -> dict[str, list[float]]:
    """The wall times of each run over a warm-up round and ``repeat`` rounds (the best of those
    counts); a round does every run once, so a burst of load on the machine hits all of them
    alike. The warm-up does not count: on a VM, memory the guest has not touched lately is slow
    to touch again (the host backs it anew), and in a first round every run writes its file
    into such memory, the later runs of the round the most (the data plane, fifth, spent 80 %
    of its time copying into the page cache there); after it, each run reuses the pages its
    own previous file freed."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(1 + repeat):
        for name, (action, prepare) in runs.items():
            prepare()
            started = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - started)
    return times


def curl(*args: str, output: Path | None = None) -> None:
    """``curl`` writing the response body to ``output`` (else dropped)."""
    out = str(output) if output is not None else "/dev/null"
    subprocess.run(["curl", "-sS", "--fail", "-o", out, *args], check=True)


def cp(source: Path, target: Path) -> None:
    subprocess.run(["cp", str(source), str(target)], check=True)


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(field)


def wait_for(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError(f"{url}: no answer")


def token(op: Operation, folder: str, path: str) -> str:
    claims = Claims(op=op, volume="bench", folder=folder, path=path, exp=int(time.time()) + 3600)
    return issue(KEY.encode(), claims)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G", help="file size, e.g. 1G, 256M (default 1G)")
    parser.add_argument("--quick", action="store_true", help="a 64 MiB file, for a quick look")
    parser.add_argument("--dir", default=None, help="where to work (default: the temp dir)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; the best counts")
    args = parser.parse_args()
    if shutil.which("curl") is None:
        sys.exit("curl is needed (the client for every HTTP transfer, so they compare)")
    size = 64 * MiB if args.quick else size_of(args.size)
    work = Path(tempfile.mkdtemp(prefix="jy-storage-bench-", dir=args.dir))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        results = run_all(work, size, args.repeat, processes)
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))


def start(processes: list[subprocess.Popen[bytes]], *command: str, **env: str) -> int:
    process = subprocess.Popen(
        list(command),
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    processes.append(process)
    return process.pid


def run_all(
    work: Path, size: int, repeat: int, processes: list[subprocess.Popen[bytes]]
) -> dict[str, object]:
    source = work / "source.bin"
    expected = make_file(source, size)
    mb = size / 1e6

    def fresh(*paths: Path) -> Callable[[], None]:
        """Before each run: remove its output and write back every dirty page, so no run
        pays for the previous one's writes."""

        def settle() -> None:
            for path in paths:
                path.unlink(missing_ok=True)
            os.sync()

        return settle

    copy = work / "copy.bin"

    static_port, put_port, sink_port, plane_port = (free_port() for _ in range(4))
    static = ("-m", "http.server", str(static_port), "--bind", "127.0.0.1", "--directory")
    start(processes, sys.executable, *static, str(work))
    put = work / "put.bin"
    start(processes, sys.executable, "-c", _PUT_SERVER, str(put_port), str(put))
    sink = work / "sink.bin"
    start(processes, sys.executable, "-c", _UVICORN_SINK, str(sink_port), str(sink))
    volume_root = work / "volume"
    volumes = {"bench": {"backend": "local", "root": str(volume_root)}}
    plane_pid = start(
        processes,
        sys.executable,
        "-c",
        _DATA_PLANE,
        JETYARD_STORAGE_PORT=str(plane_port),
        JETYARD_STORAGE_TOKEN_KEY=KEY,
        JETYARD_STORAGE_VOLUMES=json.dumps(volumes),
    )
    ports = (static_port, put_port, sink_port, plane_port)
    for port, process in zip(ports, processes, strict=True):
        wait_for(f"http://127.0.0.1:{port}/healthz", process)
    folder = "bench-folder"
    root = LocalVolume("bench", volume_root, "bench").create_folder(folder)
    base = f"http://127.0.0.1:{plane_port}/folders/bench/{folder}"
    idle_kib = memory_kib(plane_pid, "VmRSS")

    # Downloads are read by curl into /dev/null: what is measured is the server (reading
    # the file, usually from the page cache, and sending it).
    static_url = f"http://127.0.0.1:{static_port}/source.bin"
    no_expect = ("-H", "Expect:")  # curl would wait a second for 100-continue from http.server
    put_url = f"http://127.0.0.1:{put_port}/put.bin"
    sink_url = f"http://127.0.0.1:{sink_port}/sink.bin"
    upload_token = token(Operation.UPLOAD, folder, "big.bin")

    def plane_upload() -> None:
        created = httpx.post(
            f"{base}/uploads",
            headers={
                "Tus-Resumable": "1.0.0",
                "Authorization": f"Bearer {upload_token}",
                "Upload-Length": str(size),
            },
        )
        created.raise_for_status()
        curl(
            "-X", "PATCH", "-T", str(source), *no_expect,
            "-H", "Tus-Resumable: 1.0.0",
            "-H", f"Authorization: Bearer {upload_token}",
            "-H", "Upload-Offset: 0",
            "-H", "Content-Type: application/offset+octet-stream",
            f"http://127.0.0.1:{plane_port}{created.headers['location']}",
        )  # fmt: skip

    plane_url = f"{base}/download?token={token(Operation.DOWNLOAD, folder, 'big.bin')}"
    times = timed_rounds(
        {
            "cp": (lambda: cp(source, copy), fresh(copy)),
            "static_down": (lambda: curl(static_url), fresh()),
            "put_up": (lambda: curl("-T", str(source), *no_expect, put_url), fresh(put)),
            "sink_up": (lambda: curl("-T", str(source), *no_expect, sink_url), fresh(sink)),
            "plane_up": (plane_upload, fresh(root / "big.bin")),
            "plane_down": (lambda: curl(plane_url), fresh()),
        },
        repeat,
    )
    best = {name: min(each[1:]) for name, each in times.items()}
    cp_s, static_down_s, put_s, sink_s = (
        best[k] for k in ("cp", "static_down", "put_up", "sink_up")
    )
    plane_up_s, plane_down_s = best["plane_up"], best["plane_down"]
    peak_kib = memory_kib(plane_pid, "VmHWM")

    static_out, plane_out = work / "static-download.bin", work / "plane-download.bin"
    curl(static_url, output=static_out)
    curl(plane_url, output=plane_out)
    for path in (copy, put, sink, root / "big.bin", static_out, plane_out):
        assert sha256_of(path) == expected, f"{path.name} differs from the source"
    return {
        "size_mib": size // MiB,
        "repeat": repeat,
        "MB/s": {
            "cp": round(mb / cp_s),
            "download: static server (http.server) + curl": round(mb / static_down_s),
            "download: data plane + curl": round(mb / plane_down_s),
            "upload: plain PUT server + curl -T": round(mb / put_s),
            "upload: bare uvicorn app writing the body + curl -T": round(mb / sink_s),
            "upload: data plane (tus PATCH) + curl -T": round(mb / plane_up_s),
        },
        "data plane / plain server": {
            "download": round(static_down_s / plane_down_s, 2),
            "upload": round(put_s / plane_up_s, 2),
            "upload, to the bare uvicorn app": round(sink_s / plane_up_s, 2),
        },
        "data plane memory MiB": {
            "idle RSS": round(idle_kib / 1024, 1),
            "high-water (VmHWM)": round(peak_kib / 1024, 1),
            "growth": round((peak_kib - idle_kib) / 1024, 1),
        },
        # Every round's rate, to see how noisy the machine was (the figures above: the best of
        # the rounds after the first, the warm-up).
        "MB/s of each round, warm-up first": {
            name: [round(mb / seconds) for seconds in each] for name, each in times.items()
        },
    }


if __name__ == "__main__":
    main()
