"""An image's labels read into its facts: Backend.AI's and Jetyard's minimum-resource labels,
Jetyard's winning per slot, service ports by ``schemas.service_ports``, and every unusable
label a named problem rather than an exception."""

from __future__ import annotations

import pytest

from schemas.image_labels import ImageFacts, image_facts
from schemas.resources import ResourceSlots
from schemas.service_ports import BACKENDAI_LABEL, JETYARD_LABEL, PortProtocol, ServicePort

GIB, MIB = 1 << 30, 1 << 20


def test_no_labels_need_nothing_and_serve_nothing() -> None:
    assert image_facts({}) == ImageFacts()
    assert image_facts({"maintainer": "me"}) == ImageFacts()


def test_backendai_minimums_in_their_units() -> None:
    facts = image_facts(
        {
            "ai.backend.resource.min.cpu": "2",
            "ai.backend.resource.min.mem": "512m",
            "ai.backend.resource.min.cuda.device": "1",
        }
    )

    assert facts == ImageFacts(
        min_resources=ResourceSlots(cpu_milli=2000, memory_bytes=512 * MIB, gpu_hundredths=100)
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1g", GIB), ("1.5g", GIB + 512 * MIB), ("256MiB", 256 * MIB), ("1024", 1024), ("0", 0)],
)
def test_memory_sizes(text: str, expected: int) -> None:
    facts = image_facts({"ai.backend.resource.min.mem": text})

    assert facts.min_resources.memory_bytes == expected
    assert facts.problems == ()


def test_cuda_shares_are_fractions_and_the_larger_gpu_label_wins() -> None:
    shares = image_facts({"ai.backend.resource.min.cuda.shares": "0.25"})
    both = image_facts(
        {"ai.backend.resource.min.cuda.shares": "0.5", "ai.backend.resource.min.cuda.device": "1"}
    )

    assert shares.min_resources == ResourceSlots(gpu_hundredths=25)
    assert both.min_resources == ResourceSlots(gpu_hundredths=100)


def test_jetyard_labels_win_over_backendai_slot_by_slot() -> None:
    facts = image_facts(
        {
            "ai.backend.resource.min.cpu": "4",
            "ai.backend.resource.min.mem": "8g",
            "jetyard.resource.min.cpu": "0.5",
            "jetyard.resource.min.gpu": "0.1",
        }
    )

    assert facts.min_resources == ResourceSlots(
        cpu_milli=500, memory_bytes=8 * GIB, gpu_hundredths=10
    )
    assert facts.problems == ()


def test_service_ports_are_read_by_the_service_ports_schema() -> None:
    facts = image_facts(
        {BACKENDAI_LABEL: "jupyter:http:8888,ssh:tcp:22", "jetyard.resource.min.mem": "1g"}
    )

    assert facts.service_ports == (
        ServicePort(name="jupyter", protocol=PortProtocol.HTTP, ports=(8888,)),
        ServicePort(name="ssh", protocol=PortProtocol.TCP, ports=(22,)),
    )
    assert facts.min_resources == ResourceSlots(memory_bytes=GIB)


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        (
            {"ai.backend.resource.min.mem": "lots"},
            ["ai.backend.resource.min.mem", "'lots'", "size"],
        ),
        ({"ai.backend.resource.min.cpu": "-1"}, ["ai.backend.resource.min.cpu", "negative"]),
        ({"ai.backend.resource.min.cpu": "1e3"}, ["ai.backend.resource.min.cpu", "'1e3'"]),
        ({"ai.backend.resource.min.cpu": "0.0001"}, ["min.cpu", "finer than 0.001"]),
        ({"ai.backend.resource.min.cuda.device": "0.5"}, ["cuda.device", "'0.5'", "whole"]),
        ({"jetyard.resource.min.gpu": "0.001"}, ["jetyard.resource.min.gpu", "0.01"]),
        ({"jetyard.resource.min.tpu": "1"}, ["jetyard.resource.min.tpu", "no such resource"]),
        ({"ai.backend.resource.min.rocm.device": "1"}, ["rocm.device", "'1'", "ignored"]),
        ({JETYARD_LABEL: "not json"}, [JETYARD_LABEL, "not JSON"]),
        ({BACKENDAI_LABEL: "jupyter:htp:8080"}, [BACKENDAI_LABEL, "'htp'", "protocol"]),
    ],
)
def test_an_unusable_label_is_a_named_problem(labels: dict[str, str], says: list[str]) -> None:
    facts = image_facts(labels)

    assert len(facts.problems) == 1
    for words in says:
        assert words in facts.problems[0]


def test_a_bad_label_spoils_only_itself() -> None:
    facts = image_facts(
        {
            "ai.backend.resource.min.cpu": "two",
            "ai.backend.resource.min.mem": "2g",
            BACKENDAI_LABEL: "jupyter:http:99999",
        }
    )

    assert facts.min_resources == ResourceSlots(memory_bytes=2 * GIB)
    assert facts.service_ports == ()
    assert len(facts.problems) == 2


def test_a_long_value_is_quoted_short() -> None:
    facts = image_facts({"jetyard.resource.min.tpu": "9" * 5000})

    assert len(facts.problems[0]) < 300
