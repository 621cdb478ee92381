"""Control characters in text: ``control_character_in_text`` (tabs and newlines let through)
finds what ``control_character`` finds once those are taken out, for any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from schemas.bounds import control_character, control_character_in_text

TEXT = st.text(
    alphabet=st.one_of(
        st.characters(min_codepoint=0, max_codepoint=0x2FF),
        st.sampled_from(["\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\u2028", "\u2029"]),
    ),
    max_size=40,
)


@given(TEXT)
def test_in_text_is_the_check_with_tabs_and_newlines_taken_out(value: str) -> None:
    expected = control_character(value.replace("\n", "").replace("\t", ""))
    assert control_character_in_text(value) == expected


def test_what_each_lets_through() -> None:
    assert control_character_in_text("a\tb\nc") is None
    assert control_character("a\tb") == "U+0009"
    assert control_character_in_text("line\r\n") == "U+000D"
    assert control_character_in_text("esc \x1b[31m") == "U+001B"
    assert control_character_in_text("next line\u2028") == "U+2028"
