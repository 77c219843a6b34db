"""The exceptions and the warning symroof raises for bad input, and the caret drawing they share.

A `SpecError` points into the spec text: its first line says what is wrong and
where, the next two show the offending line with a caret under the spot.

Examples:
    >>> err = SpecError("unknown dtype 'bf61'; did you mean 'bf16'?",
    ...                 text="bf61[B, D] @ bf16[D, F] -> bf16[B, F]", start=0, end=4)
    >>> print(err)
    unknown dtype 'bf61'; did you mean 'bf16'? (column 1)
      bf61[B, D] @ bf16[D, F] -> bf16[B, F]
      ^^^^
"""

from __future__ import annotations

import os
import sys
import types
import unicodedata

# An echoed line longer than this is cut down to a window around the caret.
_WINDOW = 100


class SymroofError(ValueError):
    """Base class: every error symroof raises on purpose is one of these."""


class SpecError(SymroofError):
    """A spec that cannot be parsed or makes no sense, with where it went wrong.

    Args:
        message: what is wrong, in words (one line).
        text: the whole spec, so the offending line can be shown.
        start: 0-based offset of the first offending character (None: no position).
        end: offset one past the last offending character (default: start + 1).
    """

    def __init__(self, message: str, text: str | None = None,
                 start: int | None = None, end: int | None = None):
        self.message = message
        self.text = text
        self.start = start
        self.end = end if end is not None else (None if start is None else start + 1)
        super().__init__(str(self))

    @property
    def line(self) -> int | None:
        """1-based line of the error, or None."""
        if self.text is None or self.start is None:
            return None
        return self.text.count("\n", 0, self.start) + 1

    @property
    def column(self) -> int | None:
        """1-based column of the error, or None."""
        if self.text is None or self.start is None:
            return None
        return column_of(self.text, self.start)

    def headline(self) -> str:
        """The one-line form: message plus where."""
        if self.line is None or self.text is None:
            return self.message
        if "\n" in self.text.strip("\n"):
            return f"{self.message} (line {self.line}, column {self.column})"
        return f"{self.message} (column {self.column})"

    def __str__(self) -> str:
        if self.line is None or self.text is None or self.start is None:
            return self.message
        return self.headline() + "\n" + caret(self.text, self.start, self.end)


class HardwareError(SymroofError):
    """A chip that is unknown, a hardware file that is malformed, or a figure that is missing."""


class SymroofWarning(UserWarning):
    """Something symroof computed but wants a person to look at: a limit that depends on
    how the dims grow, a spec that could be read two ways."""


def column_of(text: str, pos: int) -> int:
    """1-based column of offset `pos` in `text`."""
    return pos - (text.rfind("\n", 0, pos) + 1) + 1


def caret(text: str, start: int, end: int | None = None) -> str:
    """Draw the line of `text` holding offset `start`, with carets under start..end.

    Wide characters (CJK) take two columns under the caret, a tab is shown as four
    spaces in both lines (so the caret line is spaces and carets, lined up wherever the
    terminal's tab stops are), and a long line is cut to a window around the spot.

    Examples:
        >>> print(caret("ab\\ncdef", 4, 6))
          cdef
           ^^
    """
    start = max(0, min(start, len(text)))
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    if line_end < 0:
        line_end = len(text)
    end = start + 1 if end is None or end <= start else min(end, max(line_end, start + 1))
    lo, hi = line_start, line_end
    if hi - lo > _WINDOW:
        lo = max(line_start, min(start - _WINDOW // 2, line_end - _WINDOW))
        hi = min(line_end, lo + _WINDOW)
    shown = "".join("\ufffd" if _unprintable(ch) else ch for ch in text[lo:hi].replace("\t", _TAB))
    prefix = "..." if lo > line_start else ""
    suffix = "..." if hi < line_end else ""
    pad = " " * len(prefix) + "".join(_blank(ch) for ch in text[lo:start])
    marks = "^" * max(1, sum(_width(ch) for ch in text[start:min(end, hi)]) or 1)
    return f"  {prefix}{shown}{suffix}\n  {pad}{marks}"


def printable(text: str) -> str:
    """`text` as a terminal may show it: each control or format character (an escape
    sequence's ESC, a right-to-left override U+202E, a zero-width space) written as its
    code, so that a name read from a file cannot rewrite the line it is printed in;
    newlines and tabs stay.

    Examples:
        >>> printable("h100\\u202e001a")
        'h100\\\\u202e001a'
    """
    return "".join(f"\\u{ord(ch):04x}" if _unprintable(ch) else ch for ch in text)


def unprintable_at(value: object, where: str = "") -> str | None:
    """Where in data read from a file (JSON's dicts, lists and strings) a key or a text
    holds a character `printable` would write as its code (a control or format character:
    an escape sequence, a right-to-left override), as a dotted path; None where none does.
    A data file's names and sources are printed as they are, so its checks refuse one.

    Examples:
        >>> unprintable_at({"chips": [{"id": "h100"}, {"id": "h\\u202e00"}]})
        'chips.1.id'
    """
    texts = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in texts:
        at = f"{where}.{key}" if where else str(key)
        if any(isinstance(t, str) and any(_unprintable(ch) for ch in t) for t in (key, item)):
            return at
        found = unprintable_at(item, at)
        if found is not None:
            return found
    return None


def _unprintable(ch: str) -> bool:
    return ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn")


def _width(ch: str) -> int:
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


_TAB = "    "


def _blank(ch: str) -> str:
    return _TAB if ch == "\t" else " " * _width(ch)


def caller_level() -> int:
    """The stack level (for warnings.warn) of the first frame outside symroof and functools:
    a warning raised inside a cached property points at the user's line, not functools.py."""
    ours = os.path.dirname(os.path.abspath(__file__))
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and (os.path.dirname(os.path.abspath(frame.f_code.co_filename)).startswith(ours)
                                 or frame.f_code.co_filename.endswith("functools.py")):
        frame, level = frame.f_back, level + 1
    return level
