"""Client-given paths inside a folder: the rules a path must pass before it touches the disk.

Pure: no I/O. A path is text like ``"data/train/x.csv"``, relative to a folder's root; ``""``
names the root itself. What the rules refuse, and why:

- absolute paths, empty components (``a//b``, a trailing ``/``), ``.`` and ``..``: a path names
  one entry by its components, never by walking up or around;
- NUL, backslash, control and invisible format characters (bidi overrides, zero-width
  spaces): NUL ends a C string, a backslash is a separator on Windows (an archive unpacked
  there could escape), the others make a name read differently from what it is;
- look-alikes of ``/``, ``\\`` and ``.``: a character whose compatibility form (NFKC) contains
  one of them (fullwidth solidus and full stop, one-dot leader, ellipsis, ...) or that looks
  like a slash with no compatibility form (division slash, fraction slash, ...). Names are
  never normalised, so these cannot escape, but a human reading ``a\u2215b`` sees a directory;
- components over 255 bytes and paths over 4,096 bytes (UTF-8), the usual Linux limits.

Names are used exactly as sent (no NFC/NFKC folding): a file a session wrote in NFD must stay
reachable. Names the data plane *creates* (upload targets, new directories, move
destinations) must be NFC, so two names that look the same are never made through it.
Symlinks are a property of the disk, not of the text: ``folderfs`` refuses them.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096

# Slash look-alikes that NFKC leaves alone (those it maps to "/" or "\" are caught by the
# compatibility check): division slash, fraction slash, big solidus, box-drawing diagonal,
# mathematical rising diagonal, set minus, reverse solidus operator, big reverse solidus.
_SLASH_LOOKALIKES = frozenset("\u2215\u2044\u29f8\u2571\u27cb\u2216\u29f5\u29f9\u2572\u27cd")
_SEPARATOR_LIKE = frozenset("/\\.")
# Zero-width non-joiner and joiner are format characters that real names need (Persian,
# emoji sequences); every other format character (bidi controls, zero-width space, BOM,
# soft hyphen) is refused.
_ALLOWED_FORMAT = frozenset("\u200c\u200d")


class UnsafePath(ValueError):
    """A client path breaks a rule; ``message`` says which, in a sentence."""

    code = "unsafe_path"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, order=True)
class FolderPath:
    """A checked path inside a folder, as its components (``()`` is the folder's root)."""

    parts: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "/".join(self.parts)

    @property
    def is_root(self) -> bool:
        return not self.parts

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    @property
    def parent(self) -> FolderPath:
        return FolderPath(self.parts[:-1])

    def child(self, name: str) -> FolderPath:
        return FolderPath((*self.parts, check_name(name)))

    def is_within(self, other: FolderPath) -> bool:
        """Whether this path is ``other`` or beneath it (by components: ``ab`` is not in ``a``)."""
        return self.parts[: len(other.parts)] == other.parts


ROOT = FolderPath()


def _bad_character(char: str) -> str | None:
    """Why ``char`` may not appear in a name, or None."""
    if char == "\0":
        return "NUL"
    if char == "\\":
        return "a backslash (a separator on Windows)"
    category = unicodedata.category(char)
    if category in ("Cc", "Cs") or (category == "Cf" and char not in _ALLOWED_FORMAT):
        return f"the control or invisible character U+{ord(char):04X}"
    if char in _SLASH_LOOKALIKES:
        return f"U+{ord(char):04X}, which looks like a slash"
    if char not in _SEPARATOR_LIKE and _SEPARATOR_LIKE & set(unicodedata.normalize("NFKC", char)):
        return f"U+{ord(char):04X}, which looks like a slash or a dot"
    return None


def check_name(name: str) -> str:
    """``name`` if it may be one component of a path, else raise ``UnsafePath``."""
    if name in ("", ".", ".."):
        shown = "an empty component" if not name else f"a {name!r} component"
        raise UnsafePath(f"path has {shown}: name each entry by its own components")
    if "/" in name:
        raise UnsafePath(f"name {name!r} contains a slash")
    for char in name:
        reason = _bad_character(char)
        if reason is not None:
            raise UnsafePath(f"name {name!a} contains {reason}")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise UnsafePath(f"a name is longer than {MAX_NAME_BYTES} bytes (UTF-8)")
    return name


def check_new_name(name: str) -> str:
    """``check_name`` plus the rule for names the data plane creates: NFC only."""
    check_name(name)
    if unicodedata.normalize("NFC", name) != name:
        raise UnsafePath(f"new name {name!a} is not in Unicode NFC form: send it as NFC")
    return name


def parse_path(text: str, *, creating: bool = False) -> FolderPath:
    """Check a client path; ``creating`` applies ``check_new_name`` to its last component."""
    if text == "":
        return ROOT
    if text.startswith("/"):
        raise UnsafePath("path is absolute: give it relative to the folder's root")
    if "\0" in text:
        raise UnsafePath("path contains NUL")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise UnsafePath(f"path is longer than {MAX_PATH_BYTES} bytes (UTF-8)")
    parts = tuple(check_name(part) for part in text.split("/"))
    if creating:
        check_new_name(parts[-1])
    return FolderPath(parts)


def is_safe_name(name: str) -> bool:
    """Whether a name found on disk could be addressed by a client (listings flag the rest)."""
    try:
        check_name(name)
    except UnsafePath:
        return False
    return True
