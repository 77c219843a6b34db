"""Lark's syntax errors -> `SpecError`s in words, with a caret.

Lark says which tokens it expected by their grammar names (`RSQB`, `_NEWLINE`); a person
needs "']'" and "a new line", and, for the mistakes people actually make ('=>' for
'->', an unclosed '[', 'x' between operands), a sentence that names the fix. Kept apart
from `syntax.py`, which builds the written statements, since none of this touches them.
"""

from __future__ import annotations

import re
from typing import cast

from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..errors import SpecError

_WORDS = {
    "ARROW": "'->'",
    "OPERATOR": "an operator ('@', '*' or '*_D')",
    "NAME": "a name",
    "INT": "a size",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
    "LPAR": "'('",
    "RPAR": "')'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "COLON": "':'",
    "_SEMI": "';'",
    "EQUALS": "'='",
    "UNDERSCORE": "'_'",
    "_NEWLINE": "a new line",
    "TEXT_OPEN": "'\\text{'",
    "$END": "the end of the spec",
}
# The order in which expected tokens are listed, most helpful first.
_ORDER = ["COMMA", "RSQB", "ARROW", "OPERATOR", "LSQB", "NAME", "INT", "COLON", "EQUALS",
          "UNDERSCORE", "LBRACE", "RBRACE", "LPAR", "RPAR", "TEXT_OPEN", "_SEMI", "_NEWLINE", "$END"]


def syntax_error(text: str, err: UnexpectedInput) -> SpecError:
    """The `SpecError` for a failed parse: what came, what could have come, and where."""
    pos: int
    if isinstance(err, UnexpectedToken) and err.token.type != "$END":
        token = err.token
        # Lark types a token's offsets as optional: only a token made by hand lacks them.
        assert token.start_pos is not None and token.end_pos is not None
        pos, end, got = token.start_pos, token.end_pos, _show(str(token))
        if token.type == "_NEWLINE":
            got = "a new line"
        expected = _acceptable(err)
    elif isinstance(err, UnexpectedCharacters):
        # Lark declares the offset None on the base class; the lexer always sets it here.
        pos = cast(int, err.pos_in_stream)
        end = pos + 1
        got = _show(text[pos])
        expected = set(err.allowed or ())
    else:  # the end of the spec came too early
        pos = end = len(text.rstrip())
        got = "the end of the spec"
        expected = _acceptable(err)
    hint = _hint(text, pos, end, got, expected)
    if hint is not None:
        return hint
    return SpecError(f"expected {_words(expected)}, got {got}", text, pos, end)


def _acceptable(err: UnexpectedInput) -> set[str]:
    """The tokens that could really come next. LALR merges states, so `err.expected` can
    list tokens that only fit elsewhere; replaying the parser state asks exactly."""
    try:
        return set(err.interactive_parser.accepts())
    except Exception:  # an older Lark, or no parser state: the merged list still helps
        return set(getattr(err, "expected", ()) or ())


def _show(fragment: str) -> str:
    """A piece of the spec quoted for a message, with invisible characters spelt out."""
    if all(ch.isprintable() for ch in fragment):
        return f"'{fragment}'"
    return "'" + fragment.encode("unicode_escape").decode("ascii") + "'"


def _hint(text: str, pos: int, end: int, got: str, expected: set[str]) -> SpecError | None:
    """Messages for the mistakes people actually make, before the generic one."""
    here = text[pos:pos + 3]
    if here.startswith("=>") or (here.startswith(">") and text[pos - 1:pos] == "="):
        start = pos if here.startswith("=>") else pos - 1
        return SpecError("write '->' (or '→') before the result, not '=>'", text, start, start + 2)
    if here.startswith("..."):
        return SpecError("'...' (an ellipsis) is not supported: write the dims out", text, pos, pos + 3)
    line_start = text.rfind("\n", 0, pos) + 1
    if re.match(r"\s*mesh\b", text[line_start:pos]) and "COMMA" in expected and got.startswith("'"):
        return SpecError("separate mesh axes with ',', as in 'mesh X=2, Y=4'", text, pos, end)
    if got in ("'x'", "'X'", "'×'") and "OPERATOR" in expected:
        return SpecError(f"use '@' or '*' between operands ({got} reads as a name)", text, pos, end)
    if here[:1] == "-" and here[1:2].isdigit() and "INT" in expected:
        return SpecError("a dim's size must be a positive integer", text, pos, pos + 2)
    open_at = _unclosed(text, pos, "[", "]")
    if open_at is not None and "RSQB" in expected and "COMMA" in expected and (
            got in ("the end of the spec", "'->'", "a new line", "';'") or text[pos:end] in ("@", "*", "·", "•", "×")):
        return SpecError("this '[' is never closed", text, open_at)
    if got == "']'" and open_at is None:
        return SpecError("']' has no matching '['", text, pos, end)
    if got == "'['" and "LSQB" not in expected:
        if re.search(r"_\s+\w+\s*$", text[:pos]):
            return SpecError("the '_' after an operator takes the next name as the contracted dim: "
                             "write '*_D bf16[...]', or '*' alone", text, pos, end)
        return SpecError("a tensor needs a dtype or a name before '[', e.g. bf16[B, D]", text, pos, end)
    if {"ARROW", "OPERATOR"} <= expected and got not in ("the end of the spec", "a new line", "';'"):
        return SpecError(f"expected an operator ('@', '*') or '->' before {got}", text, pos, end)
    if got in ("the end of the spec", "a new line", "';'") and _ends_with_arrow(text[:pos]):
        return SpecError("missing the result after the arrow, e.g. '-> bf16[B, F]'", text, pos, end)
    if "ARROW" in expected and got in ("the end of the spec", "a new line", "';'"):
        return SpecError("missing '->' and the result, e.g. '-> bf16[B, F]'", text, pos, end)
    if got == "'_'" and expected <= {"NAME", "TEXT_OPEN", "LSQB", "INT", "_NEWLINE", "_SEMI"}:
        return SpecError("a name cannot start with '_'", text, pos, end)
    return None


def _ends_with_arrow(before: str) -> bool:
    return before.rstrip().endswith(("->", "→", "⟶", "\\rightarrow", "\\longrightarrow", "\\to"))


def _unclosed(text: str, pos: int, opening: str, closing: str) -> int | None:
    """Offset of the last `opening` before pos on the same statement with no `closing`."""
    depth_open: list[int] = []
    line_start = max(text.rfind("\n", 0, pos), text.rfind(";", 0, pos)) + 1
    for i in range(line_start, min(pos, len(text))):
        if text[i] == opening:
            depth_open.append(i)
        elif text[i] == closing and depth_open:
            depth_open.pop()
    return depth_open[-1] if depth_open else None


def _words(expected: set[str]) -> str:
    if {"COMMA", "RSQB"} <= expected:
        # Inside a dim list, '=' (D=4096) and '_' (D_X) are allowed but rarely what was meant.
        expected = expected - {"EQUALS", "UNDERSCORE"}
    names = [n for n in _ORDER if n in expected] + sorted(n for n in expected if n not in _ORDER)
    words = [_WORDS.get(n, n.lower()) for n in names]
    words = list(dict.fromkeys(words))[:5]
    if not words:
        return "something else"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]
