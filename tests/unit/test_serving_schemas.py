"""Model serving's value objects: what an endpoint may be asked for, and what is refused with a
sentence that names the field (``schemas.serving``), and the inference session type."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from commands.serving.messages import CreateEndpoint
from schemas.bounds import BoundsError
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.serving import (
    EndpointStatus,
    HealthCheck,
    Revision,
    Rollout,
    Scaling,
    ScalingMetric,
    ScalingRule,
    check_revision,
    endpoint_id_for,
    endpoint_name_problem,
    endpoint_status,
    parse_token,
    token_text,
)
from schemas.session import KernelSpec, SessionSpec, SessionType
from schemas.tenancy import SessionOwner

SLOTS = ResourceSlots(cpu_milli=500, memory_bytes=256 << 20)


def test_endpoint_names_are_url_safe_and_their_ids_stable() -> None:
    assert endpoint_name_problem("llm-7b") is None
    for bad in ("ab", "-llm", "llm-", "LLM", "llm_7b", "a" * 64, "llm/x"):
        problem = endpoint_name_problem(bad)
        assert problem is not None and "3 to 63 lowercase" in problem
    assert endpoint_id_for("llm-7b") == endpoint_id_for("llm-7b") != endpoint_id_for("llm-8b")


def test_a_revision_puts_the_model_path_into_its_command() -> None:
    rev = Revision(
        image="model:1", command=("serve", "--model", "{model_path}/weights"), port=8000,
        model_folder="models", model_mount="/srv/model", resources=SLOTS,
    )  # fmt: skip
    assert rev.start_command() == ("serve", "--model", "/srv/model/weights")
    assert Revision(image="m:1", port=8000, resources=SLOTS).start_command() is None


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"port": 2000}, "reserved"),
        ({"port": 0}, "greater than or equal to 1"),
        ({"model_mount": "relative"}, "absolute"),
        ({"env": {"1BAD": "x"}}, "not valid"),
    ],
)
def test_a_revision_refuses_what_cannot_run(fields: dict[str, object], said: str) -> None:
    given: dict[str, object] = {"image": "m:1", "port": 8000, "resources": SLOTS, **fields}
    with pytest.raises(ValidationError, match=said):
        Revision.model_validate(given)


def test_scaling_rules_and_bounds_refuse_contradictions() -> None:
    with pytest.raises(ValidationError, match="needs scale_up_above"):
        ScalingRule(metric=ScalingMetric.RPS)
    with pytest.raises(ValidationError, match="must be below"):
        ScalingRule(metric=ScalingMetric.RPS, scale_up_above=5, scale_down_below=5)
    with pytest.raises(ValidationError, match="above max_replicas"):
        Scaling(min_replicas=3, max_replicas=2)
    with pytest.raises(ValidationError, match="cannot both be 0"):
        Rollout(max_surge=0, max_unavailable=0)
    with pytest.raises(ValidationError, match="timeout_s"):
        HealthCheck(timeout_s=0)
    scaling = Scaling(min_replicas=1, max_replicas=4)
    assert [scaling.clamp(n) for n in (0, 2, 9)] == [1, 2, 4]


def test_the_status_tells_partly_up_from_down() -> None:
    assert endpoint_status(4, 4, False, False) is EndpointStatus.READY
    assert endpoint_status(4, 3, False, False) is EndpointStatus.DEGRADED
    assert endpoint_status(4, 0, False, False) is EndpointStatus.UNAVAILABLE
    assert endpoint_status(0, 0, False, False) is EndpointStatus.SCALED_TO_ZERO
    assert endpoint_status(0, 1, False, False) is EndpointStatus.READY  # draining the last
    assert endpoint_status(2, 2, True, False) is EndpointStatus.DESTROYING
    assert endpoint_status(0, 0, True, True) is EndpointStatus.DESTROYED


def test_tokens_split_back_into_id_and_secret() -> None:
    text = token_text("0f3c", "s3cr_et")
    assert text == "jyep_0f3c_s3cr_et"
    assert parse_token(text) == ("0f3c", "s3cr_et")
    for bad in ("", "jyep_", "jyep_id", "jyjoin_a_b", "Bearer jyep_a_b"):
        assert parse_token(bad) is None


def test_an_inference_session_needs_its_port_and_only_it_has_one() -> None:
    kernels = (KernelSpec(resources=SLOTS),)
    spec = SessionSpec(image="m:1", type=SessionType.INFERENCE, kernels=kernels, service_port=80)
    assert spec.service_port == 80
    with pytest.raises(ValidationError, match="service_port is required"):
        SessionSpec(image="m:1", type=SessionType.INFERENCE, kernels=kernels)
    with pytest.raises(ValidationError, match="service_port is required"):
        SessionSpec(image="m:1", kernels=kernels, service_port=80)


def test_a_revision_is_one_whose_replicas_the_scheduler_takes() -> None:
    rev = Revision(
        image="model:1", command=("serve", "{model_path}"), port=8000, model_folder="llm",
        env={"A": "1"}, resources=SLOTS,
    )  # fmt: skip
    spec = rev.replica_spec("llm-r1")
    assert (spec.type, spec.service_port, spec.command) == (
        SessionType.INFERENCE, 8000, ("serve", "/models"),
    )  # fmt: skip
    assert spec.env == {"A": "1", "BACKEND_MODEL_PATH": "/models", "JETYARD_MODEL_PATH": "/models"}
    (mount,) = spec.mounts
    assert (mount.folder, mount.path, mount.read_only) == ("llm", "/models", True)
    check_revision(rev)
    tiny = rev.model_copy(update={"resources": ResourceSlots(cpu_milli=500)})
    with pytest.raises(BoundsError, match="memory 0 bytes is below"):
        check_revision(tiny)
    owner = SessionOwner(access_key="AK", user_id="u", project_id="p", domain="d")
    with pytest.raises(ValidationError, match="memory 0 bytes is below"):
        CreateEndpoint(
            actor=Actor.service("t"), tenant=SYSTEM_TENANT, name="tiny", owner=owner, spec=tiny
        )
