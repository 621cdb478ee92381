"""The unit of work on the in-memory store: a decision on working copies is stored once,
a conflict folds what the other writer stored and decides again, an unknown outcome reads
back before deciding again, and a decision that cannot be stored leaves the state as it was."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from commands.directory import Directory
from commands.tenancy import Domain
from commands.unit_of_work import Changes, TooManyConflictsError, UnitOfWork, working_copy
from events.envelope import Cause
from events.memory import InMemoryStore
from events.writes import AggregateRef
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.subjects import AggregateType
from schemas.tenancy import UNLIMITED
from tests.unit.scenario import T0, at


def cause() -> Cause:
    command = new_id()
    return Cause(
        causation_id=command, correlation_id=command, actor=Actor.service("tests"),
        tenant=SYSTEM_TENANT,
    )  # fmt: skip


def setup() -> tuple[InMemoryStore, Directory, UnitOfWork[Changes]]:
    store, directory = InMemoryStore(), Directory()
    return store, directory, UnitOfWork(store, directory, lambda: Changes(directory))


async def create(work: UnitOfWork[Changes], name: str) -> None:
    def decide(changes: Changes) -> None:
        changes.unit(cause(), changes.add(Domain.create(name, "", UNLIMITED, T0)))

    await work.run(decide, what=f"creating {name}")


def describe(
    directory: Directory, name: str, text: str, decided: list[str]
) -> Callable[[Changes], str]:
    def decide(changes: Changes) -> str:
        domain = changes.track(directory.domains[name])
        decided.append(domain.description)
        domain.modify(domain.description + text, UNLIMITED, at(1))
        changes.unit(cause(), domain)
        return domain.description

    return decide


async def test_a_decision_is_stored_once_and_folded_from_the_ack() -> None:
    store, directory, work = setup()
    await create(work, "lab")
    seen: list[str] = []
    result, stored = await work.run(describe(directory, "lab", "a", seen), what="modify")
    assert result == "a" and seen == [""]
    assert [e.name for e in store.events()] == ["DomainCreated", "DomainModified"]
    assert directory.domains["lab"].description == "a"
    ref = AggregateRef(AggregateType.DOMAIN, "lab")
    assert stored.seqs_by_aggregate() == {ref: [2]}
    assert directory.guard(ref) == 2


async def test_a_decision_that_changes_nothing_writes_nothing() -> None:
    store, directory, work = setup()
    await create(work, "lab")

    def decide(changes: Changes) -> bool:
        return changes.track(directory.domains["lab"]).modify("", UNLIMITED, at(1))

    changed, stored = await work.run(decide, what="modify to the same")
    assert changed is False and stored.batches == []
    assert await store.stream_last_seq() == 1


async def test_a_conflict_folds_the_other_writers_event_and_decides_again() -> None:
    store, directory, work = setup()
    await create(work, "lab")
    # Another writer (another replica) changes the domain; this directory has not folded it.
    other = Directory()
    for event in store.events():
        other.apply(event)
    await UnitOfWork(store, other, lambda: Changes(other)).run(
        describe(other, "lab", "x", []), what="the other writer"
    )
    seen: list[str] = []
    result, _ = await work.run(describe(directory, "lab", "a", seen), what="modify")
    assert seen == ["", "x"], "decided first on the stale copy, then on the refreshed one"
    assert result == "xa"
    descriptions = [e.envelope.payload.get("description") for e in store.events()]
    assert descriptions == ["", "x", "xa"]
    assert directory.domains["lab"].description == "xa"


async def test_the_working_copy_is_thrown_away_when_the_write_fails() -> None:
    store, directory, work = setup()
    await create(work, "lab")
    original = directory.domains["lab"]
    copy = working_copy(original)
    copy.modify("changed", UNLIMITED, at(1))
    assert original.description == "" and copy.description == "changed"
    store.fail_next(stored=False)
    store.fail_next(stored=False)
    work.attempts = 2
    with pytest.raises(TooManyConflictsError):
        await work.run(describe(directory, "lab", "a", []), what="modify")
    assert directory.domains["lab"].description == ""
    assert [e.name for e in store.events()] == ["DomainCreated"]


async def test_an_answer_lost_after_storing_is_read_back_and_not_stored_twice() -> None:
    store, directory, work = setup()
    store.fail_next(stored=True)
    created: list[bool] = []

    def decide(changes: Changes) -> None:
        if "lab" in directory.domains:
            created.append(False)  # read back: the first attempt was stored after all
            return
        created.append(True)
        changes.unit(cause(), changes.add(Domain.create("lab", "", UNLIMITED, T0)))

    await work.run(decide, what="creating lab")
    assert created == [True, False]
    assert [e.name for e in store.events()] == ["DomainCreated"]
    assert "lab" in directory.domains


async def test_an_answer_lost_before_storing_is_decided_and_stored_again() -> None:
    store, directory, work = setup()
    store.fail_next(stored=False)
    await create(work, "lab")
    assert [e.name for e in store.events()] == ["DomainCreated"]
    assert "lab" in directory.domains


async def test_undo_gives_back_what_a_failed_decision_took() -> None:
    store, directory, work = setup()
    await create(work, "lab")
    store.fail_next(stored=False)
    given_back: list[str] = []
    result, _ = await work.run(
        describe(directory, "lab", "a", []), what="modify", undo=given_back.append
    )
    assert given_back == ["a"] and result == "a"


async def test_batches_are_stored_in_order_each_guarded_after_the_last() -> None:
    _, directory, work = setup()
    names = [f"d{i}" for i in range(5)]

    def decide(changes: Changes) -> None:
        changes.max_events = 2
        for name in names:
            changes.unit(cause(), changes.add(Domain.create(name, "", UNLIMITED, T0)))

    _, stored = await work.run(decide, what="five domains")
    assert [len(c.seqs) for _, c in stored.batches] == [2, 2, 1]
    assert stored.merged().seqs == (1, 2, 3, 4, 5)
    assert set(directory.domains) == set(names)


async def test_writers_sharing_a_lock_never_race_each_other() -> None:
    _, directory, work = setup()
    await create(work, "lab")
    seen: list[str] = []
    await asyncio.gather(
        *(work.run(describe(directory, "lab", str(i), seen), what="modify") for i in range(5))
    )
    assert len(seen) == 5, "no decision had to be taken twice"
    assert directory.domains["lab"].description == "01234"
