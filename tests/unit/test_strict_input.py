"""Unknown fields are found anywhere in the input tree; the stored shapes stay lenient."""

from __future__ import annotations

from schemas.principal import Actor
from schemas.resources import ResourceSlots
from schemas.session import SessionSpec
from schemas.strict import unknown_fields


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
