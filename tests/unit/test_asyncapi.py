"""The AsyncAPI document: generated from the code, checked in, and holding every command,
outcome and event subject with its schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from commands import messages
from commands.asyncapi import build_document, differences, render
from commands.messages import Command, CreateSession
from events.catalogue import CATALOGUE
from jetyard.cli.main import main
from schemas.subjects import AggregateType

DOC = Path(__file__).resolve().parents[2] / "docs" / "asyncapi.json"
REGENERATE = "run `jetyard asyncapi --output docs/asyncapi.json`"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return build_document()


def resolve(document: dict[str, Any], ref: str) -> Any:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/")]
    return node


def test_the_checked_in_document_matches_the_code(document: dict[str, Any]) -> None:
    if DOC.read_text() != render(document):
        found = differences(json.loads(DOC.read_text()), document) or ["the layout differs"]
        pytest.fail(f"docs/asyncapi.json is stale ({'; '.join(found[:10])}): {REGENERATE}")


def test_create_session_is_received_on_its_subject_with_its_schema(
    document: dict[str, Any],
) -> None:
    channel = document["channels"]["cmd.session.create"]
    message = resolve(document, channel["messages"]["CreateSession"]["$ref"])
    schema = resolve(document, message["payload"]["$ref"])

    assert channel["address"] == "cmd.session.create"
    assert channel["x-stream"] == "JY_COMMANDS"
    assert message["headers"]["properties"]["Jy-Command"]["const"] == "CreateSession"
    assert schema["additionalProperties"] is False  # commands forbid unknown fields
    assert {"spec", "actor", "tenant"} <= set(schema["required"])
    assert set(CreateSession.model_fields) == set(schema["properties"])
    operation = document["operations"]["receive.cmd.session.create"]
    assert operation["action"] == "receive"
    assert operation["reply"]["channel"] == {"$ref": "#/channels/out"}


def test_every_registered_command_is_on_its_subject(document: dict[str, Any]) -> None:
    for cls in messages.REGISTRY.values():
        channel = document["channels"][cls.subject()]
        (ref,) = channel["messages"].values()
        assert resolve(document, ref["$ref"])["payload"]["$ref"].endswith("/" + cls.__name__)


def test_every_catalogue_event_is_on_its_aggregates_channel(document: dict[str, Any]) -> None:
    for cls in CATALOGUE.classes():
        name = cls.event_name
        channel = document["channels"][f"ev.{cls.aggregate_type.value}"]
        message = document["components"]["messages"][name]
        envelope, specific = message["payload"]["allOf"]

        assert channel["address"] == f"ev.{cls.aggregate_type.value}.{{aggregate_id}}"
        assert channel["messages"][name] == {"$ref": f"#/components/messages/{name}"}
        assert message["headers"]["properties"]["Jy-Event"]["const"] == name
        assert message["x-schema-version"] == cls.schema_version
        assert envelope == {"$ref": "#/components/schemas/Envelope"}
        assert specific["properties"]["schema_version"] == {"const": cls.schema_version}
        payload = resolve(document, specific["properties"]["payload"]["$ref"])
        assert set(cls.model_fields) == set(payload.get("properties", {}))


def test_outcomes_and_parked_commands_are_addressed_by_command_id(
    document: dict[str, Any],
) -> None:
    out, parked = document["channels"]["out"], document["channels"]["parked"]

    assert out["address"] == "out.{command_id}"
    assert out["x-stream"] == "JY_OUTCOMES"
    assert "command_id" in out["parameters"]
    assert parked["address"] == "parked.{command_id}"
    assert (
        "Jy-Park-Reason"
        in document["components"]["messages"]["ParkedCommand"]["headers"]["properties"]
    )
    assert document["x-streams"]["JY_OUTCOMES"]["max_msgs_per_subject"] == 1


def test_a_command_added_to_the_registry_appears(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every command module imported first: one imported while the copy stands in would
    # register its commands in the copy alone, and later tests would miss them.
    build_document()
    monkeypatch.setattr(messages, "REGISTRY", dict(messages.REGISTRY))

    class ProbeVfolder(Command):
        aggregate_type = AggregateType.VFOLDER
        verb = "probe"

        depth: int

    document = build_document()

    assert document["channels"]["cmd.vfolder.probe"]["title"] == "ProbeVfolder"
    assert "depth" in document["components"]["schemas"]["ProbeVfolder"]["properties"]
    assert "receive.cmd.vfolder.probe" in document["operations"]


def test_the_document_is_the_same_every_time(document: dict[str, Any]) -> None:
    assert render(build_document()) == render(document)


def test_check_names_what_differs(
    tmp_path: Path, document: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    stale = dict(document, channels=dict(document["channels"]))
    del stale["channels"]["cmd.session.terminate"]
    path = tmp_path / "asyncapi.json"
    path.write_text(render(stale))

    assert main(["asyncapi", "--check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "channels.cmd.session.terminate: in the code but not in the file" in err
    assert f"jetyard asyncapi --output {path}" in err

    assert main(["asyncapi", "--output", str(path)]) == 0
    assert main(["asyncapi", "--check", str(path)]) == 0


def test_every_reference_resolves(document: dict[str, Any]) -> None:
    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return own + [r for value in node.values() for r in refs(value)]
        if isinstance(node, list):
            return [r for value in node for r in refs(value)]
        return []

    for ref in refs(document):
        resolve(document, ref)  # a KeyError names the broken reference
