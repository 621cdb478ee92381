"""Fair share with decay (``placement.fairshare``), with worked examples computed by hand.

The group of every example: one node of 8 GPUs, 16 CPU cores and 16 GiB; the default weights
(10 per GPU, 1 per core, 0.25 per GiB) make its weighted capacity 80 + 16 + 4 = 100 per second,
and a half-life h of one day. Holding 4 GPUs (weight 40) from 0 to h counts, at h,
40·(h/ln2)·(1 - 1/2) = 20·h/ln2: normalised by the group held forever (100·h/ln2), 0.2.
"""

from __future__ import annotations

import math

import pytest

from placement import FairShareInput, Placed, Waiting, place
from placement.fairshare import (
    ACTIVE,
    Account,
    UsageBook,
    held_between,
    norm_of,
    tree,
    weigh,
)
from schemas.fair_share import FairShareSettings
from schemas.tenancy import GroupScheduling, QueuePolicy
from tests.unit.placement_support import ask, node, slots

H = 86_400.0
SETTINGS = FairShareSettings(usage_half_life_s=int(H))
FAIR = GroupScheduling(queue_policy=QueuePolicy.FAIR_SHARE, fair_share=SETTINGS)
CAPACITY = slots(cpu=16, mem=16, gpu=8)
NORM = norm_of(CAPACITY, SETTINGS)
ALICE: Account = ("lab", "vision", "alice")
BOB: Account = ("lab", "vision", "bob")


def equal_shares(level: str, key: str) -> int:
    return 1


def book_after_one_half_life() -> UsageBook:
    """Alice held 4 GPUs and Bob 2 from 0 to h."""
    book = UsageBook()
    book.set_half_life("g", H, 0.0)
    book.allocate("a1", "g", ALICE, slots(gpu=4), 0.0)
    book.allocate("b1", "g", BOB, slots(gpu=2), 0.0)
    book.release("a1", H)
    book.release("b1", H)
    return book


def weighed(book: UsageBook, now: float) -> dict[Account, float]:
    return {a: weigh(held, SETTINGS) for a, held in book.usage("g", now).items()}


def test_the_weighted_capacity_and_the_norm() -> None:
    assert weigh((16.0, 16.0, 8.0), SETTINGS) == pytest.approx(100.0)
    assert pytest.approx(100.0 * H / math.log(2)) == NORM


def test_two_users_one_with_twice_the_decayed_usage() -> None:
    used = weighed(book_after_one_half_life(), H)
    assert used[ALICE] / NORM == pytest.approx(0.2)
    assert used[BOB] / NORM == pytest.approx(0.1)
    found = tree(used, [ALICE, BOB], equal_shares, NORM)
    # One domain, one project: their shares are 1; the two users split the project's: 0.5.
    alice, bob = found.standing(ALICE), found.standing(BOB)
    assert alice.user.share_norm == bob.user.share_norm == 0.5
    assert alice.domain.factor == pytest.approx(2**-0.3)  # 0.8123: the project used 0.3
    assert alice.project.factor == pytest.approx(2**-0.3)
    assert alice.user.factor == pytest.approx(2**-0.4)  # 2^(-0.2/0.5) = 0.7579
    assert bob.user.factor == pytest.approx(2**-0.2)  # 2^(-0.1/0.5) = 0.8706
    assert alice.rounded().user == 0.76 and bob.rounded().user == 0.87


def test_the_queue_puts_the_light_user_first_and_each_reason_carries_its_standing() -> None:
    book = book_after_one_half_life()
    fair = FairShareInput(book.usage("g", H), SETTINGS, equal_shares)
    requests = [
        ask("alice-1", gpu=8, order=1, account=ALICE),
        ask("bob-1", gpu=8, order=2, account=BOB),
    ]
    busy = node("n1", cpu=16, mem=16, gpus=8, whole=[0])  # 7 GPUs free: neither fits now
    decisions = place(requests, [busy], FAIR, group="g", now=H, fair=fair)
    assert [d.session_id for d in decisions] == ["bob-1", "alice-1"]
    waiting = {d.session_id: d for d in decisions if isinstance(d, Waiting)}
    assert waiting["bob-1"].position == 1 and waiting["alice-1"].position == 2
    assert waiting["bob-1"].fair_share is not None and waiting["alice-1"].fair_share is not None
    assert waiting["bob-1"].fair_share.rounded().user == 0.87
    assert waiting["alice-1"].fair_share.rounded().user == 0.76
    # Room for one: the light user's session takes it, though the other asked first.
    free = node("n1", cpu=16, mem=16, gpus=8)
    placed = place(requests, [free], FAIR, group="g", now=H, fair=fair)
    assert isinstance(placed[0], Placed) and placed[0].session_id == "bob-1"
    assert isinstance(placed[1], Waiting)


def test_without_usage_the_queue_is_first_come_first_served() -> None:
    fair = FairShareInput({}, SETTINGS, equal_shares)
    requests = [ask("b", order=2, account=BOB), ask("a", order=1, account=ALICE)]
    decisions = place(requests, [node("n1")], FAIR, group="g", now=H, fair=fair)
    assert [d.session_id for d in decisions] == ["a", "b"]


def test_priority_comes_before_fair_share() -> None:
    fair = FairShareInput(book_after_one_half_life().usage("g", H), SETTINGS, equal_shares)
    requests = [
        ask("bob-1", order=1, account=BOB),
        ask("alice-urgent", order=2, priority=50, account=ALICE),
    ]
    decisions = place(requests, [node("n1")], FAIR, group="g", now=H, fair=fair)
    assert [d.session_id for d in decisions] == ["alice-urgent", "bob-1"]


def test_one_half_life_without_usage_halves_the_exponent() -> None:
    book = book_after_one_half_life()
    before = tree(weighed(book, H), [ALICE, BOB], equal_shares, NORM)
    after = tree(weighed(book, 2 * H), [ALICE, BOB], equal_shares, NORM)
    for account in (ALICE, BOB):
        then, now = before.standing(account).user, after.standing(account).user
        exponent_then = then.usage_norm / then.share_norm
        exponent_now = now.usage_norm / now.share_norm
        assert exponent_now == pytest.approx(exponent_then / 2, rel=1e-12)
        assert now.factor == pytest.approx(math.sqrt(then.factor), rel=1e-12)
    assert after.standing(ALICE).user.factor == pytest.approx(2**-0.2)  # 0.76 -> 0.87
    assert after.standing(BOB).user.factor == pytest.approx(2**-0.1)  # 0.87 -> 0.93


def test_shares_change_the_order() -> None:
    def alice_three(level: str, key: str) -> int:
        return 3 if (level, key) == ("user", "alice") else 1

    found = tree(weighed(book_after_one_half_life(), H), [ALICE, BOB], alice_three, NORM)
    alice, bob = found.standing(ALICE).user, found.standing(BOB).user
    assert (alice.share_norm, bob.share_norm) == (0.75, 0.25)
    assert alice.factor == pytest.approx(2 ** (-0.2 / 0.75))  # 0.8312
    assert bob.factor == pytest.approx(2**-0.4)  # 0.7579
    fair = FairShareInput(book_after_one_half_life().usage("g", H), SETTINGS, alice_three)
    requests = [ask("bob-1", order=1, account=BOB), ask("alice-1", order=2, account=ALICE)]
    decisions = place(requests, [node("n1")], FAIR, group="g", now=H, fair=fair)
    assert [d.session_id for d in decisions] == ["alice-1", "bob-1"]


def test_the_project_is_weighed_before_its_users() -> None:
    """Project vision: alice alone used 0.2. Project nlp: bob used 0.15, carol nothing. The
    projects split the domain: S 0.5 each; vision 2^(-0.2/0.5) = 0.76 < nlp 2^(-0.15/0.5) =
    0.81, so both of nlp's users go first, bob too, though his own factor 2^(-0.15/0.25) = 0.66
    is below alice's 2^(-0.2/0.5) = 0.76."""
    bob, carol = ("lab", "nlp", "bob"), ("lab", "nlp", "carol")
    used = {ALICE: 0.2 * NORM, bob: 0.15 * NORM}
    found = tree(used, [ALICE, bob, carol], equal_shares, NORM)
    assert found.projects[("lab", "vision")].factor == pytest.approx(2**-0.4)
    assert found.projects[("lab", "nlp")].factor == pytest.approx(2**-0.3)
    assert found.standing(bob).user.factor == pytest.approx(2**-0.6)
    assert found.standing(carol).user.factor == 1.0
    assert found.standing(ALICE).user.factor == pytest.approx(2**-0.4)
    order = sorted([ALICE, bob, carol], key=lambda a: found.standing(a).key())
    assert order == [carol, bob, ALICE]


def test_the_domain_is_weighed_before_its_projects() -> None:
    """Domain lab used 0.3 (shares 1 of 2: S 0.5, factor 2^-0.6); domain zoo used 0.1:
    factor 2^-0.2. Zoo's heavy user goes before lab's idle one."""
    zoo_heavy: Account = ("zoo", "z", "heavy")
    idle: Account = ("lab", "other", "idle")
    used = {ALICE: 0.3 * NORM, zoo_heavy: 0.1 * NORM}
    found = tree(used, [zoo_heavy, idle], equal_shares, NORM)
    assert found.domains["lab"].factor == pytest.approx(2**-0.6)
    assert found.domains["zoo"].factor == pytest.approx(2**-0.2)
    assert found.standing(idle).user.factor == 1.0
    assert found.standing(zoo_heavy).key() < found.standing(idle).key()


def test_only_active_siblings_divide_the_shares() -> None:
    """An owner whose usage decayed below ``ACTIVE`` and who waits for nothing no longer
    counts among the siblings; one that waits does, usage or not."""
    gone: Account = ("lab", "vision", "gone")
    used = {ALICE: 0.2 * NORM, gone: ACTIVE * NORM / 10}
    alone = tree(used, [ALICE], equal_shares, NORM)
    assert gone not in alone.users
    assert alone.standing(ALICE).user.share_norm == 1.0
    both = tree(used, [ALICE, BOB], equal_shares, NORM)
    assert both.standing(ALICE).user.share_norm == 0.5


def test_a_group_without_weighted_capacity_orders_by_arrival() -> None:
    found = tree({ALICE: 5.0}, [ALICE, BOB], equal_shares, 0.0)
    assert found.standing(ALICE).user.factor == found.standing(BOB).user.factor == 1.0


# ---- the book ----------------------------------------------------------------------------


def test_the_book_agrees_with_the_closed_form_of_each_interval() -> None:
    """What the gateway sums from the usage view's intervals is what the scheduler's
    accumulators hold, however the intervals overlap."""
    book = UsageBook()
    book.set_half_life("g", H, 0.0)
    intervals = [("k1", 4, 0.0, 3600.0), ("k2", 2, 1800.0, 90_000.0), ("k3", 1, 50_000.0, None)]
    events = [(start, kernel, gpus) for kernel, gpus, start, _ in intervals]
    events += [(end, kernel, 0) for kernel, _, _, end in intervals if end is not None]
    for at, kernel, gpus in sorted(events):  # the log's order is the times'
        if gpus:
            book.allocate(kernel, "g", ALICE, slots(gpu=gpus), at)
        else:
            book.release(kernel, at)
    now = 200_000.0
    closed = sum(
        held_between(float(gpus), start, end if end is not None else now, now, H)
        for _, gpus, start, end in intervals
    )
    assert book.usage("g", now)[ALICE][2] == pytest.approx(closed, rel=1e-12)


def test_an_event_stamped_before_the_last_one_counts_at_the_last_ones_time() -> None:
    """Another writer's clock may lag: the log's order decides, so every fold agrees."""
    book = UsageBook()
    book.allocate("k1", "g", ALICE, slots(gpu=1), 1000.0)
    book.release("k1", 900.0)  # stamped earlier than the allocation
    assert book.usage("g", 1000.0)[ALICE] == (0.0, 0.0, 0.0)
    assert book.usage("g", 5000.0)[ALICE] == (0.0, 0.0, 0.0)


def test_releasing_everything_leaves_nothing_held() -> None:
    book = UsageBook()
    book.set_half_life("g", H, 0.0)
    for i in range(10):
        book.allocate(f"k{i}", "g", ALICE, slots(cpu=0.1, mem=0.3, gpu=0.07), float(i))
    for i in range(10):
        book.release(f"k{i}", 100.0 + i)
    later = book.usage("g", 100.0 + 9 + H)[ALICE]
    assert book.usage("g", 100.0 + 9 + 2 * H)[ALICE] == pytest.approx(
        tuple(x / 2 for x in later), rel=1e-12
    )


def test_a_new_half_life_counts_from_its_change() -> None:
    """Usage up to the change decays with the old half-life, from then on with the new one."""
    book = UsageBook()
    book.set_half_life("g", H, 0.0)
    book.allocate("k1", "g", ALICE, slots(gpu=1), 0.0)
    book.release("k1", H)
    at_change = book.usage("g", 2 * H)[ALICE][2]
    book.set_half_life("g", H / 2, 2 * H)
    assert book.usage("g", 2 * H + H / 2)[ALICE][2] == pytest.approx(at_change / 2)
