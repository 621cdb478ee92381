"""``working_copy``: a copy to decide on shares the frozen values and owns its containers, so a
decision that changes the copy leaves the folded aggregate as it was (and a container of a
subclass stays of that subclass)."""

from __future__ import annotations

from collections import Counter, defaultdict

from commands.node.aggregate import Node
from commands.unit_of_work import working_copy
from schemas.resources import ResourceSlots
from tests.support import NOW


def _node() -> Node:
    node = Node.register("n-1", "h", "default", ResourceSlots(cpu_milli=4000), NOW)
    node.collect_events()
    return node


def test_the_copy_is_equal_and_owns_its_containers() -> None:
    node = _node()
    copy = working_copy(node)
    assert type(copy) is Node and copy is not node
    assert vars(copy) == vars(node)
    for name, value in vars(node).items():
        if isinstance(value, list | dict | set):
            assert vars(copy)[name] is not value, name
        else:
            assert vars(copy)[name] is value, name  # frozen values are shared
    copy.cordon("maintenance", NOW)
    assert copy.cordoned and not node.cordoned
    assert copy.collect_events() and not node.collect_events()


def test_containers_of_a_subclass_keep_their_class() -> None:
    node = _node()
    node.__dict__["tally"] = Counter(a=1)
    node.__dict__["by_key"] = defaultdict(list, {"k": [1]})
    copy = working_copy(node)
    assert type(vars(copy)["tally"]) is Counter and vars(copy)["tally"] == Counter(a=1)
    assert type(vars(copy)["by_key"]) is defaultdict
    vars(copy)["tally"]["a"] += 1
    assert node.__dict__["tally"]["a"] == 1
    assert working_copy(None) is None
