"""Reading a roster (``jetyard admin user import``): the rows of a class in any column order,
and every mistake named with its line before anybody is created."""

from __future__ import annotations

import pytest

from jetyard.sdk.admin import Newcomer, RosterError, read_roster


def test_rows_in_any_column_order_with_optional_name_and_role() -> None:
    text = "\ufeffProject,email,role,name\nml,ada@example.org,,Ada\n\nml,bob@example.org,ADMIN,\n"
    assert read_roster(text) == [
        Newcomer(2, "ada@example.org", "ml", "user", "Ada"),
        Newcomer(4, "bob@example.org", "ml", "admin", ""),
    ]
    assert read_roster("email,project\nc@d.org,p\n") == [Newcomer(2, "c@d.org", "p")]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "line 1: the file is empty"),
        ("email,project,team\n", "line 1: unknown column 'team'"),
        ("email,name\n", "line 1: no 'project' column"),
        ("email,project\n", "line 1: no one to add"),
        ("email,project\na@b.org,p\nnot-an-email,p\n", "line 3: email 'not-an-email' is not"),
        ("email,project\na@b.org,p\nc@d.org\n", "line 3: 1 fields where the header names 2"),
        ("email,project\na@b.org,\n", "line 2: no project for a@b.org"),
        ("email,project,role\na@b.org,p,boss\n", "line 2: role 'boss' is not one of"),
        ("email,project\nA@b.org,p\na@B.org,q\n", "line 3: a@B.org is already on line 2"),
    ],
)
def test_a_mistake_names_its_line(text: str, said: str) -> None:
    with pytest.raises(RosterError) as refused:
        read_roster(text)
    assert str(refused.value).startswith(said), str(refused.value)
