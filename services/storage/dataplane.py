"""The storage service's data plane: an HTTP endpoint that checks only the token the API
issued and streams bytes between clients and folders. No NATS, no log: the control plane
(folders, permissions, quotas as events) decides, this moves bytes.

Routes, under ``/folders/<volume>/<folder id>``::

    GET    list?path=&after=&limit=     a page of a directory (JSON)
    GET    download?path=               a file; Range, If-Range, HEAD
    GET    archive?path=                a directory as a tar stream
    POST   mkdir {"path", "parents"}    move {"from", "to"}    delete {"path", "recursive"}
    OPTIONS|POST uploads                HEAD|PATCH|DELETE uploads/<id>   (tus 1.0)
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections.abc import AsyncIterator

import uvicorn
from anyio import to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from events.metrics import Metrics
from services.http_metrics import CountedHttp, HttpMetrics
from services.storage import downloads, files, uploads
from services.storage.access import DataPlane, PlaneHooks
from services.storage.errors import ERROR_HANDLERS
from services.storage.settings import StorageSettings
from services.storage.upload_state import UploadArea
from services.storage.volumes import Volume, open_volumes

log = logging.getLogger(__name__)

FOLDER = "/folders/{volume}/{folder}"


async def healthz(request: Request) -> JSONResponse:
    plane: DataPlane = request.app.state.plane
    return JSONResponse({"status": "ok", "volumes": sorted(plane.volumes)})


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route(f"{FOLDER}/list", files.list_entries, methods=["GET"]),
    Route(f"{FOLDER}/download", downloads.download, methods=["GET", "HEAD"]),
    Route(f"{FOLDER}/archive", downloads.archive, methods=["GET", "HEAD"]),
    Route(f"{FOLDER}/mkdir", files.make_dir, methods=["POST"]),
    Route(f"{FOLDER}/move", files.move, methods=["POST"]),
    Route(f"{FOLDER}/delete", files.delete, methods=["POST"]),
    Route(f"{FOLDER}/uploads", uploads.options, methods=["OPTIONS"]),
    Route(f"{FOLDER}/uploads", uploads.create, methods=["POST"]),
    Route(f"{FOLDER}/uploads/{{upload_id}}", uploads.status, methods=["HEAD"]),
    Route(f"{FOLDER}/uploads/{{upload_id}}", uploads.append, methods=["PATCH"]),
    Route(f"{FOLDER}/uploads/{{upload_id}}", uploads.terminate, methods=["DELETE"]),
]


def sweep_uploads(plane: DataPlane) -> int:
    """Remove expired uploads from every volume; how many."""
    removed = 0
    for volume in plane.volumes.values():
        for directory in volume.upload_areas():
            area = UploadArea(directory)
            removed += area.sweep(plane.now(), plane.settings.upload_ttl_s)
    return removed


async def _sweep_forever(plane: DataPlane) -> None:
    while True:
        try:
            removed = await to_thread.run_sync(sweep_uploads, plane)
        except OSError:
            log.exception("storage: sweeping expired uploads failed; trying again later")
        else:
            if removed:
                log.info("storage: removed %d expired uploads", removed)
        await asyncio.sleep(plane.settings.sweep_interval_s)


def create_app(
    settings: StorageSettings,
    volumes: dict[str, Volume] | None = None,
    hooks: PlaneHooks | None = None,
    metrics: Metrics | None = None,
) -> Starlette:
    """The app; ``volumes`` and ``hooks`` are shared with the storage service's control part
    when it runs in the same process (``services.storage.app``), which also hands in its
    ``metrics``: then ``/metrics`` is served and every request counted."""
    plane = DataPlane(
        settings, open_volumes(settings) if volumes is None else volumes,
        hooks=hooks or PlaneHooks(),
    )  # fmt: skip

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeper = asyncio.create_task(_sweep_forever(plane), name="storage-upload-sweeper")
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper

    routes, middleware = list(ROUTES), []
    if metrics is not None:
        routes.append(Route("/metrics", metrics, methods=["GET"]))
        middleware.append(Middleware(CountedHttp, counted=HttpMetrics(metrics)))
    app = Starlette(
        routes=routes, middleware=middleware, exception_handlers=ERROR_HANDLERS, lifespan=lifespan
    )
    app.state.plane = plane
    return app


def server(
    settings: StorageSettings,
    volumes: dict[str, Volume] | None = None,
    hooks: PlaneHooks | None = None,
    metrics: Metrics | None = None,
) -> uvicorn.Server:
    http: type[asyncio.Protocol] | str = "auto"
    if importlib.util.find_spec("httptools") is None:
        # uvicorn falls back to h11, a pure-Python parser: uploads then cost about twice the
        # CPU (bench/storage_throughput.py measured ~0.45 of a plain server's rate, against
        # ~0.85 with httptools).
        log.warning("storage: httptools is not installed; uploads will be slower (h11)")
    else:
        # Imported here: it builds on uvicorn's httptools protocol, which needs httptools.
        from services.storage.large_reads import protocol_class

        # Socket reads of a whole chunk, copied once (docs/benchmarks.md, "Issue 31").
        http = protocol_class(settings.chunk_bytes)
    config = uvicorn.Config(
        create_app(settings, volumes, hooks, metrics),
        host=settings.host,
        port=settings.port,
        http=http,
        lifespan="on",
        access_log=False,
        log_level="info",
        timeout_graceful_shutdown=5,
    )
    return uvicorn.Server(config)


async def serve(settings: StorageSettings) -> None:
    """Serve until cancelled or signalled (for a caller that owns the event loop)."""
    await server(settings).serve()


def run(settings: StorageSettings) -> None:
    """Serve the data plane alone in this process until SIGINT/SIGTERM (no control part:
    ``jetyard serve storage`` runs ``services.storage.app``)."""
    server(settings).run()
