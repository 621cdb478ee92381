"""A cluster session spread over two hosts, each with its own Docker engine and agent (network
namespaces on a lab network: ``tests/integration/cross_host_support.py``), placed by the real
scheduler: its kernels reach each other by name on any port over the session's VXLAN overlay
(main1 sends 100 MB to sub1 with busybox's nc), with the cluster and torch.distributed
variables set; another session's kernels and a host outside reach neither; the overlay
(network, VXLAN device, guard rule) goes with the session on both hosts, also when an agent was
SIGKILLed meanwhile and the session ended while it was down.

Needs root, iproute2, iptables and dockerd (the lab's hosts run their own engines): these
tests fail without them, they never skip.
"""

from __future__ import annotations

import asyncio
import ipaddress
from functools import partial
from pathlib import Path

from schemas.cluster_network import MASTER_PORT
from schemas.vfolder import MountRequest, default_mount_path, folder_relpath
from tests.integration.cross_host_support import (
    SMALL,
    CrossHost,
    Server,
    cross_host,
    ended,
    probe,
    running,
)
from tests.integration.mount_support import folder
from tests.integration.scheduler_support import eventually

MB100 = 100 * 1024 * 1024
PORT = 5000
WHO = 5001
"""Where each of our kernels answers its host name (busybox nc: ``-ll -e hostname``)."""


def who(target: str) -> str:
    """busybox sh: what answers on ``target``'s ``WHO`` port (nothing when none does)."""
    return f"nc -w 3 {target} {WHO} </dev/null"


async def test_a_session_on_two_hosts_talks_by_name_and_nothing_else_reaches_it(
    tmp_path: Path,
) -> None:
    async with cross_host(tmp_path) as lab:
        ours = await lab.session()
        (main_node, main), (sub_node, sub) = lab.node_of(ours, 0), lab.node_of(ours, 1)
        assert main_node is not sub_node  # spread: one 1.5-CPU kernel fits a 2-CPU node

        # The variables of the cluster and of torch.distributed, ranks by host name.
        code, env = await main_node.exec(main, "env")
        assert code == 0, env
        for line in (
            "JETYARD_CLUSTER_HOST=main1", "JETYARD_CLUSTER_HOSTS=main1,sub1",
            "JETYARD_CLUSTER_SIZE=2", "JETYARD_CLUSTER_RANK=0", "MASTER_ADDR=main1",
            f"MASTER_PORT={MASTER_PORT}", "WORLD_SIZE=2", "RANK=0", "LOCAL_RANK=0",
        ):  # fmt: skip
            assert line in env.splitlines(), (line, env)
        _, env = await sub_node.exec(sub, "env")
        assert {"RANK=1", "LOCAL_RANK=0", "JETYARD_CLUSTER_ROLE=sub"} <= set(env.splitlines())

        # main1 sends 100 MB to sub1, by name, over TCP; sub1 counts what it received (nc's
        # input stays open: busybox nc hangs up when its input ends).
        listen = f"sleep 600 | nc -l -p {PORT} | wc -c > /tmp/got"
        assert (await sub_node.exec(sub, listen, detach=True))[0] == 0
        await asyncio.sleep(0.5)
        send = f"dd if=/dev/zero bs=1048576 count=100 2>/dev/null | nc -w 10 sub1 {PORT}"
        code, said = await main_node.exec(main, send)
        assert code == 0, said
        got = await eventually(partial(_read, sub_node, sub), 20, "sub1 got it")
        assert int(got) == MB100
        # Each of our kernels answers its name on another port: both reach the other by name.
        for node, container in ((main_node, main), (sub_node, sub)):
            await node.exec(container, f"nc -ll -p {WHO} -e hostname", detach=True)
        await asyncio.sleep(0.3)
        assert await main_node.exec(main, who("sub1")) == (0, "sub1\n")
        assert await sub_node.exec(sub, who("main1")) == (0, "main1\n")

        # Another session (on the same two hosts: its kernels are small) is on its own overlay:
        # by name it finds its own kernels (which do not answer), by address none of ours.
        theirs = await lab.session(SMALL)
        (their_node, their_main), (other_node, _) = lab.node_of(theirs, 0), lab.node_of(theirs, 1)
        assert their_node is not other_node
        addresses = [await lab.address_of(ours, 0), await lab.address_of(ours, 1)]
        assert await lab.address_of(theirs, 0) not in addresses
        for target in (*addresses, "main1", "sub1"):
            _, said = await their_node.exec(their_main, who(target))
            assert "main1" not in said and "sub1" not in said, (target, said)

        # A host outside, routing the session's subnet to either node, reaches the node but
        # no kernel (without the agent's guard rule it reached main1: docs/node-agent.md).
        subnet = str(ipaddress.IPv4Network(f"{addresses[0]}/24", strict=False))
        for node in (main_node, sub_node):
            lab.outside.run(["ip", "route", "replace", subnet, "via", node.host.address])
            assert await probe(lab.outside, node.host.address, 1) == "refused"  # node: reached
            for address in addresses:
                said = await probe(lab.outside, address, WHO)
                assert said in ("timeout", "refused"), (node.node_id, address, said)

        # The sessions end: nothing of theirs is left on either host.
        for session in (ours, theirs):
            await lab.terminate(session.id)
            await ended(lab.store, session.id)
        await _nothing_left(lab)


async def test_a_restarted_agent_removes_what_a_session_ended_while_it_was_down_left(
    tmp_path: Path,
) -> None:
    async with cross_host(tmp_path) as lab:
        session = await lab.session()
        (node, container), (other, _) = lab.node_of(session, 1), lab.node_of(session, 0)
        made = await node.leftovers()
        assert made["networks"] and made["vxlans"] and made["rules"], made

        node.kill_agent()
        # While it is down its kernel's container goes (as if the agent died after removing
        # it, before its network and VXLAN device), and the session is ended: the other
        # node's side goes at once, this one's stays.
        await asyncio.to_thread(node.docker, "rm", "-f", container)
        await lab.terminate(session.id)
        await eventually(partial(_empty, other), 30, "the other node's side removed")
        assert await node.leftovers() == {**made, "containers": []}

        node.start_agent()
        await ended(lab.store, session.id)
        await _nothing_left(lab)
        # A new session after that gets an overlay again, on both nodes.
        again = await lab.session()
        assert await running(lab.store, again.id)
        await lab.terminate(again.id)
        await ended(lab.store, again.id)
        await _nothing_left(lab)


async def _read(node: Server, container: str) -> str | None:
    code, out = await node.exec(container, "cat /tmp/got 2>/dev/null")
    return out.strip() if code == 0 and out.strip() else None


async def _empty(node: Server) -> bool:
    return not any((await node.leftovers()).values())


async def _nothing_left(lab: CrossHost) -> None:
    for node in lab.nodes:
        await eventually(partial(_empty, node), 30, f"nothing left on {node.node_id}")


async def test_a_shared_folder_is_the_same_folder_on_both_hosts(tmp_path: Path) -> None:
    """A folder on a volume both hosts have (a shared file system, mounted on every machine)
    mounted by a session's kernels on two hosts: what main1 writes, sub1 reads. (Placement on
    only the nodes that have a folder's volume: tests/integration/test_mount_placement.py.)"""
    shared = tmp_path / "shared"
    async with cross_host(tmp_path / "lab", volumes={"shared": shared}) as lab:
        data = await folder(lab.store, lab.owner, "data", volume="shared")
        (shared / folder_relpath(data.id)).mkdir(parents=True)
        ours = await lab.session(mounts=(MountRequest(folder="data"),))
        (main_node, main), (sub_node, sub) = lab.node_of(ours, 0), lab.node_of(ours, 1)
        assert main_node is not sub_node
        mounted = default_mount_path("data")
        code, said = await main_node.exec(main, f"echo written-on-main1 > {mounted}/hello")
        assert code == 0, said
        assert await sub_node.exec(sub, f"cat {mounted}/hello") == (0, "written-on-main1\n")
        code, said = await sub_node.exec(sub, f"echo and-on-sub1 >> {mounted}/hello")
        assert code == 0, said
        assert (shared / folder_relpath(data.id) / "hello").read_text() == (
            "written-on-main1\nand-on-sub1\n"
        )
        await lab.terminate(ours.id)
        await ended(lab.store, ours.id)
