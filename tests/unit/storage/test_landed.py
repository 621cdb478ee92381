"""What finished uploads added counts in the owner's total until a measurement taken after
them is folded (``services/storage/control/landed.py``)."""

from __future__ import annotations

from services.storage.control.landed import MAX_AGE_S, Landed


def test_landed_bytes_count_until_a_later_measurement_settles_them() -> None:
    landed = Landed()
    landed.add("f1", 600, at=10.0)
    landed.add("f2", 100, at=11.0)
    assert landed.total(["f1", "f2"]) == 700
    assert landed.total(["f2"]) == 100

    landed.settle("f1", measured_from=9.0)  # started before the upload landed: holds nothing
    assert landed.total(["f1"]) == 600
    landed.settle("f1", measured_from=10.5)
    assert landed.total(["f1", "f2"]) == 100


def test_a_later_landing_survives_an_earlier_measurement() -> None:
    landed = Landed()
    landed.add("f1", 10, at=1.0)
    landed.add("f1", 20, at=5.0)
    landed.settle("f1", measured_from=3.0)
    assert landed.total(["f1"]) == 20


def test_entries_nobody_settles_are_dropped_after_max_age() -> None:
    landed = Landed()
    landed.add("f1", 10, at=0.0)
    landed.add("f2", 20, at=MAX_AGE_S + 1)
    assert landed.total(["f1", "f2"]) == 20
