"""The ports ``jetyard up`` keeps in its data directory: the README's port when it is free,
else another one, and a sentence saying why every time the port is not the README's."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from jetyard.runtime.data_dir import kept_service_port
from jetyard.runtime.natsserver import free_port


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another program holds."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_the_default_port_when_free_says_nothing(tmp_path: Path) -> None:
    default = free_port()
    assert kept_service_port(tmp_path, "storage", default) == (default, None)
    assert kept_service_port(tmp_path, "storage", default) == (default, None)


def test_a_default_in_use_on_the_first_start_is_said_then_and_on_every_later_start(
    tmp_path: Path, taken: int
) -> None:
    port, note = kept_service_port(tmp_path, "appproxy", taken, what="app proxy")
    assert port != taken and note is not None
    assert f"the app proxy port is {port}, not {taken}: {taken} was in use" in note
    assert str(tmp_path / "appproxy.port") in note
    again, said = kept_service_port(tmp_path, "appproxy", taken, what="app proxy")
    assert again == port and said == note


def test_a_kept_port_taken_later_is_not_stolen(tmp_path: Path, taken: int) -> None:
    (tmp_path / "storage.port").write_text(f"{taken}\n")
    port, note = kept_service_port(tmp_path, "storage", 6021)
    assert port != taken
    assert note == (f"the storage port {taken} (kept in {tmp_path / 'storage.port'}) is taken; "
                    f"using {port} this time")  # fmt: skip


def test_a_port_chosen_by_hand_is_said_as_chosen(tmp_path: Path) -> None:
    port, note = kept_service_port(tmp_path, "storage", 6021, wanted=7000)
    assert port == 7000 and note is not None and "chosen when jetyard up was started" in note
