"""Images' service ports, given / when / then on an in-memory store: given directly or read from
the image's labels, recorded with the image, kept or replaced by a change, refused with the
parser's sentence; events from before service ports read as none."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from commands import admin as a
from commands.tenancy import Image, InvalidSettingsError
from events.domain.tenancy import ImageModified, ImageRegistered
from events.envelope import Envelope
from schemas.resources import ResourceSlots
from schemas.service_ports import BACKENDAI_LABEL, JETYARD_LABEL, PortProtocol, ServicePort
from schemas.tenancy import SlotLimits
from tests.unit.scenario import CAUSE, at
from tests.unit.tenancy.support import Org, by

IMAGE = "reg.example/lab:1"
JUPYTER = ServicePort(name="jupyter", protocol=PortProtocol.HTTP, ports=(8080,))
SSH = ServicePort(name="ssh", protocol=PortProtocol.TCP, ports=(2200,))
DOCS = ServicePort(name="docs", protocol=PortProtocol.HTTP, ports=(8000,), public=True)
LABELS = {BACKENDAI_LABEL: "jupyter:http:8080,ssh:tcp:2200", "maintainer": "someone"}


async def test_registering_with_labels_records_the_ports_they_declare(org: Org) -> None:
    w = org.world
    then = await w.when(a.RegisterImage(name=IMAGE, labels=LABELS, **by()))

    assert then.accepted(ImageRegistered(name=IMAGE, service_ports=(JUPYTER, SSH)))
    found = w.directory.image(IMAGE)
    assert found is not None and found.service_ports == (JUPYTER, SSH)


async def test_ports_given_directly_win_over_labels(org: Org) -> None:
    w = org.world
    cmd = a.RegisterImage(name=IMAGE, labels=LABELS, service_ports=[DOCS], **by())

    assert (await w.when(cmd)).accepted(ImageRegistered(name=IMAGE, service_ports=(DOCS,)))


async def test_a_change_keeps_or_replaces_the_ports(org: Org) -> None:
    w = org.world
    await w.given(a.RegisterImage(name=IMAGE, labels=LABELS, **by()))
    bigger = {"min_resources": ResourceSlots(cpu_milli=500), "max_resources": SlotLimits()}

    kept = await w.when(a.ModifyImage(name=IMAGE, **bigger, **by()))
    assert kept.accepted(ImageModified(**bigger, service_ports=(JUPYTER, SSH)))
    label = '[{"name": "docs", "protocol": "http", "port": 8000, "public": true}]'
    relabelled = a.ModifyImage(name=IMAGE, **bigger, labels={JETYARD_LABEL: label}, **by())
    assert (await w.when(relabelled)).accepted(ImageModified(**bigger, service_ports=(DOCS,)))
    assert (await w.when(relabelled)).accepted() == f"image {IMAGE} already had these settings"
    none = await w.when(a.ModifyImage(name=IMAGE, **bigger, service_ports=[], **by()))
    assert none.accepted(ImageModified(**bigger))
    found = w.directory.image(IMAGE)
    assert found is not None and found.service_ports == ()


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"labels": {BACKENDAI_LABEL: "jupyter:http:8080,tb:htp:6006"}},
         f"{BACKENDAI_LABEL} entry 2 'tb:htp:6006': protocol 'htp' is not one of"),
        ({"labels": {JETYARD_LABEL: '[{"name": "a", "protocol": "http"}]'}},
         f"{JETYARD_LABEL} entry 1"),
        ({"service_ports": [JUPYTER, JUPYTER]}, "service port 'jupyter' is declared twice"),
        ({"service_ports": [{"name": "a", "protocol": "http", "ports": [1], "auth": True}]},
         "unknown field 'service_ports[0].auth'"),
    ],
)  # fmt: skip
def test_a_bad_label_or_list_refuses_the_command_with_the_parsers_sentence(
    fields: dict[str, object], said: str
) -> None:
    for cls, more in (
        (a.RegisterImage, {}),
        (a.ModifyImage, {"min_resources": ResourceSlots(), "max_resources": SlotLimits()}),
    ):
        with pytest.raises(ValidationError) as refused:
            cls.model_validate({"name": IMAGE, **more, **fields, **by()})
        assert said in str(refused.value)


def test_the_aggregate_refuses_a_set_that_breaks_the_rules() -> None:
    with pytest.raises(InvalidSettingsError, match="both use port 8080"):
        Image.register(
            IMAGE,
            ResourceSlots(),
            SlotLimits(),
            at(0),
            [JUPYTER, JUPYTER.model_copy(update={"name": "lab"})],
        )


def test_events_from_before_service_ports_read_as_none() -> None:
    image = Image.register(IMAGE, ResourceSlots(), SlotLimits(), at(0), [JUPYTER])
    image.modify(ResourceSlots(cpu_milli=1), SlotLimits(), at(1))
    # Made afresh (not copied): an envelope an aggregate wrote carries the event it came from.
    old = [
        Envelope.model_validate({**e.model_dump(), "payload": _without_ports(e.payload)})
        for e in image.collect(CAUSE)
    ]

    loaded = Image.rehydrate(old)

    assert loaded is not None and loaded.service_ports == ()
    assert loaded.min_resources == ResourceSlots(cpu_milli=1)
    assert (
        Image.State.model_validate(
            {"name": IMAGE, "min_resources": {}, "max_resources": {}, "forgotten": False}
        ).service_ports
        == ()
    )


def _without_ports(payload: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in payload.items() if k != "service_ports"}
