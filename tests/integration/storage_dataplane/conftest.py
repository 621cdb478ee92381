"""The storage data plane tests' fixtures: one real uvicorn for the whole package (small writes
and quota checks, so a test can see a PATCH half-way through), a client, a fresh folder per
test and a directory beside the folders that no request may reach."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from schemas.ids import new_id
from tests.integration.storage_support import (
    StorageServer,
    running,
)


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StorageServer]:
    # Small writes and quota checks, so a test can see a PATCH half-way through.
    root = tmp_path_factory.mktemp("storage")
    with running(root, chunk_bytes=64 * 1024, quota_recheck_bytes=64 * 1024) as started:
        yield started


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as opened:
        yield opened


@pytest.fixture
def folder(server: StorageServer) -> Iterator[str]:
    """A fresh folder on the local volume, removed afterwards."""
    folder_id = f"f-{new_id()[:12]}"
    server.local().create_folder(folder_id)
    yield folder_id
    server.local().remove_folder(folder_id)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside every folder, with a secret no request may reach or change."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return tmp_path / "outside"
