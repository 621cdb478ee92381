"""tus header reading (pure)."""

from __future__ import annotations

import pytest

from services.storage.errors import StorageError
from services.storage.tus import check_version, encode_metadata, metadata, number


def test_metadata_round_trips_and_allows_keys_without_values() -> None:
    pairs = {"path": "data/ファイル.bin", "filetype": "application/octet-stream"}
    assert metadata(encode_metadata(pairs)) == pairs
    assert metadata("flag ,path YQ==") == {"flag": "", "path": "a"}
    assert metadata(None) == {}


@pytest.mark.parametrize("text", ["path !!!", "path YQ==,path Yg==", "pa th YQ==", "path /w=="])
def test_bad_metadata_is_refused(text: str) -> None:
    with pytest.raises(StorageError) as error:
        metadata(text)
    assert (error.value.status, error.value.code) == (400, "bad_header")


def test_numbers_and_the_version() -> None:
    assert number({"upload-length": " 42 "}, "Upload-Length") == 42
    for bad in ("-1", "1e3", "", "9" * 20):
        with pytest.raises(StorageError):
            number({"upload-length": bad}, "Upload-Length")
    check_version({"tus-resumable": "1.0.0"})
    with pytest.raises(StorageError) as error:
        check_version({"tus-resumable": "0.2.2"})
    assert error.value.status == 412
    assert error.value.headers["Tus-Version"] == "1.0.0"
