"""Spec text -> the statements as written (names, sizes, operators, with their positions).

This layer knows the grammar and nothing of what the names mean: whether `X` in
`X[B, D]` is a dtype or a tensor's name, which dims are summed, and every other
question of meaning is settled in `resolve.py`, which uses the positions kept here
to point at the spot. Lark's own exceptions never leave this module: every syntax
error becomes a `SpecError` in words, with a caret (the words are `syntax_errors.py`'s).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import unicodedata

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from ..errors import SpecError
from ..ir import subscripted
from ..resources import resource_path, user_cache
from .chunks import chunks, moved
from .syntax_errors import syntax_error

# The statements this module builds; `parse.py` imports WMesh from here.
from .written import (
    Span,
    WAnnotation,
    WApply,
    WArrays,
    WCollective,
    WDim,
    WFused,
    WMesh,
    WMeshAxis,
    WOp,
    Written,
    WStatement,
    WTensor,
)

# Longer specs are refused before parsing: nothing a person writes by hand is this long,
# and it keeps every later step (sympy included) quick.
MAX_SPEC_CHARS = 200_000
# Sizes beyond this are not dims of any real tensor (and Python's int() refuses 4300 digits).
MAX_SIZE_DIGITS = 18
# No spec nests braces deeper than a few levels (\text{\text{int8[B]}}); deeper is refused.
MAX_DEPTH = 16

COLLECTIVES = ("AllGather", "ReduceScatter", "AllReduce", "AllToAll", "Permute")


@functools.cache
def _parser() -> Lark:
    grammar = resource_path("symroof.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", maybe_placeholders=True,
                cache=_cache_file(grammar))


def _cache_file(grammar: str) -> str | bool:
    """Where Lark keeps the built parser between runs (it halves the cold start): a
    directory of the user's own, never a shared temporary one, since Lark unpickles it."""
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()[:16]
    found = user_cache(f"parser-{digest}.lark")
    return str(found) if found is not None else False


def read(text: str) -> list[Written]:
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
        return [w for at, chunk in chunks(text) if _has_content(chunk) for w in moved(list(_chunk(chunk)), at, text)]
    except (SpecError, UnexpectedInput):
        pass  # the whole text's parse says where, in the text as written
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise syntax_error(text, err) from None
    return [_statement(child, text) for child in tree.children if isinstance(child, Tree)]


@functools.lru_cache(maxsize=8192)
def _chunk(chunk: str) -> tuple[Written, ...]:
    """One chunk's statements, read as if it were the whole text (chunks.py)."""
    return tuple(_statement(child, chunk) for child in _parser().parse(chunk).children if isinstance(child, Tree))


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

def _span(node: Token | Tree) -> Span:
    """Where a token or a subtree is in the text: from its first token to its last
    (found here rather than by Lark's propagate_positions, which costs every parse a
    third of its time for spans only an error asks for)."""
    first, last = _edge(node, 0), _edge(node, -1)
    # Lark types a token's offsets as optional: only a token made by hand lacks them.
    assert first is not None and last is not None and first.start_pos is not None and last.end_pos is not None
    return (first.start_pos, last.end_pos)


def _edge(node: Token | Tree | None, end: int) -> Token | None:
    """The first (end=0) or last (end=-1) token of a subtree."""
    if node is None or isinstance(node, Token):
        return node
    children = node.children if end == 0 else reversed(node.children)
    for child in children:
        found = _edge(child, end)
        if found is not None:
            return found
    return None


def _statement(tree: Tree, text: str) -> Written:
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
    if kind == "prefixed":
        return _prefixed(tree, text)
    if kind == "call":
        return _call(tree, text)
    if kind == "fused":
        return _fused(tree, text)
    if kind == "arrays":
        return WArrays([_operand(node, text) for node in tree.children if isinstance(node, Tree)], _span(tree))
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
        found.append(WMeshAxis(str(name), None if size is None else _size_of(size, text),
                               None if link is None else str(link), _span(node),
                               None if link is None else _span(link)))
    return WMesh(found, _span(tree))


def _prefixed(tree: Tree, text: str) -> WCollective | WApply:
    word, subscript, *rest = tree.children
    operands = [_operand(node, text) for node in rest if isinstance(node, Tree)]
    *inputs, output = operands
    if str(word) in COLLECTIVES:
        if subscript is None:
            raise SpecError(f"{word} names the mesh axes it runs over: {subscripted(str(word), ('X',))}", text,
                            *_span(word))
        if len(inputs) != 1:
            raise SpecError(f"{word} moves one tensor", text, *inputs[1].span)
        return WCollective(str(word), _span(word), _subscript(subscript), _span(subscript),
                           inputs[0], output, _span(tree))
    return WApply(str(word), _span(word), None if subscript is None else _subscript(subscript), "prefix",
                  inputs, output, _span(tree))


def _call(tree: Tree, text: str) -> WApply:
    word, subscript, *rest = tree.children
    operands = [_operand(node, text) for node in rest if isinstance(node, Tree)]
    return WApply(str(word), _span(word), None if subscript is None else _subscript(subscript), "call",
                  operands[:-1], operands[-1], _span(tree))


def _fused(tree: Tree, text: str) -> WFused:
    word = tree.children[0]
    if str(word) != "fused":
        hint = "; did you mean 'fused'?" if difflib.get_close_matches(str(word), ["fused"]) else ""
        raise SpecError(f"'{word} {{' is not a statement{hint} (a block of one kernel is 'fused {{ ... }}')",
                        text, *_span(word))
    inner = [c for c in tree.children[1:] if isinstance(c, Tree)]
    statements: list[WStatement | WApply] = []
    for child in inner:
        statement = _statement(child, text)
        if not isinstance(statement, (WStatement, WApply)):
            what = "a fused block" if isinstance(statement, WFused) else \
                "a mesh line" if isinstance(statement, WMesh) else \
                "an array with no op" if isinstance(statement, WArrays) else "a collective"
            raise SpecError(f"{what} cannot go inside a fused block: it holds ops that run as one kernel",
                            text, *_span(child))
        statements.append(statement)
    return WFused(statements, _span(word), _span(tree))


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
    start, end = _span(token)
    dims = [WDim(ch, None, (), (start + i, start + i + 1)) for i, ch in enumerate(str(token))]
    return WTensor(None, None, None, None, dims, (start, max(end, start)))


def _operand(tree: Tree, text: str) -> WTensor:
    name, _colon, tensor_node, annotations = tree.children
    tensor = _tensor(tensor_node, text)
    if name is not None:
        tensor.name, tensor.name_span = str(name), _span(name)
        tensor.span = (_span(name)[0], tensor.span[1])
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
    head_text = "_".join(str(c) for c in head.children if isinstance(c, Token) and c.type == "NAME")
    dim_list = [] if dims is None else [_dim(d, text) for d in dims.children if isinstance(d, Tree)]
    return WTensor(head_text, _span(head), None, None, dim_list, _span(tree))


def _size_of(token: Token | Tree, text: str) -> int:
    assert isinstance(token, Token)  # an INT: the grammar makes it a token, lark's types cannot say so
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
            str(c) for c in value.children if isinstance(c, Token) and c.type == "NAME")
        found.append(WAnnotation(str(key), None if subscript is None else _subscript(subscript),
                                 value_text, _span(node)))
    return found
