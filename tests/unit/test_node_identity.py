"""Which node an agent is (``services.node.identity``): a hand-set id, else the one kept in its
data directory, made on the first start; never the host name alone, so two agents on one host
are two nodes; a data directory from before node.id keeps the id its containers carry."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from schemas.ids import InvalidTokenError, check_token, node_id_for_host
from services.node.identity import NODE_ID_FILE, keep_node_id, resolve_node_id
from services.node.settings import AgentSettings

HOST = "gpu-01.lab"


def agent(data_dir: Path, node_id: str | None = None) -> AgentSettings:
    return AgentSettings(hostname=HOST, cluster_id="cluster-a", data_dir=data_dir, node_id=node_id)


def test_the_first_start_makes_an_owner_only_id_that_every_later_start_reads(
    tmp_path: Path,
) -> None:
    data = tmp_path / "agent"

    made = resolve_node_id(agent(data))

    assert check_token(made) == made
    assert made != node_id_for_host(HOST, "cluster-a")  # not derived from the host
    kept = data / NODE_ID_FILE
    assert kept.read_text() == f"{made}\n"
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
    assert oct(data.stat().st_mode & 0o777) == "0o700"
    assert [resolve_node_id(agent(data)) for _ in range(3)] == [made] * 3
    assert resolve_node_id(agent(data).model_copy(update={"hostname": "renamed"})) == made


def test_two_agents_on_one_host_with_two_data_directories_are_two_nodes(tmp_path: Path) -> None:
    first = resolve_node_id(agent(tmp_path / "one"))
    second = resolve_node_id(agent(tmp_path / "two"))

    assert first != second


def test_a_data_directory_from_before_node_ids_were_kept_keeps_the_derived_id(
    tmp_path: Path,
) -> None:
    old = tmp_path / "agent"
    old.mkdir()  # the agent ran here before, as the id of its cluster and host name

    assert resolve_node_id(agent(old)) == node_id_for_host(HOST, "cluster-a")
    assert (old / NODE_ID_FILE).read_text() == f"{node_id_for_host(HOST, 'cluster-a')}\n"
    # Kept from now on: a later change of host name no longer changes the node.
    renamed = agent(old).model_copy(update={"hostname": "renamed"})
    assert resolve_node_id(renamed) == node_id_for_host(HOST, "cluster-a")


def test_a_hand_set_id_wins_and_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "agent"

    assert resolve_node_id(agent(data, node_id="gpu-01")) == "gpu-01"
    assert not data.exists()
    made = resolve_node_id(agent(data))
    assert resolve_node_id(agent(data, node_id="gpu-01")) == "gpu-01"
    assert (data / NODE_ID_FILE).read_text() == f"{made}\n"  # left as it was


@pytest.mark.parametrize("bad", ["gpu.01", "", "x" * 65, "a b"])
def test_a_hand_set_id_must_be_a_subject_token(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValidationError, match="node_id"):
        agent(tmp_path, node_id=bad)


@pytest.mark.parametrize("text", ["", "\n", "not/an/id\n"])
def test_a_damaged_node_id_file_stops_the_agent_instead_of_making_a_new_node(
    tmp_path: Path, text: str
) -> None:
    (tmp_path / NODE_ID_FILE).write_text(text)

    with pytest.raises(InvalidTokenError, match="node id in"):
        resolve_node_id(agent(tmp_path))
    assert (tmp_path / NODE_ID_FILE).read_text() == text


def test_concurrent_first_starts_agree_on_one_id(tmp_path: Path) -> None:
    path = tmp_path / "agent" / NODE_ID_FILE
    candidates = [f"candidate-{i}" for i in range(16)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        kept = list(pool.map(lambda c: keep_node_id(path, c), candidates))

    assert len(set(kept)) == 1 and kept[0] in candidates
    assert path.read_text() == f"{kept[0]}\n"
    assert sorted(p.name for p in path.parent.iterdir()) == [NODE_ID_FILE]  # nothing left aside
