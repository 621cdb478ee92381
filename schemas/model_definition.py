"""A model folder's ``model-definition.yaml`` (or ``.yml``, or ``.json``): how to serve the
model it holds (the server's start command, its port, where the model is mounted, its health
check), in the shape of Backend.AI's model definition so that one file serves both. Parsed and
validated here, every mistake naming its field (``models.0.service.port``). Pure; no subjects.

    {"models": [{"name": "echo", "model_path": "/models",
                 "service": {"start_command": ["python", "-m", "server", "{model_path}"],
                             "port": 8000,
                             "health_check": {"path": "/health", "interval": 5,
                                              "max_retries": 3, "max_wait_time": 2,
                                              "expected_status_code": 200,
                                              "initial_delay": 300}}}]}

Only the first model is served (an endpoint serves one). ``start_command`` may be a list or
one string (split on whitespace). Fields this format does not know are ignored, as Backend.AI
files carry more (``metadata``...). YAML is read with PyYAML's safe loader (plain data: no
tags, no objects); a ``.json`` file is read as JSON.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from schemas.serving import DEFAULT_MODEL_MOUNT, HealthCheck
from schemas.vfolder import mount_path_problem

DEFINITION_FILES = ("model-definition.yaml", "model-definition.yml", "model-definition.json")
"""What a model folder's definition may be called, in the order looked for."""
MAX_DEFINITION_BYTES = 64 * 1024


class ModelDefinitionError(ValueError):
    """A definition that cannot be used; the message names the file and the field."""


class _HealthCheck(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    path: str = "/health"
    interval: float | None = None
    max_wait_time: float | None = None
    max_retries: int | None = None
    expected_status_code: int | None = None
    initial_delay: float | None = None


class _Service(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    start_command: tuple[str, ...] = Field(min_length=1, max_length=64)
    port: int = Field(ge=1, le=65535)
    health_check: _HealthCheck | None = None

    @field_validator("start_command", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return value.split() if isinstance(value, str) else value


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = Field(default="", max_length=128)
    model_path: str = DEFAULT_MODEL_MOUNT
    service: _Service

    @field_validator("model_path")
    @classmethod
    def _mount(cls, path: str) -> str:
        problem = mount_path_problem(path)
        if problem is not None:
            raise ValueError(problem)
        return path


class _File(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    models: tuple[_Model, ...] = Field(min_length=1)


class ModelDefinition(BaseModel):
    """What a definition supplies to an endpoint's revision."""

    model_config = ConfigDict(frozen=True)

    name: str
    command: tuple[str, ...]
    port: int
    model_mount: str
    health: HealthCheck

    def revision_fields(self) -> dict[str, Any]:
        """As ``schemas.serving.Revision`` fields (``health`` as a dict of its fields)."""
        return {
            "command": self.command,
            "port": self.port,
            "model_mount": self.model_mount,
            "health": self.health.model_dump(),
        }


def parse_model_definition(text: str, source: str = "model-definition.yaml") -> ModelDefinition:
    """The definition ``text`` holds (JSON when ``source`` ends in ``.json``, else YAML);
    ``ModelDefinitionError`` naming ``source`` and the field when it does not parse, is not
    shaped like a definition, or holds a value out of range."""
    if len(text.encode()) > MAX_DEFINITION_BYTES:
        raise ModelDefinitionError(f"{source} is over {MAX_DEFINITION_BYTES} bytes")
    raw = _json(text, source) if source.endswith(".json") else _yaml(text, source)
    try:
        model = _File.model_validate(raw).models[0]
        health = _health(model.service.health_check)
    except ValidationError as exc:
        raise ModelDefinitionError(f"{source}: {_fields(exc)}") from None
    except ModelDefinitionError as exc:
        raise ModelDefinitionError(f"{source}: {exc}") from None
    return ModelDefinition(
        name=model.name, command=model.service.start_command, port=model.service.port,
        model_mount=model.model_path, health=health,
    )  # fmt: skip


def _json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelDefinitionError(
            f"{source} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


def _yaml(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ModelDefinitionError(f"{source} is not YAML: {exc.problem}{where}") from None
    except yaml.YAMLError as exc:
        raise ModelDefinitionError(f"{source} is not YAML: {exc}") from None


def _health(given: _HealthCheck | None) -> HealthCheck:
    if given is None:
        return HealthCheck()
    names = {
        "path": "path", "interval": "interval_s", "max_wait_time": "timeout_s",
        "max_retries": "failures", "expected_status_code": "expected_status",
        "initial_delay": "warmup_s",
    }  # fmt: skip
    values = {ours: getattr(given, theirs) for theirs, ours in names.items()}
    try:
        return HealthCheck.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        ours_to_theirs = {ours: theirs for theirs, ours in names.items()}
        problems = [
            f"field 'models.0.service.health_check.{ours_to_theirs.get(str(e['loc'][0]), '')}': "
            f"{e['msg']}"
            for e in exc.errors()
        ]
        raise ModelDefinitionError("; ".join(problems)) from None


def _fields(exc: ValidationError) -> str:
    return "; ".join(
        f"field '{'.'.join(str(p) for p in e['loc'])}': {e['msg']}" for e in exc.errors()
    )
