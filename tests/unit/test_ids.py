"""Node ids and cluster ids: stable per installation and machine, distinct between two
installations on one machine."""

from __future__ import annotations

from pathlib import Path

from jetyard.runtime.bootstrap import cluster_id
from schemas.ids import node_id_for_host


def test_two_installations_on_one_machine_get_two_node_ids() -> None:
    # Their agents must never take each other's containers (found by the node id label).
    here = node_id_for_host("gpu-01.lab", "cluster-a")
    assert here == node_id_for_host("gpu-01.lab", "cluster-a")  # stable across restarts
    assert here != node_id_for_host("gpu-01.lab", "cluster-b")
    # An agent configured before there were cluster ids keeps the node it had.
    assert node_id_for_host("gpu-01.lab", "") == node_id_for_host("gpu-01.lab")
    assert node_id_for_host("gpu-01.lab") != here


def test_an_installation_keeps_its_cluster_id_and_an_old_one_keeps_none(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    made = cluster_id(fresh)
    assert len(made) == 32 and cluster_id(fresh) == made
    assert oct((fresh / "cluster.id").stat().st_mode & 0o777) == "0o600"
    old = tmp_path / "old"
    (old / "nats").mkdir(parents=True)  # a data directory from before cluster ids
    assert cluster_id(old) == ""
    assert cluster_id(old) == ""
