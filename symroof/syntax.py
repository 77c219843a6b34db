"""Spec text -> the statements as written (names, sizes, operators, with their positions).

This layer knows the grammar and nothing of what the names mean: whether `X` in
`X[B, D]` is a dtype or a tensor's name, which dims are summed, and every other
question of meaning is settled in `resolve.py`, which uses the positions kept here
to point at the spot. Lark's own exceptions never leave this module: every syntax
error becomes a `SpecError` in words, with a caret.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import re
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .errors import SpecError
from .resources import resource_path

# Longer specs are refused before parsing: nothing a person writes by hand is this long,
# and it keeps every later step (sympy included) quick.
MAX_SPEC_CHARS = 200_000
# Sizes beyond this are not dims of any real tensor (and Python's int() refuses 4300 digits).
MAX_SIZE_DIGITS = 18
# No spec nests braces deeper than a few levels (\text{\text{int8[B]}}); deeper is refused.
MAX_DEPTH = 16

Span = tuple[int, int]


@dataclass
class WDim:
    """A dim as written: a name (`B`), a literal size (`4096`) or both (`D=4096`)."""

    name: str | None
    value: int | None
    axes: tuple[str, ...]
    span: Span
    axes_span: Span | None = None

    @property
    def text(self) -> str:
        if self.name is None:
            return str(self.value)
        return self.name if self.value is None else f"{self.name}={self.value}"


@dataclass
class WTensor:
    """A tensor as written. `head` is the word before '[' (a dtype or a name); einsum
    terms have none."""

    head: str | None
    head_span: Span | None
    name: str | None
    name_span: Span | None
    dims: list[WDim]
    span: Span
    annotations: list["WAnnotation"] = field(default_factory=list)


@dataclass
class WOp:
    """An operator between operands: its symbol and the subscript it names, if any."""

    symbol: str
    subscript: list[tuple[str, Span]] | None
    span: Span


@dataclass
class WAnnotation:
    """One `{...}` item after the result, such as `compute=fp8` or `U_X`."""

    key: str
    subscript: list[tuple[str, Span]] | None
    value: str | None
    span: Span


@dataclass
class WStatement:
    """One contraction: operands joined by operators, then the result (whose `{...}`
    annotations, such as `compute=fp8`, speak for the whole statement)."""

    kind: str  # "spec", "book" or "einsum": which of the written forms it came in
    operands: list[WTensor]
    ops: list[WOp]
    output: WTensor
    span: Span
    text: str = field(repr=False, default="")


@dataclass
class WMeshAxis:
    name: str
    size: int
    link: str | None
    span: Span
    link_span: Span | None


@dataclass
class WMesh:
    """`mesh X=2, Y=4@dcn`."""

    axes: list[WMeshAxis]
    span: Span


@dataclass
class WCollective:
    """`AllGather_X bf16[I_X, J] -> bf16[I, J]`: its kind, subscript, input and output."""

    kind: str
    kind_span: Span
    subscript: list[tuple[str, Span]]
    subscript_span: Span
    input: WTensor
    output: WTensor
    span: Span


COLLECTIVES = ("AllGather", "ReduceScatter", "AllReduce", "AllToAll")

_WORDS = {
    "ARROW": "'->'",
    "OPERATOR": "an operator ('@', '*' or '*_D')",
    "NAME": "a name",
    "INT": "a size",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
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
          "UNDERSCORE", "LBRACE", "RBRACE", "TEXT_OPEN", "_SEMI", "_NEWLINE", "$END"]


@functools.cache
def _parser() -> Lark:
    grammar = resource_path("symroof.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True,
                cache=_cache_file(grammar))


def _cache_file(grammar: str) -> str | bool:
    """Where Lark keeps the built parser between runs (it halves the cold start): a
    directory of the user's own, never a shared temporary one, since Lark unpickles it."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(base) / "symroof"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK) or (hasattr(os, "getuid") and folder.stat().st_uid != os.getuid()):
            return False
    except OSError:
        return False
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()[:16]
    return str(folder / f"parser-{digest}.lark")


def read(text: str) -> list[WStatement]:
    """Parse spec text into its statements as written.

    Raises:
        SpecError: on any syntax error, with its position.

    Examples:
        >>> [s.kind for s in read("bd,df->bf; x: bf16[N] * y: bf16[N] -> bf16[]")]
        ['einsum', 'spec']
        >>> read("bf16[B, D] @ bf16[D F] -> bf16[B, F]")
        Traceback (most recent call last):
        ...
        symroof.errors.SpecError: expected ',' or ']', got 'F' (column 21)
          bf16[B, D] @ bf16[D F] -> bf16[B, F]
                              ^
    """
    if not isinstance(text, str):
        raise SpecError(f"a spec is text, not {type(text).__name__}")
    text = normalize(text)
    if len(text) > MAX_SPEC_CHARS:
        raise SpecError(f"spec is {len(text):,} characters long; symroof reads at most {MAX_SPEC_CHARS:,}")
    if not _has_content(text):
        raise SpecError("empty spec: write a contraction, e.g. bf16[B, D] @ bf16[D, F] -> bf16[B, F]")
    _check_depth(text)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(text, err) from None
    return [_statement(child, text) for child in tree.children]


def normalize(text: str) -> str:
    """The text the parser reads: a byte-order mark dropped, line endings made '\n', and
    compatibility characters folded (NFKC: full-width brackets, ligatures, the letter-like
    symbols Python itself folds in names), so that a name means one thing everywhere."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return unicodedata.normalize("NFKC", text)


def _check_depth(text: str) -> None:
    """Refuse braces nested deeper than any spec needs (`\\text{\\text{int8[B]}}` is 2),
    before the parse tree is walked: a thousand `\\text{` would exhaust Python's stack."""
    depth, comment = 0, False
    for i, ch in enumerate(text):
        if comment or ch == "#":
            comment = ch != "\n"
            depth = 0 if ch == "\n" else depth
        elif ch == "{":
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(f"'{{' nested more than {MAX_DEPTH} deep; symroof reads at most "
                                f"{MAX_DEPTH} levels", text, i, i + 1)
        elif ch == "}":
            depth = max(depth - 1, 0)
        elif ch == "\n":
            depth = 0


def _has_content(text: str) -> bool:
    return any(line.split("#", 1)[0].strip(" \t\r\f;$") for line in text.splitlines())


# ---- parse tree -> written statements ------------------------------------------------

def _span(node) -> Span:
    if isinstance(node, Token):
        return (node.start_pos, node.end_pos)
    return (node.meta.start_pos, node.meta.end_pos)


def _statement(tree: Tree, text: str):
    kind = tree.data
    if kind == "contraction":
        *body, _arrow, output = tree.children
        operands = [_operand(node, text) for node in body[0::2]]
        ops = [_op(node) for node in body[1::2]]
        return WStatement("spec", operands, ops, _operand(output, text), _span(tree), text)
    if kind == "book_contraction":
        return _book(tree, text)
    if kind == "mesh":
        return _mesh(tree, text)
    if kind == "collective":
        return _collective(tree, text)
    return _einsum(tree, text)


def _book(tree: Tree, text: str) -> WStatement:
    children = tree.children
    colon = next(i for i, c in enumerate(children) if isinstance(c, Token) and c.type == "COLON")
    names = children[:colon:2]
    ops = [_op(node) for node in children[1:colon:2]]
    types = [c for c in children[colon + 1:] if isinstance(c, Tree) and c.data == "tensor"]
    output = children[-1]
    if len(types) != len(names):
        last = types[-1]
        raise SpecError(f"{len(names)} operand names but {len(types)} "
                        f"type{'s' if len(types) != 1 else ''}: give one type per name",
                        text, *_span(types[0] if len(types) > len(names) else last))
    operands = []
    for name, node in zip(names, types):
        tensor = _tensor(node, text)
        tensor.name, tensor.name_span = str(name), _span(name)
        operands.append(tensor)
    return WStatement("book", operands, ops, _operand(output, text), _span(tree), text)


def _mesh(tree: Tree, text: str) -> WMesh:
    word, *axes = tree.children
    if str(word) != "mesh":
        hint = "; did you mean 'mesh'?" if difflib.get_close_matches(str(word), ["mesh"]) else ""
        raise SpecError(f"'{word} X=...' is not a statement{hint}", text, *_span(word))
    found = []
    for node in axes:
        if not isinstance(node, Tree):
            continue
        name, _eq, size, at, link = node.children
        if at is not None and str(at) != "@":
            raise SpecError(f"write the link of axis {name} as '@ici', '@dcn' or '@pcie'", text, *_span(at))
        found.append(WMeshAxis(str(name), _size_of(size, text), None if link is None else str(link),
                               _span(node), None if link is None else _span(link)))
    return WMesh(found, _span(tree))


def _collective(tree: Tree, text: str) -> WCollective:
    word, subscript, source, _arrow, target = tree.children
    if str(word) not in COLLECTIVES:
        close = difflib.get_close_matches(str(word), COLLECTIVES, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f" (collectives: {', '.join(COLLECTIVES)})"
        raise SpecError(f"unknown collective '{word}'{hint}", text, *_span(word))
    return WCollective(str(word), _span(word), _subscript(subscript), _span(subscript),
                       _operand(source, text), _operand(target, text), _span(tree))


def _einsum(tree: Tree, text: str) -> WStatement:
    terms = [c for c in tree.children if isinstance(c, Token) and c.type == "NAME"]
    has_output = tree.children[-1] is not None
    inputs = terms[:-1] if has_output else terms
    arrow = next(c for c in tree.children if isinstance(c, Token) and c.type == "ARROW")
    output_term = terms[-1] if has_output else Token("NAME", "", start_pos=arrow.end_pos,
                                                      end_pos=arrow.end_pos)
    # Einsum terms are joined by plain '*': the commas stand where the operators would.
    commas = [WOp("*", None, _span(c)) for c in tree.children if isinstance(c, Token) and c.type == "COMMA"]
    return WStatement("einsum", [_einsum_term(t) for t in inputs], commas, _einsum_term(output_term),
                      _span(tree), text)


def _einsum_term(token: Token) -> WTensor:
    start = token.start_pos
    dims = [WDim(ch, None, (), (start + i, start + i + 1)) for i, ch in enumerate(str(token))]
    return WTensor(None, None, None, None, dims, (start, max(token.end_pos, start)))


def _operand(tree: Tree, text: str) -> WTensor:
    name, _colon, tensor_node, annotations = tree.children
    tensor = _tensor(tensor_node, text)
    if name is not None:
        tensor.name, tensor.name_span = str(name), _span(name)
        tensor.span = (name.start_pos, tensor.span[1])
    tensor.annotations = _annotations(annotations)
    return tensor


def _tensor(tree: Tree, text: str) -> WTensor:
    first = tree.children[0]
    if isinstance(first, Token) and first.type == "TEXT_OPEN":
        if isinstance(tree.children[1], Tree) and tree.children[1].data == "tensor":
            inner = _tensor(tree.children[1], text)  # \text{int8[B, D]}
            inner.span = _span(tree)
            return inner
        _open, head, _close, _lsqb, dims, _rsqb = tree.children  # \text{int8}[B, D]
    else:
        head, _lsqb, dims, _rsqb = tree.children
    head_text = "_".join(str(c) for c in head.children if c.type == "NAME")
    dim_list = [] if dims is None else [_dim(d, text) for d in dims.children if isinstance(d, Tree)]
    return WTensor(head_text, _span(head), None, None, dim_list, _span(tree))


def _size_of(token: Token, text: str) -> int:
    digits = str(token)
    if len(digits.lstrip("0")) > MAX_SIZE_DIGITS:
        raise SpecError(f"a size of {len(digits)} digits is not one symroof can cost "
                        f"(at most {MAX_SIZE_DIGITS} digits)", text, *_span(token))
    return int(digits)


def _dim(tree: Tree, text: str) -> WDim:
    size, subscript, equals, bound = tree.children
    parts = size.children
    if size.data == "named_size":
        name, value = str(parts[0]), None if bound is None else _size_of(bound, text)
    else:
        if bound is not None:
            raise SpecError("a literal size has no '=': write D=4096 to name a dim and give it a size",
                            text, *_span(equals))
        name, value = None, _size_of(parts[0], text)
    axes: tuple[str, ...] = ()
    axes_span = None
    if subscript is not None:
        items = _subscript(subscript)
        axes = tuple(item for item, _ in items)
        axes_span = _span(subscript)
    return WDim(name, value, axes, _span(tree), axes_span)


def _subscript(tree: Tree) -> list[tuple[str, Span]]:
    return [(str(tok), _span(tok)) for tok in tree.children
            if isinstance(tok, Token) and tok.type in ("NAME", "INT")]


def _op(tree: Tree) -> WOp:
    symbol, subscript = tree.children
    items = None if subscript is None else _subscript(subscript)
    return WOp(str(symbol), items, _span(tree))


def _annotations(tree: Tree | None) -> list[WAnnotation]:
    if tree is None:
        return []
    found = []
    for node in tree.children:
        if not isinstance(node, Tree):
            continue
        key, subscript, _equals, value = node.children
        value_text = None if value is None else "_".join(
            str(c) for c in value.children if c.type == "NAME")
        found.append(WAnnotation(str(key), None if subscript is None else _subscript(subscript),
                                 value_text, _span(node)))
    return found


# ---- syntax errors in words ------------------------------------------------------------

def _syntax_error(text: str, err: UnexpectedInput) -> SpecError:
    pos = getattr(err, "pos_in_stream", None)
    if isinstance(err, UnexpectedToken) and err.token.type != "$END":
        token = err.token
        pos, end, got = token.start_pos, token.end_pos, _show(str(token))
        if token.type == "_NEWLINE":
            got = "a new line"
        expected = _acceptable(err)
    elif isinstance(err, UnexpectedCharacters):
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
    if open_at is not None and "RSQB" in expected and "COMMA" in expected:
        if got == "the end of the spec" or got in ("'->'", "a new line", "';'") or \
                text[pos:end] in ("@", "*", "·", "•", "×"):
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
