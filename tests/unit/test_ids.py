"""Node ids and cluster ids: stable per installation and machine, distinct between two
installations on one machine; derived ids as ``uuid.uuid5`` gives them."""

from __future__ import annotations

import random
import string
import uuid
from pathlib import Path

from jetyard.runtime.bootstrap import cluster_id
from schemas.ids import JETYARD_NAMESPACE, derived_id, node_id_for_host, session_id_for


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


def test_derived_ids_are_the_uuid5_of_their_parts() -> None:
    # Ids already on the log were made by ``uuid.uuid5``: a faster derivation must give the
    # same text for every input, or retried decisions would write new ids.
    rng = random.Random(5)
    alphabet = string.printable + "éλ中\u2028"
    for _ in range(3000):
        parts = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50)))
            for _ in range(rng.randint(0, 4))
        ]
        expected = str(uuid.uuid5(JETYARD_NAMESPACE, "/".join(("kind", *parts))))
        assert derived_id("kind", *parts) == expected
    assert session_id_for("cmd-1") == str(uuid.uuid5(JETYARD_NAMESPACE, "session/cmd-1"))
