"""The tus 1.0 core protocol's headers (https://tus.io/protocols/resumable-upload), pure:
reading ``Upload-Length``/``Upload-Offset``/``Upload-Metadata``, the version check, and the
headers every answer carries. Extensions: creation, expiration, termination."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from email.utils import formatdate

from services.storage.errors import StorageError

TUS_VERSION = "1.0.0"
TUS_EXTENSIONS = "creation,expiration,termination"
OFFSET_CONTENT_TYPE = "application/offset+octet-stream"
RESUMABLE = {"Tus-Resumable": TUS_VERSION}

_NUMBER = re.compile(r"^[0-9]{1,19}$")
_METADATA_KEY = re.compile(r"^[!-+\--~]{1,64}$")  # ASCII without spaces and commas


def check_version(headers: Mapping[str, str]) -> None:
    if headers.get("tus-resumable") != TUS_VERSION:
        raise StorageError(
            "tus_version",
            412,
            f"send 'Tus-Resumable: {TUS_VERSION}' (the only version this server speaks)",
            {"Tus-Version": TUS_VERSION},
        )


def number(headers: Mapping[str, str], name: str) -> int:
    text = headers.get(name.lower())
    if text is None or not _NUMBER.match(text.strip()):
        raise StorageError(
            "bad_header", 400, f"{name} must be a non-negative whole number of bytes", RESUMABLE
        )
    return int(text.strip())


def metadata(text: str | None) -> dict[str, str]:
    """``Upload-Metadata``: comma-separated ``key base64(value)`` pairs (value may be absent)."""
    pairs: dict[str, str] = {}
    if not text:
        return pairs
    for item in text.split(","):
        key, _, encoded = item.strip().partition(" ")
        if not _METADATA_KEY.match(key) or key in pairs:
            raise StorageError(
                "bad_header", 400, "Upload-Metadata has a bad or repeated key", RESUMABLE
            )
        try:
            pairs[key] = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise StorageError(
                "bad_header", 400, f"Upload-Metadata {key!r} is not base64 of UTF-8 text", RESUMABLE
            ) from None
    return pairs


def encode_metadata(pairs: Mapping[str, str]) -> str:
    return ",".join(
        f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in pairs.items()
    )


def http_date(unix_s: float) -> str:
    return formatdate(unix_s, usegmt=True)
