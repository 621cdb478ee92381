"""Client path rules: what a path inside a folder may be (pure)."""

from __future__ import annotations

import pytest

from schemas.folder_paths import (
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    ROOT,
    FolderPath,
    UnsafePath,
    check_new_name,
    is_safe_name,
    parse_path,
)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("", ()),
        ("a", ("a",)),
        ("data/train/x.csv", ("data", "train", "x.csv")),
        (".hidden/..x/x..", (".hidden", "..x", "x..")),
        ("日本語/データ.txt", ("日本語", "データ.txt")),
        ("\uff21\uff22.txt", ("\uff21\uff22.txt",)),  # fullwidth letters: common in Japanese
        ("notes ½ done", ("notes ½ done",)),
        ("\U0001f468\u200d\U0001f469", ("\U0001f468\u200d\U0001f469",)),  # emoji with ZWJ
        ("a" * MAX_NAME_BYTES, ("a" * MAX_NAME_BYTES,)),
    ],
)
def test_ordinary_paths_are_split_into_their_components(text: str, parts: tuple[str, ...]) -> None:
    assert parse_path(text).parts == parts
    assert str(parse_path(text)) == text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("..", "'..' component"),
        ("../etc/passwd", "'..' component"),
        ("a/../../b", "'..' component"),
        ("a/..", "'..' component"),
        (".", "'.' component"),
        ("./a", "'.' component"),
        ("/etc/passwd", "absolute"),
        ("//server/share", "absolute"),
        ("a//b", "empty component"),
        ("a/", "empty component"),
        ("a\0b", "NUL"),
        ("..\\..\\etc", "backslash"),
        ("a\\b", "backslash"),
        ("a\nb", "U+000A"),
        ("a\x7fb", "U+007F"),
        ("evil\u202etxt.exe", "U+202E"),  # right-to-left override
        ("a\u200bb", "U+200B"),  # zero-width space
        ("\ufeffa", "U+FEFF"),
        ("a\u2215b", "U+2215"),  # division slash
        ("a\u2044b", "U+2044"),  # fraction slash
        ("a\uff0fb", "U+FF0F"),  # fullwidth solidus
        ("a\uff3cb", "U+FF3C"),  # fullwidth reverse solidus
        ("\uff0e\uff0e", "U+FF0E"),  # fullwidth full stops
        ("\uff0e\uff0e/\uff0e\uff0e/etc", "U+FF0E"),
        ("\u2025", "U+2025"),  # two dot leader: '..' under NFKC
        ("a\u2024b", "U+2024"),  # one dot leader
        ("x\ufe52y", "U+FE52"),  # small full stop
        ("a" * (MAX_NAME_BYTES + 1), "255 bytes"),
        ("é" * 128, "255 bytes"),  # 256 bytes in UTF-8
        ("/".join(["a" * 200] * 21), "4096 bytes"),
    ],
)
def test_escape_and_look_alike_paths_are_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(UnsafePath) as refused:
        parse_path(text)
    assert says in refused.value.message
    assert refused.value.code == "unsafe_path"


def test_the_longest_path_allowed_is_4096_bytes() -> None:
    longest = "/".join(["a" * 254] * 16) + "/" + "b" * (MAX_PATH_BYTES - 16 * 255)
    assert len(longest.encode()) == MAX_PATH_BYTES
    assert len(parse_path(longest).parts) == 17
    with pytest.raises(UnsafePath, match="4096 bytes"):
        parse_path(longest + "b")


def test_new_names_must_be_nfc_but_existing_nfd_names_stay_reachable() -> None:
    nfd = "cafe\u0301"
    assert parse_path(nfd).parts == (nfd,)
    with pytest.raises(UnsafePath, match="NFC"):
        parse_path(nfd, creating=True)
    with pytest.raises(UnsafePath, match="NFC"):
        check_new_name(nfd)
    assert parse_path("caf\u00e9", creating=True).parts == ("caf\u00e9",)


def test_containment_is_by_components_not_by_text() -> None:
    assert parse_path("a/b").is_within(parse_path("a"))
    assert parse_path("a").is_within(parse_path("a"))
    assert parse_path("a").is_within(ROOT)
    assert not parse_path("ab/x").is_within(parse_path("a"))
    assert not parse_path("a").is_within(parse_path("a/b"))


def test_path_helpers() -> None:
    path = parse_path("a/b/c")
    assert path.name == "c"
    assert path.parent == FolderPath(("a", "b"))
    assert ROOT.is_root and not path.is_root
    assert path.child("d") == parse_path("a/b/c/d")
    with pytest.raises(UnsafePath):
        path.child("..")


def test_names_found_on_disk_are_flagged_when_a_client_could_not_address_them() -> None:
    assert is_safe_name("report.pdf")
    assert not is_safe_name("a\nb")
    assert not is_safe_name("\uff0e\uff0e")
