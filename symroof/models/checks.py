"""What a model refuses before it derives anything, and how its decode threshold combines
roofs: sizes for dims the program lacks, shards that do not split evenly, and the batch
above every roof at once."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import cast

import sympy

from ..errors import SpecError
from ..ir import dim_symbol, tensors_of
from ..lang.structure import Structured
from ..roofline.solve import Region


def check_names(structured: Structured, sizes: dict) -> None:
    """A size for a name the program lacks is refused with the nearest: a typo (b for B)
    would leave the size it meant at its default."""
    known = _names(structured)
    for name in sizes:
        if name not in known:
            close = [k for k in sorted(known) if k.lower() == name.lower()] or \
                difflib.get_close_matches(name, sorted(known), n=1)
            raise SpecError(f"the program has no dim {name}" + (f"; did you mean {close[0]}?" if close else
                                                                   f" (its dims: {', '.join(sorted(known))})"))


def check_shards(structured: Structured, at: Callable[[sympy.Expr], sympy.Expr]) -> None:
    """What the sizes must satisfy, once `at` puts them in (a `let`, or a size given): a
    sharded dim whose size is known must split evenly over its axes, in a statement or in a
    declaration (8 KV heads do not split over 16 chips; `param Wq: bf16[D_X, F]` with D = 64
    on X=3 would hold 21.3 rows a chip); every `let` must come to a positive size
    (`let tokens = B - 8` at B = 8 is no tokens), and every repeat count to a positive whole
    number (`repeat L - 8 {` at L = 6 would count its parameters -2 times)."""
    _check_lets(structured, at)
    _check_counts(structured, at)
    mesh = structured.program.mesh
    if mesh is None:
        return
    for statement in structured.program.statements:
        for tensor in tensors_of(statement):
            for dim in tensor.dims:
                if not dim.axes or dim.name is None:
                    continue
                value = at(dim_symbol(dim.name))
                chips = mesh.over(dim.axes)  # a formula on a strategy family's mesh: checked member by member
                if value.is_Integer and chips.is_Integer and value % chips:
                    # a template's T is split by context parallelism (sp) and by tp's Megatron sequence parallelism
                    hint = ": give a multiple of them (a sequence's tokens split by sp, or by tp's Megatron sequence " \
                        "parallelism, which tp-nosp runs without)" if dim.name == "T" else ""
                    raise SpecError(f"{dim.name} = {value} does not split evenly over "
                                    f"{', '.join(dim.axes)} ({chips} chips){hint}")
    for declared in structured.declared:
        for expr, axes in zip(declared.dims, declared.axes):
            if not axes or not expr.free_symbols:
                continue  # a number: structure.py checked it
            value = at(expr)
            chips = mesh.over(axes)
            if value.is_Integer and chips.is_Integer and value % chips:
                raise SpecError(f"{declared.word} {declared.name}: {expr} = {value} does not split evenly over "
                                f"{', '.join(axes)} ({chips} chips)", structured.text, declared.at)


def _check_counts(structured: Structured, at: Callable[[sympy.Expr], sympy.Expr]) -> None:
    for block in structured.blocks:
        value = at(block.count)
        if value.is_number and not (value.is_Integer and value > 0):
            shown = ", ".join(f"{s.name} = {at(s)}" for s in sorted(block.count.free_symbols, key=str))
            raise SpecError(f"repeat {block.count} runs {value} times" + (f" at {shown}" if shown else "")
                            + ": a repeat count is a positive whole number", structured.text, block.at)


def _check_lets(structured: Structured, at: Callable[[sympy.Expr], sympy.Expr]) -> None:
    for name, expr in structured.lets:
        value = at(dim_symbol(name))
        if value.is_number and not value > 0:
            shown = ", ".join(f"{s.name} = {at(s)}" for s in sorted(expr.free_symbols, key=str))
            raise SpecError(f"let {name} = {expr} comes to {value}" + (f" at {shown}" if shown else "")
                            + ": a size is positive")


def both(regions: list[Region]) -> Region:
    """Where B is above every roof at once: never where one never is, the later root of
    those that hold above a root, every B where each does."""
    for kind in ("none", "unknown", "below"):  # no batch, or one the answer here cannot combine
        found = next((r for r in regions if r.kind == kind), None)
        if found is not None:
            return found
    above = [r for r in regions if r.kind == "above"]
    if not above:
        return regions[0]  # "all": every roof at every batch
    if all(r.root is not None and r.root.is_number for r in above):
        return max(above, key=lambda r: cast(sympy.Expr, r.root))
    return above[0] if len(above) == 1 else Region("unknown", reason="the roofs' thresholds depend on the "
                                                                     "other dims; compare them at sizes")


def _names(structured: Structured) -> set[str]:
    """Every name a size may be given for: the program's dims, the `let` names, and the
    symbols in repeat counts, relations and declarations."""
    symbols: set = set()
    for expr in (*structured.relations.values(), *(b.count for b in structured.blocks),
                 *(dim for d in structured.declared for dim in d.dims)):
        symbols |= expr.free_symbols  # relations, counts and dims: sympy expressions, never text
    return {*structured.program.dims, *(s.name for s in structured.relations), *(s.name for s in symbols)}
