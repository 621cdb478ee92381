"""A model folder's ``model-definition.json`` (``schemas.model_definition``): Backend.AI's shape
read into an endpoint revision's fields, and every mistake a sentence naming the file and the
field."""

from __future__ import annotations

import json

import pytest

from schemas.model_definition import ModelDefinitionError, parse_model_definition
from schemas.resources import ResourceSlots
from schemas.serving import HealthCheck, Revision

FULL = {
    "models": [{
        "name": "echo", "model_path": "/models/echo", "metadata": {"author": "x"},
        "service": {
            "start_command": ["python", "-m", "server", "{model_path}"], "port": 8000,
            "health_check": {"path": "/v1/health", "interval": 2, "max_retries": 5,
                             "max_wait_time": 1.5, "expected_status_code": 204,
                             "initial_delay": 60},
        },
    }]
}  # fmt: skip


def test_a_full_definition_gives_a_revisions_fields() -> None:
    found = parse_model_definition(json.dumps(FULL))

    assert found.name == "echo"
    assert found.command == ("python", "-m", "server", "{model_path}")
    assert (found.port, found.model_mount) == (8000, "/models/echo")
    assert found.health == HealthCheck(
        path="/v1/health", interval_s=2, failures=5, timeout_s=1.5, expected_status=204,
        warmup_s=60,
    )  # fmt: skip
    revision = Revision(
        image="srv:1", resources=ResourceSlots.of(cpu="1"), **found.revision_fields()
    )
    assert revision.start_command() == ("python", "-m", "server", "/models/echo")


def test_a_short_definition_takes_the_defaults() -> None:
    text = '{"models": [{"service": {"start_command": "serve --port 9000", "port": 9000}}]}'

    found = parse_model_definition(text)

    assert found.command == ("serve", "--port", "9000")
    assert (found.model_mount, found.health) == ("/models", HealthCheck())


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{models: []}", "model-definition.json is not JSON: Expecting property name"),
        ('{"models": []}', "field 'models': Tuple should have at least 1 item"),
        (
            '{"models": [{"service": {"start_command": ["s"]}}]}',
            "field 'models.0.service.port': Field required",
        ),
        (
            '{"models": [{"service": {"start_command": ["s"], "port": 70000}}]}',
            "field 'models.0.service.port': Input should be less than or equal to 65535",
        ),
        (
            '{"models": [{"model_path": "/etc", "service": {"start_command": ["s"], "port": 1}}]}',
            "field 'models.0.model_path'",
        ),
        (
            '{"models": [{"service": {"start_command": ["s"], "port": 1, '
            '"health_check": {"max_retries": 0}}}]}',
            "field 'models.0.service.health_check.max_retries'",
        ),
    ],
    ids=["not-json", "no-model", "no-port", "port-range", "system-mount", "retries"],
)
def test_mistakes_name_the_file_and_the_field(text: str, error: str) -> None:
    with pytest.raises(ModelDefinitionError) as raised:
        parse_model_definition(text, "model-definition.json")
    assert str(raised.value).startswith("model-definition.json")
    assert error in str(raised.value)


def test_a_yaml_definition_reads_as_its_json_twin_and_a_broken_one_says_where() -> None:
    yaml_text = (
        "models:\n"
        "  - name: echo\n"
        "    service:\n"
        "      start_command: [serve, '{model_path}']\n"
        "      port: 8000\n"
    )
    json_text = json.dumps(
        {"models": [{"name": "echo", "service": {"start_command": ["serve", "{model_path}"],
                                                 "port": 8000}}]}
    )  # fmt: skip
    assert parse_model_definition(yaml_text) == parse_model_definition(
        json_text, "model-definition.json"
    )
    with pytest.raises(ModelDefinitionError, match=r"is not YAML: .* at line 4 column 1"):
        parse_model_definition("models:\n  - service:\n      port: [8000\n")
    # The safe loader: a tag that would build an object is refused, not run.
    with pytest.raises(ModelDefinitionError, match="is not YAML"):
        parse_model_definition("models: !!python/object/apply:os.system ['true']\n")
