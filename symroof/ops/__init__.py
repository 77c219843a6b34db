"""The op kinds, one module each, registered in one table.

To add a kind: write a module here with a `Kind` subclass and `KIND = ...`, add it to
`_MODULES`, give its written form a grammar rule if no existing form fits (the prefix
form `word_D x, y -> z` and the call form `word(x, y) -> z` already parse any word), and
test it (tests/ops/test_ops.py).
"""

from __future__ import annotations

from . import (
    contraction,
    conv,
    copy,
    cumulative,
    elementwise,
    gather,
    norm,
    pad,
    reduce,
    scatter,
    select,
    softmax,
    unary,
)
from .base import MATRIX, NONE, VECTOR, Counted, Kind, ShapeError

_MODULES = (contraction, conv, elementwise, unary, select, reduce, cumulative, softmax, norm, gather, scatter, pad,
            copy)

KINDS: dict[str, Kind] = {m.KIND.name: m.KIND for m in _MODULES}

# The word a statement starts with -> the kinds written with it (`max_D x` reduces,
# `max(a, b)` is elementwise: the operands and the subscript tell them apart).
WORDS: dict[str, tuple[Kind, ...]] = {}
for _kind in KINDS.values():
    for _word in _kind.words:
        WORDS[_word] = (*WORDS.get(_word, ()), _kind)

# An infix operator other than the einsum's own '@' and '*' -> (its kind, its word).
INFIX: dict[str, tuple[Kind, str]] = {}
for _symbol, _word in elementwise.SYMBOLS.items():
    if _symbol in elementwise.KIND.infix:
        INFIX[_symbol] = (elementwise.KIND, _word)


def kind_of(name: str) -> Kind:
    return KINDS[name]


def table() -> list[str]:
    """The conventions page's table (docs/conventions.md) of what each op counts: one markdown row per kind and count,
    the words that share it together.

    Examples:
        >>> table()[0]
        '| kind | written | unit | counts |'
    """
    rows: dict[tuple[str, str, str], list[str]] = {}
    for kind in KINDS.values():
        for word in kind.words or ("*, @, einsum",):
            rows.setdefault((kind.name, kind.unit, kind.describe(word)), []).append(word)
    return ["| kind | written | unit | counts |", "|---|---|---|---|"] + [
        f"| {name} | {', '.join(f'`{w}`' for w in words)} | {unit} | {what} |"
        for (name, unit, what), words in rows.items()]


__all__ = ["INFIX", "KINDS", "table", "MATRIX", "NONE", "VECTOR", "WORDS", "Counted", "Kind", "ShapeError", "kind_of"]
