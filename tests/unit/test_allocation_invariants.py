"""The log's invariant check (``events.audit.invariants``) on hand-made logs: a clean history
passes, and each kind of violation is caught, with its rule and position (a checker that cannot
fail proves nothing). Allocation, placement and preemption rules here; status transitions,
quotas, decisions and undecodable events in ``test_invariants.py``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.audit.invariants import InvariantReport, check
from events.catalogue import Event
from events.domain.agent import AgentRegistered, KernelStarted
from events.domain.node import (
    NodeCapacityChanged,
    NodeRegistered,
    ResourcesAllocated,
    ResourcesReleased,
)
from events.domain.session import (
    SessionRequested,
    SessionRequeued,
    SessionScheduled,
    SessionTerminated,
    SessionTerminating,
)
from events.envelope import StoredEvent
from schemas.devices import DeviceInfo
from schemas.ids import event_id_for
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from tests.unit.scenario import T0, envelope_of

GIB = 1 << 30
SMALL = ResourceSlots(cpu_milli=1000, memory_bytes=GIB)
ONE_GPU = ResourceSlots(cpu_milli=1000, memory_bytes=GIB, gpu_hundredths=100)
NODE = ResourceSlots(cpu_milli=4000, memory_bytes=8 * GIB, gpu_hundredths=200)


class Log:
    """A log written by hand, in stream order."""

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []
        self._versions: dict[tuple[str, str], int] = {}

    def add(
        self,
        aggregate_id: str,
        event: Event,
        *,
        cause: str | None = None,
        at: datetime = T0,
        **extra: Any,
    ) -> Log:
        """Append ``event``, decided from ``cause`` (one of its own unless given) at ``at``."""
        key = (type(event).aggregate_type.value, aggregate_id)
        version = self._versions[key] = self._versions.get(key, 0) + 1
        cause = cause or f"cmd-{len(self.events) + 1}"
        envelope = envelope_of(aggregate_id, version, event, at)
        update: dict[str, Any] = {
            "causation_id": cause,
            "event_id": event_id_for(cause, key[0], aggregate_id, version),
        }
        if extra:
            update["payload"] = {**envelope.payload, **extra}
        envelope = envelope.model_copy(update=update)
        self.events.append(StoredEvent(len(self.events) + 1, envelope))
        return self

    def node(self, node: str, capacity: ResourceSlots = NODE, gpus: int = 2) -> Log:
        devices = [DeviceInfo(kind="cuda", index=i, uuid=f"{node}-gpu{i}") for i in range(gpus)]
        self.add(
            node,
            AgentRegistered(
                epoch=1, hostname=node, backend="simulated", capacity=capacity,
                devices=tuple(devices),
            ),
        )  # fmt: skip
        return self.add(node, NodeRegistered(hostname=node, resource_group="g", capacity=capacity))

    def request(self, session: str, *needs: ResourceSlots) -> Log:
        spec = SessionSpec(image="img", kernels=tuple(KernelSpec(resources=n) for n in needs))
        kernels = tuple(f"{session}-k{i}" for i in range(len(needs)))
        return self.add(session, SessionRequested(spec=spec, kernel_ids=kernels))

    def schedule(self, session: str, placements: dict[str, str]) -> Log:
        return self.add(session, SessionScheduled(placements=placements, reason="placed"))

    def allocate(
        self,
        node: str,
        kernel: str,
        session: str,
        slots: ResourceSlots,
        devices: list[dict[str, Any]] | None = None,
    ) -> Log:
        event = ResourcesAllocated(kernel_id=kernel, session_id=session, slots=slots)
        if devices is None:
            return self.add(node, event)
        return self.add(node, event, devices=devices)

    def release(self, node: str, kernel: str) -> Log:
        return self.add(node, ResourcesReleased(kernel_id=kernel, reason="kernel exited"))

    def placed(self, session: str, node: str, need: ResourceSlots = ONE_GPU, **kw: Any) -> Log:
        """A session of one kernel requested, scheduled on ``node`` and allocated there."""
        kernel = f"{session}-k0"
        self.request(session, need).schedule(session, {kernel: node})
        return self.allocate(node, kernel, session, need, **kw)

    def end(self, session: str) -> Log:
        return self.add(session, SessionTerminated(reason="kernel exited", exit_code=0))

    def report(self, *, settled: bool = True) -> InvariantReport:
        return check(self.events, settled=settled)


def share(node: str, index: int, hundredths: int = 100, whole: bool = True) -> dict[str, Any]:
    return {"index": index, "uuid": f"{node}-gpu{index}", "hundredths": hundredths, "whole": whole}


def only(report: InvariantReport, text: str, rule: str | None = None) -> None:
    """Exactly one violation, and it says ``text`` (under ``rule``)."""
    assert len(report.violations) == 1, report.violations
    assert text in report.violations[0].text, report.violations
    assert rule is None or report.violations[0].rule == rule, report.violations


def test_a_clean_history_has_no_violations_and_is_counted() -> None:
    log = Log().node("n1").node("n2")
    log.placed("s1", "n1", devices=[share("n1", 0)]).placed("s2", "n1", devices=[share("n1", 1)])
    log.request("s3", ONE_GPU, SMALL).schedule("s3", {"s3-k0": "n2", "s3-k1": "n2"})
    log.allocate("n2", "s3-k0", "s3", ONE_GPU).allocate("n2", "s3-k1", "s3", SMALL)
    log.add("n1", KernelStarted(kernel_id="s1-k0", session_id="s1", container_id="c1"))
    # s1 ends and gives its GPU back; s4 takes it.
    log.release("n1", "s1-k0").end("s1").placed("s4", "n1", devices=[share("n1", 0)])
    report = log.report()
    assert report.violations == []
    assert (report.sessions, report.scheduled, report.nodes) == (4, 4, 2)
    assert (report.allocations, report.releases, report.held, report.started) == (5, 1, 4, 1)
    assert report.with_devices == 3
    assert report.events == len(log.events)


def test_a_kernel_allocated_on_two_nodes() -> None:
    log = Log().node("n1").node("n2").placed("s1", "n1")
    report = log.allocate("n2", "s1-k0", "s1", ONE_GPU).report()
    assert [str(v) for v in report.violations] == [
        "seq 8 [double-allocation]: kernel s1-k0 allocated on n2 while held on n1",
        "seq 8 [placement]: kernel s1-k0 allocated on n2 for s1; session s1 placed it on n1",
    ]


def test_a_kernel_allocated_twice_on_one_node() -> None:
    log = Log().node("n1").placed("s1", "n1", need=SMALL)
    only(log.allocate("n1", "s1-k0", "s1", SMALL).report(), "allocated twice on n1")


def test_a_kernel_allocated_again_after_its_release() -> None:
    log = Log().node("n1").placed("s1", "n1").release("n1", "s1-k0")
    report = log.allocate("n1", "s1-k0", "s1", ONE_GPU).report()
    only(report, "allocated again on n1 after its release")


@pytest.mark.parametrize(
    ("need", "over"),
    [
        (ResourceSlots(cpu_milli=3000), "cpu_milli 5000/4000"),
        (ResourceSlots(memory_bytes=7 * GIB), "memory_bytes 9663676416/8589934592"),
        (ResourceSlots(gpu_hundredths=200), "gpu_hundredths 300/200"),
    ],
)
def test_a_node_over_its_capacity_in_any_quantity(need: ResourceSlots, over: str) -> None:
    first = ResourceSlots(cpu_milli=2000, memory_bytes=2 * GIB, gpu_hundredths=100)
    log = Log().node("n1").placed("s1", "n1", need=first)
    only(log.placed("s2", "n1", need=need).report(), f"node n1 over capacity: {over}")


def test_capacity_counts_what_is_held_now_and_a_shrink_is_not_an_allocation() -> None:
    log = Log().node("n1", gpus=0).placed("s1", "n1", need=SMALL).placed("s2", "n1", need=SMALL)
    log.add("n1", NodeCapacityChanged(capacity=SMALL))  # the machine lost cores under them
    assert log.report().violations == []
    log.release("n1", "s1-k0").release("n1", "s2-k0")
    assert log.placed("s3", "n1", need=SMALL).report().violations == []
    only(log.placed("s4", "n1", need=SMALL).report(), "node n1 over capacity: cpu_milli 2000/1000")


def test_an_allocation_on_a_node_never_registered() -> None:
    only(Log().placed("s1", "nowhere", need=SMALL).report(), "a node never registered")


def test_a_device_shared_beyond_100_hundredths() -> None:
    half = ResourceSlots(cpu_milli=100, gpu_hundredths=60)
    log = Log().node("n1").placed("s1", "n1", need=half, devices=[share("n1", 0, 60, False)])
    log.placed("s2", "n1", need=half, devices=[share("n1", 0, 60, False)])
    only(log.report(), "device 0 of node n1 over 100 hundredths (120 shared, 0 whole)")


def test_four_quarters_fill_a_device_exactly() -> None:
    quarter = ResourceSlots(cpu_milli=100, gpu_hundredths=25)
    log = Log().node("n1")
    for i in range(4):
        log.placed(f"s{i}", "n1", need=quarter, devices=[share("n1", 1, 25, False)])
    assert log.report().violations == []


def test_a_device_whole_held_and_shared() -> None:
    log = Log().node("n1").placed("s1", "n1", devices=[share("n1", 0)])
    part = ResourceSlots(cpu_milli=100, gpu_hundredths=30)
    log.placed("s2", "n1", need=part, devices=[share("n1", 0, 30, False)])
    only(log.report(), "device 0 of node n1 both whole-held and shared")


def test_a_device_whole_held_twice() -> None:
    log = Log().node("n1").placed("s1", "n1", devices=[share("n1", 1)])
    log.placed("s2", "n1", devices=[share("n1", 1)])
    only(log.report(), "device 1 of node n1 over 100 hundredths (0 shared, 200 whole)")


def test_devices_released_with_their_kernel_can_be_shared_again() -> None:
    log = Log().node("n1").placed("s1", "n1", devices=[share("n1", 0)]).release("n1", "s1-k0")
    part = ResourceSlots(cpu_milli=100, gpu_hundredths=50)
    assert log.placed("s2", "n1", need=part, devices=[share("n1", 0, 50, False)]).report().ok


@pytest.mark.parametrize(
    ("devices", "text"),
    [
        ([share("n1", 5)], "holds device 5 of node n1, which the node does not have"),
        ([{**share("n1", 0), "uuid": "other"}], "which the node does not have"),
        ([share("n1", 0, 50, True), share("n1", 1, 50, True)], "whole at 50/100"),
        ([share("n1", 0, 60, False)], "devices add up to 60, slots say 100"),
    ],
)
def test_devices_that_do_not_exist_or_do_not_add_up(
    devices: list[dict[str, Any]], text: str
) -> None:
    report = Log().node("n1").placed("s1", "n1", devices=devices).report()
    assert any(text in v.text and v.rule == "device" for v in report.violations), report


def test_a_session_scheduled_twice() -> None:
    log = Log().node("n1").placed("s1", "n1").schedule("s1", {"s1-k0": "n1"})
    only(log.report(), "session s1: SCHEDULED -> SCHEDULED is not a transition", "transition")
    assert log.report().violations[0].seq == len(log.events)


def test_an_allocation_on_another_node_than_the_placement() -> None:
    log = Log().node("n1").node("n2").request("s1", ONE_GPU).schedule("s1", {"s1-k0": "n1"})
    report = log.allocate("n2", "s1-k0", "s1", ONE_GPU).report()
    only(report, "kernel s1-k0 allocated on n2 for s1; session s1 placed it on n1")


def test_an_allocation_of_other_slots_than_asked() -> None:
    log = Log().node("n1").request("s1", ONE_GPU).schedule("s1", {"s1-k0": "n1"})
    only(log.allocate("n1", "s1-k0", "s1", SMALL).report(), "session s1 asked for")


def test_a_placement_never_allocated_and_an_allocation_never_placed() -> None:
    log = Log().node("n1").request("s1", ONE_GPU).schedule("s1", {"s1-k0": "n1"})
    only(log.report(), "kernel s1-k0 placed on n1, never allocated")
    log = Log().node("n1").request("s1", ONE_GPU).allocate("n1", "s1-k0", "s1", ONE_GPU)
    only(log.report(), "which no placement names")


def test_a_placement_of_other_kernels_than_the_session_has() -> None:
    log = Log().node("n1").request("s1", SMALL, SMALL).schedule("s1", {"s1-k0": "n1"})
    only(log.allocate("n1", "s1-k0", "s1", SMALL).report(), "placed kernels ['s1-k0'], has")


def test_an_allocation_left_after_its_session_ended_once_settled() -> None:
    log = Log().node("n1").placed("s1", "n1").end("s1")
    assert log.report(settled=False).ok  # its release may still be on its way
    only(log.report(), "kernel s1-k0 still holds node n1 after session s1 ended")
    assert log.release("n1", "s1-k0").report().ok


def test_an_allocation_after_its_session_ended() -> None:
    log = Log().node("n1").request("s1", SMALL).schedule("s1", {"s1-k0": "n1"}).end("s1")
    report = log.allocate("n1", "s1-k0", "s1", SMALL).release("n1", "s1-k0").report()
    only(report, "allocated on n1 after session s1 ended")


def test_a_kernel_started_on_a_node_that_never_held_it() -> None:
    log = Log().node("n1").node("n2").placed("s1", "n1")
    log.add("n2", KernelStarted(kernel_id="s1-k0", session_id="s1", container_id="c"))
    only(log.report(), "kernel s1-k0 started on node n2, which never held it")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4), st.booleans()), max_size=40))
def test_allocations_that_a_correct_ledger_makes_never_trip_it_and_one_more_always_does(
    steps: list[tuple[int, int, bool]],
) -> None:
    """Random allocations and releases, each checked against a ledger kept here: the checker
    finds nothing; then one allocation beyond a full node is always found."""
    capacity = ResourceSlots(cpu_milli=4000, gpu_hundredths=400)
    log = Log()
    free = {f"n{i}": [4000, 400] for i in range(3)}
    for node in free:
        log.node(node, capacity, gpus=0)
    held: dict[str, tuple[str, ResourceSlots]] = {}
    for n, (node_index, gpus, release) in enumerate(steps):
        node = f"n{node_index}"
        if release and held:
            kernel = sorted(held)[n % len(held)]
            where, slots = held.pop(kernel)
            log.release(where, kernel)
            free[where][0] += slots.cpu_milli
            free[where][1] += slots.gpu_hundredths
            continue
        need = ResourceSlots(cpu_milli=1000, gpu_hundredths=100 * gpus)
        if need.cpu_milli <= free[node][0] and need.gpu_hundredths <= free[node][1]:
            log.placed(f"s{n}", node, need=need)
            held[f"s{n}-k0"] = (node, need)
            free[node][0] -= need.cpu_milli
            free[node][1] -= need.gpu_hundredths
    assert log.report().violations == []
    need = ResourceSlots(cpu_milli=free["n0"][0] + 1)
    only(log.placed("extra", "n0", need=need).report(), "node n0 over capacity: cpu_milli")


def preempt(log: Log, victim: str, by: str) -> Log:
    event = SessionTerminating(reason=f"preempted for {by}", preempted_by=by)
    return log.add(victim, event)


def test_a_preemption_for_a_waiting_session_of_higher_priority_is_counted() -> None:
    log = Log().node("n1", gpus=1)
    log.placed("low", "n1", devices=[share("n1", 0)])
    log.add("high", SessionRequested(spec=high_spec(), kernel_ids=("high-k0",)))
    preempt(log, "low", "high").release("n1", "low-k0").end("low")
    log.schedule("high", {"high-k0": "n1"}).allocate("n1", "high-k0", "high", ONE_GPU)
    report = log.report()
    assert report.violations == []
    assert report.preempted == 1


def high_spec(priority: int = 50) -> SessionSpec:
    return SessionSpec(image="img", kernels=(KernelSpec(resources=ONE_GPU),), priority=priority)


@pytest.mark.parametrize(
    ("priority", "placed_first", "text"),
    [(10, False, "(priority 10) preempted"), (50, True, "no longer waiting")],
)
def test_a_preemption_against_the_rules(priority: int, placed_first: bool, text: str) -> None:
    log = Log().node("n1", gpus=2)
    log.placed("low", "n1", devices=[share("n1", 0)])  # priority 10, the default
    log.add("high", SessionRequested(spec=high_spec(priority), kernel_ids=("high-k0",)))
    if placed_first:
        log.schedule("high", {"high-k0": "n1"}).allocate("n1", "high-k0", "high", ONE_GPU)
    only(preempt(log, "low", "high").report(settled=False), text)


def test_a_preemption_for_an_unknown_session() -> None:
    log = Log().node("n1").placed("low", "n1")
    only(preempt(log, "low", "ghost").report(settled=False), "unknown session ghost")


def test_a_requeued_session_is_placed_again_with_its_new_kernels() -> None:
    log = Log().node("n1").node("n2").placed("s1", "n1")
    log.release("n1", "s1-k0")  # its node was lost
    log.add("s1", SessionRequeued(reason="node-lost", kernel_ids=("s1-r1",), attempt=1))
    log.schedule("s1", {"s1-r1": "n2"}).allocate("n2", "s1-r1", "s1", ONE_GPU)
    report = log.report()
    assert report.violations == []
    assert (report.requeued, report.scheduled, report.allocations) == (1, 1, 2)


@pytest.mark.parametrize("again", ["s1-k0", "s1-r1"])
def test_a_requeued_session_placed_twice_or_with_its_old_kernels(again: str) -> None:
    log = Log().node("n1").node("n2").placed("s1", "n1").release("n1", "s1-k0")
    log.add("s1", SessionRequeued(reason="node-lost", kernel_ids=("s1-r1",), attempt=1))
    log.schedule("s1", {"s1-r1": "n2"}).allocate("n2", "s1-r1", "s1", ONE_GPU)
    log.schedule("s1", {again: "n2"})
    violations = log.report(settled=False).violations
    assert any(v.rule == "transition" and v.seq == len(log.events) for v in violations)


def test_a_session_requeued_while_not_placed() -> None:
    log = Log().node("n1").request("s1", ONE_GPU)
    log.add("s1", SessionRequeued(reason="?", kernel_ids=("s1-r1",), attempt=1))
    only(log.report(settled=False), "requeued while not placed (PENDING)", "transition")
