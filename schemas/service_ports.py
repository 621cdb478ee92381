"""Service ports: the apps an image serves from its containers (Jupyter, TensorBoard, SSH), read
from an image label in Backend.AI's format or Jetyard's, and what the agent found of them once a
kernel ran. Pure; no subjects.

Backend.AI's label, ``ai.backend.service-ports``, is a comma-separated list of
``name:protocol:port`` (a port may be a bracketed list, ``[8080,8081]``, for one app that needs
several). Jetyard's, ``jetyard.service-ports``, is a JSON list of objects
(``{"name": "jupyter", "protocol": "http", "port": 8888, "public": false}``) and can say what
Backend.AI's cannot: that an app needs no authentication (``public``). When an image has both,
Jetyard's is read and Backend.AI's ignored, so an admin can correct a base image's label with a
label of their own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

BACKENDAI_LABEL = "ai.backend.service-ports"
JETYARD_LABEL = "jetyard.service-ports"
MAX_SERVICE_PORTS = 16
"""Apps per image: a bound on what one event, one route table and one probe carry."""
MAX_PORTS_PER_APP = 8
MAX_LABEL_CHARS = 4096
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}$"
"""1-32 lowercase letters, digits and '-' (not first): it becomes a path or a subdomain."""
_NAME = re.compile(NAME_PATTERN)


class ServicePortError(ValueError):
    """A service port declaration that cannot be used; the message names the bad entry."""


class PortProtocol(StrEnum):
    HTTP = "http"
    TCP = "tcp"
    PTY = "pty"
    """A terminal the container serves itself (Backend.AI's ``ttyd``-style apps)."""
    PREOPEN = "preopen"
    """An HTTP port the image's own code opens later; not probed when the kernel starts."""

    @property
    def probed(self) -> bool:
        """Whether the agent waits for it to open (``preopen`` and ``pty`` open on demand)."""
        return self in (PortProtocol.HTTP, PortProtocol.TCP)


class ServicePort(BaseModel):
    """One app: its name, protocol and container port(s) (``ports[0]`` is the one the proxy
    reaches), and whether anyone may open it without the session owner's authentication."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = Field(pattern=NAME_PATTERN)
    protocol: PortProtocol
    ports: tuple[int, ...] = Field(min_length=1, max_length=MAX_PORTS_PER_APP)
    public: bool = False

    @field_validator("ports")
    @classmethod
    def _valid_ports(cls, ports: tuple[int, ...]) -> tuple[int, ...]:
        for port in ports:
            if not 1 <= port <= 65535:
                raise ValueError(f"port {port} is not in 1-65535")
        if len(set(ports)) != len(ports):
            raise ValueError(f"ports {list(ports)} repeat a port")
        return ports

    @property
    def port(self) -> int:
        return self.ports[0]


class PortState(StrEnum):
    OPEN = "open"
    NEVER_OPENED = "never-opened"
    """Still closed when the agent's bound ran out (the kernel keeps running)."""
    NOT_PROBED = "not-probed"
    """``pty`` and ``preopen`` apps: opened on demand, so there was nothing to wait for."""


class ReportedPort(BaseModel):
    """What the agent found of one app of a running kernel: where the proxy reaches it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    protocol: PortProtocol
    port: int
    """The container port."""
    address: str
    """``host:port`` the proxy connects to from the kernel's node (the container's address on
    its network for Docker)."""
    state: PortState
    public: bool = False


def check_service_ports(ports: Iterable[ServicePort]) -> tuple[ServicePort, ...]:
    """The ports, if together they make a usable set: at most ``MAX_SERVICE_PORTS`` apps, no
    name or container port twice."""
    found = tuple(ports)
    if len(found) > MAX_SERVICE_PORTS:
        raise ServicePortError(
            f"{len(found)} service ports declared; at most {MAX_SERVICE_PORTS} are allowed"
        )
    names: set[str] = set()
    used: dict[int, str] = {}
    for port in found:
        if port.name in names:
            raise ServicePortError(f"service port {port.name!r} is declared twice")
        names.add(port.name)
        for number in port.ports:
            if number in used:
                raise ServicePortError(
                    f"service ports {used[number]!r} and {port.name!r} both use port {number}"
                )
            used[number] = port.name
    return found


def parse_backendai(label: str) -> tuple[ServicePort, ...]:
    """Backend.AI's ``name:protocol:port[,...]`` (a port may be ``[p1,p2]``)."""
    _check_length(BACKENDAI_LABEL, label)
    entries = [e.strip() for e in _split_entries(label)]
    ports = []
    for index, entry in enumerate(entries, 1):
        parts = entry.split(":")
        if len(parts) != 3:
            raise ServicePortError(
                f"{BACKENDAI_LABEL} entry {index} {entry!r}: expected name:protocol:port"
            )
        name, protocol, port = (p.strip() for p in parts)
        if port.startswith("[") and port.endswith("]"):
            numbers = [p.strip() for p in port[1:-1].split(",")]
        else:
            numbers = [port]
        if not all(n.isdigit() for n in numbers):
            raise ServicePortError(
                f"{BACKENDAI_LABEL} entry {index} {entry!r}: port {port!r} is not a number "
                "or a bracketed list of numbers"
            )
        fields = {"name": name, "protocol": protocol, "ports": [int(n) for n in numbers]}
        ports.append(_port(BACKENDAI_LABEL, index, repr(entry), fields))
    return _checked(BACKENDAI_LABEL, ports)


def parse_jetyard(label: str) -> tuple[ServicePort, ...]:
    """Jetyard's JSON list: ``name``, ``protocol``, ``port`` (or ``ports``), ``public``."""
    _check_length(JETYARD_LABEL, label)
    try:
        entries = json.loads(label)
    except json.JSONDecodeError as exc:
        raise ServicePortError(f"{JETYARD_LABEL} is not JSON: {exc}") from None
    if not isinstance(entries, list):
        raise ServicePortError(f"{JETYARD_LABEL} must be a JSON list of objects")
    ports = []
    for index, entry in enumerate(entries, 1):
        shown = json.dumps(entry)
        if not isinstance(entry, dict):
            raise ServicePortError(f"{JETYARD_LABEL} entry {index} {shown}: not an object")
        unknown = sorted(set(entry) - {"name", "protocol", "port", "ports", "public"})
        if unknown:
            raise ServicePortError(
                f"{JETYARD_LABEL} entry {index} {shown}: unknown field(s) {', '.join(unknown)}"
            )
        if ("port" in entry) == ("ports" in entry):
            raise ServicePortError(
                f"{JETYARD_LABEL} entry {index} {shown}: give exactly one of 'port' and 'ports'"
            )
        fields = dict(entry)
        if "port" in fields:
            fields["ports"] = [fields.pop("port")]
        ports.append(_port(JETYARD_LABEL, index, shown, fields))
    return _checked(JETYARD_LABEL, ports)


def service_ports_of(labels: Mapping[str, str]) -> tuple[ServicePort, ...]:
    """The service ports an image's labels declare (none when it has neither label)."""
    if JETYARD_LABEL in labels:
        return parse_jetyard(labels[JETYARD_LABEL])
    if BACKENDAI_LABEL in labels:
        return parse_backendai(labels[BACKENDAI_LABEL])
    return ()


def _split_entries(label: str) -> list[str]:
    """Commas separate entries, except inside a bracketed port list."""
    entries, depth, start = [], 0, 0
    for i, char in enumerate(label):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            entries.append(label[start:i])
            start = i + 1
    entries.append(label[start:])
    return entries if label.strip() else []


def _port(label: str, index: int, shown: str, fields: dict[str, Any]) -> ServicePort:
    try:
        # Strict JSON: "8888" or true is not a port, 1 is not a flag.
        return ServicePort.model_validate_json(json.dumps(fields), strict=True)
    except ValidationError as exc:
        # The first reason only: one bad port also makes pydantic call the list too short.
        raise ServicePortError(
            f"{label} entry {index} {shown}: {_reason(exc.errors()[0])}"
        ) from None


def _reason(error: Any) -> str:
    where = str(error["loc"][0]) if error["loc"] else ""
    if where == "name" and error["type"] == "string_pattern_mismatch":
        return f"name {error['input']!r} must be 1-32 of a-z, 0-9 and '-' (not first)"
    if where == "protocol" and error["type"] == "enum":
        allowed = ", ".join(p.value for p in PortProtocol)
        return f"protocol {error['input']!r} is not one of {allowed}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message} (got {error['input']!r})" if where else message


def _checked(label: str, ports: list[ServicePort]) -> tuple[ServicePort, ...]:
    try:
        return check_service_ports(ports)
    except ServicePortError as exc:
        raise ServicePortError(f"{label}: {exc}") from None


def _check_length(label: str, text: str) -> None:
    if len(text) > MAX_LABEL_CHARS:
        raise ServicePortError(f"{label} is {len(text)} characters; at most {MAX_LABEL_CHARS}")
