"""The test hosts themselves (tests/netns_support.py): hosts reach each other over the lab, a
link taken down cuts one off and back up restores it, a direct link keeps two cut-off hosts
together, and a host's own Docker engine runs a container inside its namespace."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.netns_support import lab

PROBE = "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2)"


def listen(host_ip: str) -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind((host_ip, 0))
    server.listen()
    return server, int(server.getsockname()[1])


def test_hosts_links_and_partitions(tmp_path: Path) -> None:
    import sys

    with lab(tmp_path) as net:
        a, b, c = net.host("a"), net.host("b"), net.host("c")
        server, port = listen(net.address)  # the root namespace is on the lab too
        try:
            probe = [sys.executable, "-c", PROBE, net.address, str(port)]
            assert a.run(probe, check=False).returncode == 0
            a.link_down()
            assert a.run(probe, check=False).returncode != 0
            a.link_up()
            assert a.run(probe, check=False).returncode == 0
        finally:
            server.close()
        # b and c cut from the lab but joined directly: they still reach each other.
        net.connect(b, c)
        b.link_down()
        c.link_down()
        listener = c.popen(
            [sys.executable, "-c",
             f"import socket; s=socket.socket(); s.bind(('{c.address}', 7001)); s.listen();"
             " s.accept()"],
        )  # fmt: skip
        probe_c = [sys.executable, "-c", PROBE, c.address, "7001"]
        for _ in range(50):
            if b.run(probe_c, check=False).returncode == 0:
                break
        else:
            raise AssertionError("b does not reach c over their direct link")
        listener.wait(5)
        assert a.run(probe_c, check=False).returncode != 0  # a is not on that link


def test_a_host_runs_its_own_docker_engine(tmp_path: Path) -> None:
    with lab(tmp_path) as net:
        host = net.host("gpu1")
        engine = host.dockerd()
        engine.load_image("jetyard-busybox:latest")
        out = engine.docker(
            "run", "--rm", "jetyard-busybox:latest", "sh", "-c", "echo hello from $(hostname)"
        ).stdout
        assert "hello from" in out
        # Its engine is not the machine's: the machine's engine has no such socket's state.
        assert engine.socket.exists()
        root = engine.root
    assert not root.exists()
