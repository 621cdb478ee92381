"""Service port labels: Backend.AI's and Jetyard's formats read into ``ServicePort``s, and every
refusal naming what is wrong."""

from __future__ import annotations

import json

import pytest

from schemas.service_ports import (
    BACKENDAI_LABEL,
    JETYARD_LABEL,
    MAX_LABEL_CHARS,
    MAX_SERVICE_PORTS,
    PortProtocol,
    ServicePort,
    ServicePortError,
    check_service_ports,
    parse_backendai,
    parse_jetyard,
    service_ports_of,
)

HTTP, TCP, PTY, PREOPEN = PortProtocol


def port(name: str, protocol: PortProtocol, *ports: int, public: bool = False) -> ServicePort:
    return ServicePort(name=name, protocol=protocol, ports=ports, public=public)


def test_backendai_label_reads_every_protocol_and_bracketed_port_lists() -> None:
    label = (
        "jupyter:http:8080, tensorboard:http:6006,ssh:tcp:2200,ttyd:pty:7681,"
        "vscode:preopen:[8180, 8181]"
    )

    assert parse_backendai(label) == (
        port("jupyter", HTTP, 8080),
        port("tensorboard", HTTP, 6006),
        port("ssh", TCP, 2200),
        port("ttyd", PTY, 7681),
        port("vscode", PREOPEN, 8180, 8181),
    )
    assert parse_backendai("") == ()
    assert parse_backendai("vscode:http:[8180,8181]")[0].port == 8180  # the first is served


def test_jetyard_label_reads_port_or_ports_and_public() -> None:
    label = json.dumps(
        [
            {"name": "jupyter", "protocol": "http", "port": 8888},
            {"name": "docs", "protocol": "http", "ports": [8000, 8001], "public": True},
        ]
    )

    assert parse_jetyard(label) == (
        port("jupyter", HTTP, 8888),
        port("docs", HTTP, 8000, 8001, public=True),
    )
    assert parse_jetyard("[]") == ()


def test_the_jetyard_label_wins_over_backendais() -> None:
    mine = json.dumps([{"name": "lab", "protocol": "http", "port": 8888, "public": True}])

    assert service_ports_of({BACKENDAI_LABEL: "jupyter:htp:8080", JETYARD_LABEL: mine}) == (
        port("lab", HTTP, 8888, public=True),
    )
    assert service_ports_of({BACKENDAI_LABEL: "ssh:tcp:22"}) == (port("ssh", TCP, 22),)
    assert service_ports_of({"maintainer": "me"}) == ()


@pytest.mark.parametrize(
    ("label", "said"),
    [
        (
            "jupyter:http:8080,tb:htp:6006",
            "entry 2 'tb:htp:6006': protocol 'htp' is not one of http, tcp, pty, preopen",
        ),
        ("jupyter:http", "entry 1 'jupyter:http': expected name:protocol:port"),
        ("a:b:c:d", "entry 1 'a:b:c:d': expected name:protocol:port"),
        ("jupyter:http:80x", "port '80x' is not a number or a bracketed list"),
        ("jupyter:http:[80,x]", "port '[80,x]' is not a number"),
        ("jupyter:http:0", "port 0 is not in 1-65535"),
        ("jupyter:http:65536", "port 65536 is not in 1-65535"),
        ("jupyter:http:[80,80]", "repeat a port"),
        ("Jupyter:http:8080", "name 'Jupyter' must be 1-32 of a-z, 0-9 and '-'"),
        ("-lab:http:8080", "name '-lab' must be"),
        (f"{'a' * 33}:http:8080", "must be 1-32"),
        ("jupyter:http:8080,jupyter:tcp:8081", "service port 'jupyter' is declared twice"),
        ("jupyter:http:8080,lab:http:[9000,8080]", "'jupyter' and 'lab' both use port 8080"),
        ("jupyter:http:8080,", "entry 2 '': expected name:protocol:port"),
    ],
)
def test_a_bad_backendai_label_is_refused_naming_the_entry(label: str, said: str) -> None:
    with pytest.raises(ServicePortError, match=BACKENDAI_LABEL) as refused:
        parse_backendai(label)

    assert said in str(refused.value)


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        ("not json", "is not JSON"),
        ({"name": "a"}, "must be a JSON list of objects"),
        (["jupyter"], 'entry 1 "jupyter": not an object'),
        ([{"name": "a", "protocol": "http"}], "give exactly one of 'port' and 'ports'"),
        ([{"name": "a", "protocol": "http", "port": 1, "ports": [2]}], "exactly one of"),
        ([{"name": "a", "protocol": "http", "port": 1, "auth": False}], "unknown field(s) auth"),
        ([{"name": "a", "protocol": "http", "port": "8080"}], "valid integer"),
        ([{"name": "a", "protocol": "http", "port": True}], "valid integer"),
        ([{"name": "a", "protocol": "http", "port": 1, "public": "yes"}], "public: Input"),
        ([{"name": "a", "protocol": "udp", "port": 1}], "protocol 'udp' is not one of"),
        ([{"name": "a b", "protocol": "http", "port": 1}], "name 'a b' must be"),
        ([{"name": "a", "protocol": "http", "ports": []}], "at least 1 item"),
        ([{"name": "a", "protocol": "http", "ports": list(range(1, 10))}], "at most 8 items"),
        ([{"name": "a", "protocol": "http", "port": 1},
          {"name": "b", "protocol": "tcp", "port": 1}], "'a' and 'b' both use port 1"),
    ],
)  # fmt: skip
def test_a_bad_jetyard_label_is_refused_naming_the_entry(entries: object, said: str) -> None:
    label = entries if isinstance(entries, str) else json.dumps(entries)

    with pytest.raises(ServicePortError, match=JETYARD_LABEL) as refused:
        parse_jetyard(label)

    assert said in str(refused.value)


def test_the_count_and_the_label_length_are_bounded() -> None:
    many = ",".join(f"app{i}:tcp:{1000 + i}" for i in range(MAX_SERVICE_PORTS + 1))
    with pytest.raises(ServicePortError, match=f"at most {MAX_SERVICE_PORTS} are allowed"):
        parse_backendai(many)
    assert len(parse_backendai(many.rsplit(",", 1)[0])) == MAX_SERVICE_PORTS

    with pytest.raises(ServicePortError, match=f"at most {MAX_LABEL_CHARS}"):
        parse_jetyard(" " * (MAX_LABEL_CHARS + 1))


def test_a_list_given_directly_is_checked_as_a_set() -> None:
    with pytest.raises(ServicePortError, match="declared twice"):
        check_service_ports([port("a", HTTP, 1), port("a", TCP, 2)])
    assert check_service_ports([port("a", HTTP, 1), port("b", TCP, 2)])[1].name == "b"


def test_only_http_and_tcp_are_waited_for() -> None:
    assert [p for p in PortProtocol if p.probed] == [HTTP, TCP]
