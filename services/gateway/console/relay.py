"""The console's way to the storage data plane for what a page must read back: listings, the
answers of mkdir, move and delete, and the tus upload calls. Reads and writes no subjects.

Why a relay: the data plane is another origin (its own port) and sends no CORS headers, so a
page may open its links (downloads go straight there, ``?token=``) but not read its answers.
Through ``/console/storage/folders/...`` the page stays on its own origin. The relay checks
nothing itself: the data-plane token in ``Authorization`` is the whole authority, as it is on
the data plane. It forwards only the data plane's folder routes, a few headers each way, and
bodies of at most one upload chunk (the page sends 4 MiB PATCHes), so the gateway never holds
more than that per request and never streams a whole file. Downloads and archives are not
relayed (their bytes would pass through the API process for nothing).
"""

from __future__ import annotations

import re

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

RELAY_PATH = "/console/storage"
MAX_BODY_BYTES = 8 << 20
"""One upload chunk (the console sends 4 MiB) with room to spare."""
TIMEOUT_S = 60.0
METHODS = ["GET", "HEAD", "POST", "PATCH", "DELETE", "OPTIONS"]

_ROUTE = re.compile(
    r"^/folders/[A-Za-z0-9._-]{1,64}/[A-Za-z0-9_-]{1,64}/"
    r"(?:list|mkdir|move|delete|uploads(?:/[A-Za-z0-9_-]{1,128})?)$"
)
_SENT = (
    "authorization",
    "content-type",
    "tus-resumable",
    "upload-length",
    "upload-offset",
    "upload-metadata",
)
_ANSWERED = (
    "content-type",
    "cache-control",
    "location",
    "tus-resumable",
    "tus-version",
    "tus-extension",
    "tus-max-size",
    "upload-offset",
    "upload-length",
    "upload-expires",
)


def _problem(status: int, code: str, message: str) -> JSONResponse:
    """In the data plane's own error shape, so the page reads one kind of answer."""
    return JSONResponse({"error": code, "message": message}, status_code=status)


class StorageRelay:
    """The ``/console/storage/{target}`` endpoint (``relay``), forwarding to ``storage_url``."""

    def __init__(self, storage_url: str, transport: httpx.AsyncBaseTransport | None = None):
        self.base = storage_url.rstrip("/")
        self.transport = transport

    async def relay(self, request: Request) -> Response:
        raw = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
        target = raw.split("?", 1)[0][len(RELAY_PATH) :]
        if not _ROUTE.match(target):
            return _problem(404, "not_relayed", "the console relays only folder operations")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return _problem(413, "too_large", f"send at most {MAX_BODY_BYTES} bytes a call")
        query = request.scope.get("query_string", b"").decode("latin-1")
        url = f"{self.base}{target}" + (f"?{query}" if query else "")
        headers = {k: request.headers[k] for k in _SENT if k in request.headers}
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_S, transport=self.transport) as client:
                answer = await client.request(
                    request.method, url, headers=headers, content=bytes(body)
                )
        except httpx.HTTPError as exc:
            return _problem(502, "unavailable", f"the storage service did not answer ({exc!r})")
        kept = {k: answer.headers[k] for k in _ANSWERED if k in answer.headers}
        if "location" in kept and kept["location"].startswith("/folders/"):
            kept["location"] = RELAY_PATH + kept["location"]
        return Response(answer.content, status_code=answer.status_code, headers=kept)
