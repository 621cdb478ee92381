"""``NatsServer.start`` with a port it chose itself that another process took between the
choice and the bind (what ``free_port`` cannot rule out on a busy machine): it chooses again
instead of failing; a port the caller named is not changed."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from jetyard.runtime import natsserver
from jetyard.runtime.natsserver import NatsServer


@pytest.fixture
def taken() -> Iterator[int]:
    """A port bound by another socket (not listening: nothing answers there)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield int(holder.getsockname()[1])


def test_a_chosen_port_taken_before_the_bind_is_chosen_again(
    tmp_path: Path, taken: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    offered = iter([taken, taken])
    real = natsserver.free_port
    monkeypatch.setattr(natsserver, "free_port", lambda: next(offered, None) or real())
    server = NatsServer(data_dir=tmp_path / "nats").start()
    try:
        assert server.port != taken
        with socket.create_connection(("127.0.0.1", server.port), 2) as conn:
            assert conn.recv(4) == b"INFO"
    finally:
        server.stop()
    assert (tmp_path / "nats" / "nats-server.log").read_text().count("address already in use") == 2


def test_a_port_named_by_the_caller_is_not_changed(tmp_path: Path, taken: int) -> None:
    with pytest.raises(RuntimeError, match="nats-server exited"):
        NatsServer(data_dir=tmp_path / "nats", port=taken).start()
