"""Programs with structure: `let` relations, `param`/`embedding`/`cache` declarations and
`repeat N { ... }` blocks around ordinary spec statements.

    let D = N*H, F = 28672            sizes and relations (relations.py)
    embedding E: bf16[V, D]           a parameter counted apart (the vocabulary's)
    repeat L {                        the block runs L times: costed once, multiplied
      param Wq: bf16[D, N, H]         a parameter (its count, bytes, gradients)
      cache Kc: bf16[B, S, K, H]      a KV cache (its bytes per token)
      part attention {                a named part, for the split of a step's time
        bf16[B, T, D] *_D bf16[D, N, H] -> bf16[B, T, N, H]
      }
    }

A program may end with its backward pass written out, `backward {` ... `}` at the left
margin (the templates write one for training under a parallelism strategy): it is read as
a program of its own (`Structured.backward`), sharing the `let` and `mesh` lines.

Structure lines stand on their own lines. They are read here and blanked out (replaced
by spaces, so every offset stays where it was) before the rest goes to the spec parser;
each statement then belongs to the `repeat` blocks its position lies in, and errors in it
point at the spot in the whole text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import sympy

from .. import dtypes
from ..errors import SpecError
from ..ir import Mesh, Program, dim_symbol
from ..sharding.lowering import check_layout
from . import source
from .parsing import parse_mesh
from .relations import expression, resolve_relations
from .resolve import resolve
from .syntax import MAX_SIZE_DIGITS, normalize, read
from .written import Span, WAnnotation, WApply, WCollective, WDim, WFused, WMesh, WMeshAxis, WOp, WStatement, WTensor

DECLARATIONS = ("param", "embedding", "cache")  # embedding: a parameter counted apart
_NAME = r"[^\W\d_][^\W_]*"
_REPEAT = re.compile(r"repeat\b(?P<count>[^{]*)\{\s*$")
_PART = re.compile(rf"part\s+(?P<name>{_NAME})\s*\{{\s*$")
_DECLARED = re.compile(rf"\s*(?P<name>{_NAME})\s*:\s*(?P<dtype>[\w]+)\s*\[(?P<dims>[^\]]*)\]\s*(,|$)")
_DIM = re.compile(rf"(?P<dim>{_NAME}|\d+)(?:_(?P<sub>\{{[^}}]*\}}|[^\W_]+))?")


def _dim_items(text: str) -> list[str]:
    """A declared tensor's dims, split at the commas outside braces (D_{X,Y} is one)."""
    items, depth, current = [], 0, ""
    for ch in text:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    return [*items, current]


@dataclass(frozen=True)
class Declared:
    """A declared tensor: `word` is param, embedding or cache; `count` how many there
    are (the product of the enclosing repeat counts); `block` the innermost repeat
    block it is declared in (an index into `Structured.blocks`), or None."""

    word: str
    name: str
    dtype: dtypes.DType
    dims: tuple[sympy.Expr, ...]
    count: sympy.Expr
    block: int | None
    split: sympy.Expr = sympy.Integer(1)  # the chips its sharded dims split it over (bf16[D_X, F] on X=8: 8)
    axes: tuple[tuple[str, ...], ...] = ()  # each dim's mesh axes (bf16[D_X, F]: (("X",), ()))
    at: int | None = None  # the offset of its name in the program's text (for errors)

    @property
    def elements(self) -> sympy.Expr:
        """Its elements, all of them (one copy)."""
        return sympy.Mul(*self.dims)

    @property
    def bytes(self) -> sympy.Expr:
        return self.elements * self.dtype.bytes

    @property
    def local_bytes(self) -> sympy.Expr:
        """The bytes each chip holds of it (its shard; a replica where it is not split)."""
        return self.bytes / self.split

    def __str__(self) -> str:
        return f"{self.word} {self.name}: {self.dtype}[{', '.join(str(d) for d in self.dims)}]"


@dataclass(frozen=True)
class Block:
    """A `repeat` block: its count, the statements in it (indices into the program's
    statements, nested blocks' included) and the block it sits in."""

    count: sympy.Expr
    statements: tuple[int, ...]
    parent: int | None
    at: int | None = None  # the offset of its count in the program's text (for errors)


@dataclass(frozen=True)
class Structured:
    """A program with structure. `counts[i]` is how many times statement i runs (the
    product of its repeat blocks' counts); `relations` each `let` name's expression in
    the dims no `let` defines."""

    text: str
    program: Program
    counts: tuple[sympy.Expr, ...]
    parts: tuple[str | None, ...]  # each statement's innermost `part`, None outside any
    blocks: tuple[Block, ...]
    declared: tuple[Declared, ...]
    relations: dict[sympy.Symbol, sympy.Expr]
    lets: tuple[tuple[str, sympy.Expr], ...]
    backward: Structured | None = None  # the `backward { ... }` section, read as a program of its own


def read_structured(text: str | source.Program, dtype: str = "bf16",
                    mesh: Mesh | str | dict | None = None) -> Structured:
    """Read a program with structure (see the module docstring): its text, or the program
    as objects (`source.Program`, which is resolved as it is, with no parse: `read_source`).

    Raises:
        SpecError: with the position of the first problem.
    """
    if isinstance(text, source.Program):
        return _read_source(text, dtype, mesh) if mesh is None or isinstance(mesh, Mesh) else \
            read_source(text, dtype, mesh)
    if not isinstance(text, str):
        raise SpecError(f"a program is text, not {type(text).__name__}")
    text = normalize(text)
    forward, backward = _sections(text)
    if backward is not None:
        return _read(text, forward, dtype, mesh, _read(text, backward, dtype, mesh, None))
    return _read(text, text, dtype, mesh, None)


def _sections(text: str) -> tuple[str, str | None]:
    """The forward program and the `backward {` ... `}` section (None without one), each
    the whole text with the other's statements blanked out, so that offsets stay where
    they are: the backward keeps the `let` and `mesh` lines it shares with the forward."""
    lines = text.split("\n")
    start = next((k for k, line in enumerate(lines) if re.fullmatch(r"backward\s*\{\s*(#.*)?", line.strip())), None)
    if start is None:
        return text, None
    if lines[start] != lines[start].lstrip():
        raise SpecError("a backward section starts at the left margin: 'backward {' on a line of its own",
                        text, sum(len(line) + 1 for line in lines[:start]))
    end = next((k for k in range(len(lines) - 1, start, -1) if lines[k].rstrip() == "}"), None)
    if end is None or any(line.split("#", 1)[0].strip() for line in lines[end + 1:]):
        raise SpecError("a backward section ends the program, with '}' alone on its last line", text,
                        sum(len(line) + 1 for line in lines[:start]))

    def blank(keep: Callable[[int, str], bool]) -> str:
        return "\n".join(line if keep(k, line) else " " * len(line) for k, line in enumerate(lines))

    shared = ("let ", "mesh ", "#")
    forward = blank(lambda k, line: k < start)
    backward = blank(lambda k, line: start < k < end or line.lstrip().startswith(shared))
    return forward, backward


@dataclass
class _Layout:
    """The structure of a program, read from its text (`_Scan`) or its objects (`_Walk`):
    each statement's repeat blocks and part, the blocks, the declarations and the lets."""

    blocks_of: list[list[int]]  # each statement's enclosing repeat blocks, outermost first
    parts: list[str | None]  # each statement's innermost part
    regions: list[tuple[sympy.Expr, int | None]]  # each repeat block's count and parent block
    count_at: list[int | None]  # each repeat block's count's offset in the text
    # (word, name, dtype, dims, each dim's axes, enclosing blocks, offset of the name)
    declared: list[tuple[str, str, dtypes.DType, tuple[sympy.Expr, ...], tuple[tuple[str, ...], ...], list[int],
                         int | None]]
    lets: list[tuple[str, sympy.Expr]]
    let_spans: list[tuple[str, int, int]]


def _read(text: str, blanked_forward: str, dtype: str, mesh: Mesh | str | dict | None,
          backward: Structured | None) -> Structured:
    whole, text = text, blanked_forward
    scan = _Scan(text)
    blanked = scan.run()
    written = read(blanked)
    regions = scan.regions
    statements = [w for w in written if not isinstance(w, WMesh)]
    layout = _Layout(
        [[k for k, (lo, hi, _, _) in enumerate(regions) if lo <= w.span[0] < hi] for w in statements],
        [next((name for lo, hi, name in reversed(scan.parts) if lo <= w.span[0] < hi), None) for w in statements],
        [(count, parent) for _, _, count, parent in regions], list(scan.count_at),
        [(word, name, dt, dims, axes, scan.enclosing(at), at) for word, name, dt, dims, axes, at in scan.declared],
        scan.lets, scan.let_spans)
    return _assemble(whole, text, blanked, written, layout, dtype, mesh, backward)


def _assemble(whole: str, text: str, blanked: str, written: list, layout: _Layout, dtype: str,
              mesh: Mesh | str | dict | None, backward: Structured | None) -> Structured:
    """The structured program of its statements as written and its structure; the structure's
    errors point into `text`, the statements' into `blanked` (the text the statements were
    read from: the structure lines blanked out)."""
    program = resolve(written, blanked, dtype, parse_mesh(mesh), check=check_layout)
    if program.mesh is not None and not program.mesh.deferred:  # a family's: sized member by member
        program.mesh.number("a program with let, repeat or param lines (a model)")
    regions = layout.regions
    counts = tuple(sympy.Mul(*(regions[k][0] for k in inside)) for inside in layout.blocks_of)
    blocks = tuple(Block(count, tuple(i for i, inside in enumerate(layout.blocks_of) if k in inside), parent,
                         layout.count_at[k]) for k, (count, parent) in enumerate(regions))
    declared = tuple(Declared(word, name, dt, dims, sympy.Mul(*(regions[k][0] for k in enclosing)),
                              _innermost(enclosing),
                              _split(tuple(a for each in axes for a in each), program.mesh, text, at or 0), axes, at)
                     for word, name, dt, dims, axes, enclosing, at in layout.declared)
    names = [d.name for d in declared]
    for d in declared:
        if names.count(d.name) > 1:
            raise SpecError(f"{d.name} is declared twice", text, d.at)
    relations = resolve_relations(layout.lets, layout.let_spans)
    _check_declared(declared, relations, program.mesh, text)
    _check_relations(layout.lets, layout.let_spans, relations)
    for block in blocks:
        _check_count(block.count, block.count.xreplace(relations), text, block.at)
    return Structured(whole, program, counts, tuple(layout.parts), blocks, declared, relations, tuple(layout.lets),
                      backward)


@functools.lru_cache(maxsize=64)
def _read_source(p: source.Program, dtype: str, mesh: Mesh | None) -> Structured:
    """The planner asks for one program again and again (a strategy under each ZeRO stage, a
    pipeline's stages under each schedule, a family's on its mesh): frozen objects, resolved
    once."""
    return read_source(p, dtype, mesh)


def read_source(p: source.Program, dtype: str = "bf16", mesh: Mesh | str | dict | None = None) -> Structured:
    """A program with structure given as objects (a model template's), resolved as it is:
    the same `Structured` as `read_structured(str(p))`, without reading any text.

    Raises:
        SpecError: as reading its text would, with the position in the text (the text is
            read for the message: objects carry no positions).
    """
    text = str(p)
    try:
        forward = tuple(item for item in p.items if not isinstance(item, source.Backward))
        back = [item for item in p.items if isinstance(item, source.Backward)]
        if len(back) > 1 or (back and p.items[-1] is not back[0]):
            raise SpecError("a backward section ends the program")
        behind = None
        if back:  # it shares the forward's let and mesh lines
            shared = tuple(item for item in forward if isinstance(item, (source.Let, source.MeshLine)))
            behind = _walked(text, shared + back[0].body, dtype, mesh, None)
        return _walked(text, forward, dtype, mesh, behind)
    except SpecError as err:
        read_structured(text, dtype, mesh)  # the error as the text has it, with its position
        raise err


def _walked(text: str, items: tuple[source.Item, ...], dtype: str, mesh: Mesh | str | dict | None,
            backward: Structured | None) -> Structured:
    walk = _Walk(text)
    walk.items(items)
    if not walk.statements:
        raise SpecError("a program with structure has no statements")
    return _assemble(text, text, text, walk.written, walk.layout, dtype, mesh, backward)


_AT: Span = (0, 0)  # objects carry no positions: every span is the text's start


class _Walk:
    """One pass over a program's objects: its statements as written (what `syntax.read`
    makes of their text, every span `_AT`) and its structure."""

    def __init__(self, text: str):
        self.text = text
        self.written: list = []
        self.statements: list = []
        self.layout = _Layout([], [], [], [], [], [], [])
        self.stack: list[tuple[str, int | str]] = []  # ("repeat", block) or ("part", name)

    def _blocks(self) -> list[int]:
        return [k for kind, k in self.stack if kind == "repeat" and isinstance(k, int)]

    def items(self, items: tuple[source.Item, ...]) -> None:
        for item in items:
            if isinstance(item, source.Let):
                for name, expr in item.entries:
                    self.layout.lets.append((name, expression(expr, (self.text, 0))))
                    self.layout.let_spans.append((self.text, 0, 0))
            elif isinstance(item, source.MeshLine):
                self.written.append(WMesh([WMeshAxis(a, size, None if link == "ici" else link, _AT,
                                                     None if link == "ici" else _AT)
                                           for a, size, link in item.axes], _AT))
            elif isinstance(item, source.Declare):
                for tensor in item.tensors:
                    self._declare(item.word, tensor)
            elif isinstance(item, source.Repeat):
                count = expression(item.count, (self.text, 0))
                if count.is_number and not count > 0:
                    raise SpecError(f"a repeat count must be positive; this one is {count}")
                blocks = self._blocks()
                self.layout.regions.append((count, blocks[-1] if blocks else None))
                self.layout.count_at.append(None)
                self.stack.append(("repeat", len(self.layout.regions) - 1))
                self.items(item.body)
                self.stack.pop()
            elif isinstance(item, source.Part):
                self.stack.append(("part", item.name))
                self.items(item.body)
                self.stack.pop()
            elif isinstance(item, (source.Contraction, source.Apply, source.Collective, source.Fused)):
                written = _written(item, self.text)
                self.written.append(written)
                self.statements.append(written)
                self.layout.blocks_of.append(self._blocks())
                self.layout.parts.append(next((str(k) for kind, k in reversed(self.stack) if kind == "part"), None))
            elif isinstance(item, source.Backward):
                raise SpecError("a backward section ends the program, at the left margin")

    def _declare(self, word: str, tensor: source.Tensor) -> None:
        dtype = dtypes.lookup(tensor.dtype)
        if dtype is None or tensor.name is None:
            raise SpecError(f"write a declaration as '{word} NAME: dtype[dims]' ({word} W: bf16[D, F])")
        dims = tuple(_declared_dim(d.name, self.text, 0) for d in tensor.dims)
        axes = []
        for d in tensor.dims:
            split = tuple(a.strip() for a in d.axes.split(",")) if "," in d.axes else tuple(d.axes)
            if len(set(split)) < len(split):
                raise SpecError(f"{d} is split over {split[0]} twice")
            axes.append(split)
        self.layout.declared.append((word, tensor.name, dtype, dims, tuple(axes), self._blocks(), None))


def _written(item: source.Contraction | source.Apply | source.Collective | source.Fused,
             text: str) -> WStatement | WApply | WCollective | WFused:
    """A statement as `syntax.read` writes its text (spans aside)."""
    if isinstance(item, source.Contraction):
        return WStatement("spec", [_wtensor(t) for t in item.operands],
                          [WOp(op.symbol, [(s, _AT) for s in op.summed] or None, _AT) for op in item.ops],
                          _wtensor(item.output), _AT, text)
    if isinstance(item, source.Apply):
        items = [(s, _AT) for s in item.subscript] or None
        return WApply(item.word, _AT, items, item.form,
                      [_wtensor(t) for t in item.operands], _wtensor(item.output), _AT)
    if isinstance(item, source.Collective):
        return WCollective(item.kind, _AT, [(s, _AT) for s in item.subscript], _AT, _wtensor(item.input),
                           _wtensor(item.output), _AT)
    return WFused([_inner(s, text) for s in item.statements], _AT, _AT)


def _inner(item: source.Contraction | source.Apply, text: str) -> WStatement | WApply:
    written = _written(item, text)
    assert isinstance(written, (WStatement, WApply))  # a fused block's statements are contractions and ops
    return written


def _wtensor(t: source.Tensor) -> WTensor:
    dims = [WDim(None, int(d.name), (), _AT) if d.name.isdigit() else
            WDim(d.name, None, tuple(a.strip() for a in d.axes.split(",")) if d.axes else (), _AT,
                 _AT if d.axes else None) for d in t.dims]
    kept = [WAnnotation("U", [(t.unreduced, _AT)], None, _AT)] if t.unreduced else []
    return WTensor(t.dtype, _AT, t.name, _AT if t.name else None, dims, _AT, kept)


def _check_declared(declared: tuple[Declared, ...], relations: dict, mesh: Mesh | None, text: str) -> None:
    """A declared tensor's dims get the checks a statement's get: a sharded dim whose size
    is known here (a number, or a `let` that comes to one) splits evenly over its axes
    (64 does not over X=3: each chip would hold 21.3 rows). A size given later is checked
    against the mesh by models/checks.py's check_shards."""
    for d in declared:
        for dim, axes in zip(d.dims, d.axes):
            value = dim.xreplace(relations)
            if not axes or not value.is_Integer:
                continue
            chips = _split(axes, mesh, text, d.at or 0)
            if chips.is_Integer and value % chips:  # a family's members are checked one by one
                shown = f"{dim} = {value}" if dim != value else str(value)
                raise SpecError(f"{d.word} {d.name}: {shown} does not split evenly over {', '.join(axes)} "
                                f"({chips} chips)", text, d.at)


def _check_count(count: sympy.Expr, value: sympy.Expr, text: str, at: int | None) -> None:
    """A repeat count runs its block a positive whole number of times: one that comes to 0,
    a negative number or a fraction (with the `let`s in, or at the sizes given:
    models/checks.py), or that is not positive at any size of its dims, is refused (`repeat
    L - 8 {` with L = 8 would count every parameter in it 0 times, with L = 6 -2 times)."""
    shown = f"{count} = {value}" if value != count else str(count)
    if value.is_number and not (value.is_Integer and value > 0):
        raise SpecError(f"repeat {shown}: a repeat count is a positive whole number", text, at)
    if not value.is_number and value.is_positive is False:
        raise SpecError(f"repeat {shown}: a repeat count is positive, and this one is not at any size of "
                        f"{', '.join(sorted(s.name for s in value.free_symbols))}", text, at)


def _check_relations(lets: list, spans: list, relations: dict) -> None:
    """A `let` that is negative (or zero) at every size of its dims is refused, as a number
    that is not positive is (`let tokens = 0 - B`: negative tokens, negative FLOPs per token);
    one that may be, at some sizes, is checked at the sizes given (models/checks.py)."""
    for (name, _), span in zip(lets, spans):
        value = relations.get(dim_symbol(name))
        if value is not None and not value.is_number and value.is_positive is False:
            raise SpecError(f"{name} = {value} is not positive at any size of "
                            f"{', '.join(sorted(s.name for s in value.free_symbols))}: a size is positive", *span)


def _split(axes: tuple[str, ...], mesh: Mesh | None, text: str, at: int) -> sympy.Expr:
    """The chips a declared tensor's sharded dims split it over (a formula in a strategy
    family's deferred axes)."""
    for axis in axes:
        if mesh is None or axis not in mesh.names:
            where = "there is no mesh" if mesh is None else f"the mesh has {', '.join(mesh.names)}"
            raise SpecError(f"a declared dim is split over axis {axis}, but {where}", text, at)
    return mesh.over(axes) if mesh is not None else sympy.Integer(1)


def _innermost(blocks: list[int]) -> int | None:
    return blocks[-1] if blocks else None


def _declared_dim(text: str, whole: str, at: int) -> sympy.Expr:
    """A declared dim: a name, or a size that is a positive whole number of at most
    MAX_SIZE_DIGITS digits, as a statement's dim must be (bf16[0, D] holds nothing)."""
    if not text.isdigit():
        return dim_symbol(text)
    if len(text.lstrip("0")) > MAX_SIZE_DIGITS:
        raise SpecError(f"a dim's size has at most {MAX_SIZE_DIGITS} digits", whole, at, at + len(text))
    if int(text) <= 0:
        raise SpecError(f"a dim's size must be a positive integer, got {int(text)}", whole, at, at + len(text))
    return sympy.Integer(int(text))


class _Scan:
    """One pass over the lines: structure read, and blanked out of the text."""

    def __init__(self, text: str):
        self.text = text
        self.lets: list[tuple[str, sympy.Expr]] = []
        self.let_spans: list[tuple[str, int, int]] = []
        self.declared: list[tuple[str, str, dtypes.DType, tuple[sympy.Expr, ...], tuple[tuple[str, ...], ...],
                                  int]] = []
        # repeat blocks: (start offset, end offset, count, parent block)
        self.regions: list[tuple[int, int, sympy.Expr, int | None]] = []
        self.parts: list[tuple[int, int, str]] = []  # named parts: (start, end, name)
        self.count_at: list[int] = []  # each repeat block's count's offset

    def enclosing(self, at: int) -> list[int]:
        return [k for k, (lo, hi, _, _) in enumerate(self.regions) if lo <= at < hi]

    def run(self) -> str:
        out = list(self.text)
        stack: list[tuple[str, int]] = []  # ("repeat", region), ("part", part) or ("fused", -1)
        offset = 0
        for line in self.text.split("\n"):
            code = line.split("#", 1)[0]
            stripped = code.strip()
            lead = len(code) - len(code.lstrip())
            word = stripped.split(None, 1)[0] if stripped else ""
            start = offset + lead
            blank = True
            if word == "let":
                self._let(stripped[3:], start + 3)
            elif word in DECLARATIONS and ":" in stripped:
                self._declare(word, stripped[len(word):], start + len(word))
            elif word == "repeat" or stripped.startswith("repeat{"):
                match = _REPEAT.match(stripped)
                if match is None:
                    raise SpecError("write a repeated block as 'repeat N {' on a line of its own, its "
                                    "statements on the lines after it, and '}' alone on the last", self.text, start)
                count = expression(match.group("count"), (self.text, start + match.start("count")))
                if count.is_number and not count > 0:  # `repeat L-L {`: nothing to repeat, and a 0 to divide by
                    raise SpecError(f"a repeat count must be positive; this one is {count}", self.text,
                                    start + match.start("count"))
                parent = next((k for kind, k in reversed(stack) if kind == "repeat"), None)
                if any(kind == "fused" for kind, _ in stack):
                    raise SpecError("a repeat block cannot go inside a fused block", self.text, start)
                self.regions.append((start, len(self.text), count, parent))
                gap = len(match.group("count")) - len(match.group("count").lstrip())
                self.count_at.append(start + match.start("count") + gap)
                stack.append(("repeat", len(self.regions) - 1))
            elif word == "part":
                match = _PART.match(stripped)
                if match is None or any(kind == "fused" for kind, _ in stack):
                    raise SpecError("write a named part as 'part NAME {' on a line of its own (not inside a "
                                    "fused block), its statements after it and '}' alone on the last",
                                    self.text, start)
                self.parts.append((start, len(self.text), match.group("name")))
                stack.append(("part", len(self.parts) - 1))
            elif stripped == "}" and stack and stack[-1][0] == "part":
                _, k = stack.pop()
                self.parts[k] = (self.parts[k][0], start, self.parts[k][2])
            elif stripped == "}" and stack and stack[-1][0] == "repeat":
                _, k = stack.pop()
                lo, _, count, parent = self.regions[k]
                self.regions[k] = (lo, start, count, parent)
            else:
                blank = False
                opened, closed = stripped.count("{"), stripped.count("}")
                if opened > closed and word == "fused":
                    stack.append(("fused", -1))
                elif closed > opened and stack and stack[-1][0] == "fused":
                    stack.pop()
            if blank:
                for i in range(offset, offset + len(line)):
                    out[i] = " "
            offset += len(line) + 1
        for kind, k in reversed(stack):
            if kind in ("repeat", "part"):
                start = self.regions[k][0] if kind == "repeat" else self.parts[k][0]
                raise SpecError(f"this {kind} block is not closed: end it with '}}' on a line of its own",
                                self.text, start)
        return "".join(out)

    def _let(self, rest: str, at: int) -> None:
        pos = 0
        for part in _top_level(rest):
            name, eq, value = part.partition("=")
            here = at + pos + len(name) - len(name.lstrip())
            if not eq or not re.fullmatch(_NAME, name.strip()):
                raise SpecError("write a relation as 'let NAME = expression' (let F = 4*D, D = 8192)",
                                self.text, here)
            expr = expression(value, (self.text, at + pos + len(name) + 1))
            self.lets.append((name.strip(), expr))
            self.let_spans.append((self.text, here, here + len(name.strip())))
            pos += len(part) + 1

    def _declare(self, word: str, rest: str, at: int) -> None:
        pos = 0
        while pos < len(rest.rstrip()):
            match = _DECLARED.match(rest, pos)
            if match is None:
                raise SpecError(f"write a declaration as '{word} NAME: dtype[dims]' ({word} W: bf16[D, F])",
                                self.text, at + pos + len(rest[pos:]) - len(rest[pos:].lstrip()))
            dtype = dtypes.lookup(match.group("dtype"))
            if dtype is None:
                hint = dtypes.suggest(match.group("dtype"))
                also = f"; did you mean '{hint}'?" if hint else ""
                raise SpecError(f"unknown dtype '{match.group('dtype')}'{also}", self.text,
                                at + match.start("dtype"), at + match.end("dtype"))
            dims: list[sympy.Expr] = []
            axes: list[tuple[str, ...]] = []
            offset = at + match.start("dims")
            for item in _dim_items(match.group("dims")):
                here = offset + len(item) - len(item.lstrip())
                found = _DIM.fullmatch(item.strip())
                if found is None:
                    raise SpecError(f"a declared tensor's dims are names or sizes (D, D_X, 4096), not "
                                    f"{item.strip()!r}", self.text, here)
                dims.append(_declared_dim(found["dim"], self.text, here))
                sub = (found["sub"] or "").strip("{}")
                split = tuple(a.strip() for a in sub.split(",")) if "," in sub else tuple(sub)
                twice = [a for a in split if split.count(a) > 1]
                if twice:  # as a statement's dim is refused: D_{X,X} is not D over X twice
                    raise SpecError(f"{item.strip()} is split over {twice[0]} twice", self.text, here)
                axes.append(split)
                offset += len(item) + 1
            self.declared.append((word, match.group("name"), dtype, tuple(dims), tuple(axes),
                                  at + match.start("name")))
            pos = match.end()


def _top_level(text: str) -> list[str]:
    """`text` split at its commas outside parentheses: a let line's relations, one of which
    may be min(S, W)."""
    parts, depth, start = [], 0, 0
    for k, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    return [*parts, text[start:]]
