"""Unknown fields are found anywhere in the input tree; the stored shapes stay lenient."""

from __future__ import annotations

import random
from typing import Any

from schemas.principal import Actor
from schemas.resources import ResourceSlots
from schemas.session import SessionSpec
from schemas.strict import _walk, unknown_fields


def test_unknown_fields_are_found_at_any_depth() -> None:
    data = {
        "image": "busybox",
        "imagee": "typo",
        "kernels": [{"resources": {"cpu_milli": 1000, "gpus": 1}}, {"resource": {}}],
    }
    assert unknown_fields(SessionSpec, data) == [
        "imagee",
        "kernels[0].resources.gpus",
        "kernels[1].resource",
    ]


def test_a_clean_input_has_none() -> None:
    data = {"image": "busybox", "kernels": [{"resources": {"cpu_milli": 1000}}], "env": {"A": "1"}}
    assert unknown_fields(SessionSpec, data) == []


def test_stored_shapes_ignore_fields_added_by_newer_code() -> None:
    assert ResourceSlots.model_validate({"cpu_milli": 5, "tpu": 1}).cpu_milli == 5
    assert Actor.model_validate({"kind": "user", "id": "u1", "display": "x"}).id == "u1"
    spec = SessionSpec.model_validate(
        {"image": "busybox", "kernels": [{"resources": {}}], "priority": 3}
    )
    assert spec.image == "busybox"


def test_the_walk_naming_nothing_finds_what_the_naming_walk_finds() -> None:
    # ``unknown_fields`` answers clean input with a walk that names nothing: it must find an
    # unknown key exactly where the naming walk does, a typo at any depth included.
    rng = random.Random(3)
    keys = ["image", "kernels", "env", "resources", "cpu_milli", "gpus", "mounts", "x", "resource"]

    def tree(depth: int) -> Any:
        if depth == 0 or rng.random() < 0.3:
            return rng.choice([1, "a", None])
        if rng.random() < 0.3:
            return [tree(depth - 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(keys): tree(depth - 1) for _ in range(rng.randint(0, 3))}

    found = 0
    for _ in range(3000):
        data = tree(5)
        named = _walk(SessionSpec, data, "")
        assert unknown_fields(SessionSpec, data) == named
        assert (_walk(SessionSpec, data, None) == []) == (named == [])
        found += bool(named)
    assert 0 < found < 3000  # both kinds of input were tried
