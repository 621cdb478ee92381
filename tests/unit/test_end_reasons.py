"""Why a session ended is its final reason: an end asked for (terminated by someone, idle
timeout, lifetime, timeout, preemption, drain) keeps its cause whatever the kernel's exit
says after (a stopped kernel exits 143); a session that ends by itself ends as its kernel
did. Given events, when a command, then events."""

from __future__ import annotations

from commands.messages import TerminateSession
from commands.session.aggregate import Session
from events.domain.session import (
    SessionRequested,
    SessionRequeued,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from schemas.ids import kernel_id_for
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionStatus
from schemas.tenancy import SessionOwner
from services.scheduler.session_commands import ended_by
from tests.unit.scenario import at, given, then

S = SessionStatus
OWNER = SessionOwner(access_key="AKOWNER", user_id="u-owner", project_id="p-1", domain="d-1")
KERNEL = KernelSpec(resources=ResourceSlots(cpu_milli=1000))
IDLE = "idle timeout: no activity for 600s"


def running(sid: str = "s1", kernels: int = 1) -> Session:
    kids = tuple(kernel_id_for(sid, i) for i in range(kernels))
    spec = SessionSpec(image="img", kernels=(KERNEL,) * kernels)
    return given(
        Session,
        sid,
        SessionRequested(spec=spec, kernel_ids=kids, owner=OWNER),
        SessionScheduled(placements=dict.fromkeys(kids, "n1"), reason="placed"),
        SessionStarted(reason="kernel started"),
    )


def test_an_idle_timeout_stays_the_reason_after_the_kernel_exits_143() -> None:
    session = running()
    session.terminate(IDLE, at(10))

    session.kernel_exited(session.main_kernel, 143, "kernel exited with code 143 (stop)", at(11))

    assert then(session)[-1] == SessionTerminated(reason=IDLE, exit_code=143, asked=True)
    assert session.reason == IDLE


def test_a_session_that_ends_by_itself_ends_as_its_kernel_did() -> None:
    session = running()

    session.kernel_exited(session.main_kernel, 0, "kernel exited with code 0", at(11))

    assert session.reason == "kernel exited with code 0"


def test_a_cluster_whose_main_kernel_exits_by_itself_ends_as_that_kernel() -> None:
    session = running(kernels=2)
    main, sub = session.kernel_ids

    session.kernel_exited(main, 3, "kernel exited with code 3", at(11))
    session.kernel_exited(sub, 143, "kernel exited with code 143", at(12))

    assert (session.status, session.reason) == (S.TERMINATED, "main1: kernel exited with code 3")


def test_a_cluster_asked_to_end_keeps_the_cause_whichever_kernel_ends_last() -> None:
    session = running(kernels=2)
    main, sub = session.kernel_ids
    session.terminate("max session lifetime 3600s reached", at(10))

    session.kernel_exited(main, 143, "kernel exited with code 143", at(11))
    session.kernel_exited(sub, 143, "kernel exited with code 143", at(12))

    assert session.reason == "max session lifetime 3600s reached"
    assert session.exit_code == 143


def test_node_loss_after_a_request_keeps_the_request() -> None:
    session = running()
    session.terminate("terminated by keypair AKOWNER (its owner)", at(10))

    session.mark_terminated("node-lost: node n1 stopped answering", at(11))

    assert session.reason == "terminated by keypair AKOWNER (its owner)"


def test_a_requeued_session_forgets_an_earlier_cause() -> None:
    kid = kernel_id_for("s1", 9)
    session = given(
        Session,
        "s1",
        SessionRequested(
            spec=SessionSpec(image="img", kernels=(KERNEL,)),
            kernel_ids=(kernel_id_for("s1", 0),),
            owner=OWNER,
        ),
        SessionScheduled(placements={kernel_id_for("s1", 0): "n1"}, reason="placed"),
        SessionTerminating(reason="preempted: stopped", preempted_by="s2"),
        SessionRequeued(reason="node-lost; placed again", kernel_ids=(kid,), attempt=1),
        SessionScheduled(placements={kid: "n2"}, reason="placed"),
        SessionStarted(reason="kernel started"),
    )
    assert session.ending is None

    session.kernel_exited(kid, 0, "kernel exited with code 0", at(20))

    assert session.reason == "kernel exited with code 0"


def terminate(actor: Actor, reason: str | None = None) -> TerminateSession:
    extra = {} if reason is None else {"reason": reason}
    return TerminateSession(actor=actor, tenant=SYSTEM_TENANT, session_id="s1", **extra)


def test_a_request_names_who_asked_and_whether_they_own_the_session() -> None:
    session = running()
    owner = Actor(kind=ActorKind.KEYPAIR, id="AKOWNER")
    admin = Actor(kind=ActorKind.USER, id="u-admin")

    assert ended_by(terminate(owner), session) == "terminated by keypair AKOWNER (its owner)"
    assert ended_by(terminate(Actor(kind=ActorKind.USER, id="u-owner")), session) == (
        "terminated by user u-owner (its owner)"
    )
    assert ended_by(terminate(admin, "over budget"), session) == (
        "terminated by user u-admin: over budget"
    )


def test_a_waiting_session_asked_to_end_is_cancelled_by_whom() -> None:
    session = given(
        Session,
        "s1",
        SessionRequested(
            spec=SessionSpec(image="img", kernels=(KERNEL,)),
            kernel_ids=(kernel_id_for("s1", 0),),
            owner=OWNER,
        ),
    )

    assert ended_by(terminate(Actor.service("tests")), session) == "cancelled by service tests"
