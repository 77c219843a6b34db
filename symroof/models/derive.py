"""The training chapter's strategy formulas, derived by the engine (How To Scale Your Model,
part 5, "Training").

The book's layer is an MLP alone, In[B, D] *_D W_in[D, F] -> [B, F] *_F W_out[F, D] -> [B, D]
in bf16, B the batch in tokens. This module builds it as a program (objects), shards it with
each strategy kind (`strategies.subscripted`, `gathered`; its training backward from
`backward.py`) on a mesh whose axes have no size (the symbols X, Y), costs each pass on a chip
whose peak C and per-link ICI bandwidth W_ici are symbols, and solves T_math > T_network
(`roofline.solve`). Nothing of the book's results is typed in: they come out of the costed
collectives.

Conventions, each stated where it changes a number:

* **bandwidth**: the engine's W_ici is one direction of one link, as the chip files give it;
  the book's is bidirectional. The book's form writes W = 2 W_ici (`W_bidi`) and
  alpha = C / W (2550 on TPU v5p: 4.59e14 / 1.8e11).
* **torus axes**: a strategy kind over n mesh axes, each a ring with wraparound, costs its
  collectives over the n rings at once (V / (W n) for an AllGather): the book's n_axes,
  M_X and M_Y. Its size is the product of its axes' sizes, written X (or Y).
* **per pass** (the book's): each pass's collectives overlap that pass's compute only: data
  parallelism's gradient AllReduce against the backward's four matmuls. **whole step**
  (symroof's `plan`): the step's collectives against the step's compute, forward and
  backward together; it lets data parallelism go down to 2/3 of the book's batch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy

from ..analysis import Analysis
from ..errors import HardwareError, SpecError
from ..hardware.chips import Chip, get_chip
from ..hardware.machines import Machine, figure_symbol, machine
from ..hardware.topology import lay_out, spans
from ..ir import Fused, dim_symbol
from ..lang.parsing import parse
from ..lang.source import Backward, Contraction, Dim, Item, MeshLine, Op, Program, Tensor
from ..mesh import Mesh, MeshAxis
from ..roofline.cost import cost
from ..roofline.solve import cleared, positive_region
from ..show import pretty, seconds
from . import report
from .backward import backward
from .catalogue import get_model
from .strategies import Strategy, gathered, subscripted

__all__ = ["ALPHA", "KINDS", "W_BIDI", "PassFormulas", "Split", "StrategyFormulas", "TrainingFormulas",
           "attention_share", "book_layer", "chip_values", "largest_comms_bound_batch", "optimal_split",
           "strategy_formulas", "torus_axes", "training_formulas", "x_opt"]

B, D, F, X, Y, N = (dim_symbol(n) for n in ("B", "D", "F", "X", "Y", "N"))
C, W_ICI = figure_symbol("peak"), figure_symbol("ici_bw")
W_BIDI = sympy.Symbol("W_bidi", positive=True)   # the book's W_ici: both directions of a link
ALPHA = sympy.Symbol("alpha", positive=True)     # C / W_bidi

# each kind of the book: the strategy kinds it runs, and the pass the book compares (DP's
# AllReduce runs in the backward only; the mixed case the book works on the forward)
KINDS: dict[str, tuple[tuple[str, ...], str]] = {"dp": (("dp",), "backward"), "fsdp": (("fsdp",), "forward"),
                                                 "tp": (("tp",), "forward"), "fsdp+tp": (("fsdp", "tp"), "forward")}
# the mesh axes a kind runs over, first its size's own symbol: a kind over n torus axes
# takes the first n (X the product of its axes' sizes: X -> X/(P*Q))
_AXES = {"dp": "XPQ", "fsdp": "XPQ", "tp": "YRS"}
_CONVENTIONS = {
    "per pass": "each pass's collectives against that pass's compute (the book's convention)",
    "whole step": "the step's collectives against the forward's and the backward's compute together "
                  "(symroof plan's roofline)",
    "bandwidth": "W_ici is one direction of one link (the chip file's); the book's W_ici is bidirectional, "
                 "W_bidi = 2 W_ici, alpha = C / W_bidi",
}


def book_layer() -> Program:
    """The book's layer as a program: In[B, D] *_D W_in[D, F] -> [B, F] *_F W_out[F, D] -> [B, D]."""
    def t(*dims: str) -> Tensor:
        return Tensor("bf16", tuple(Dim(d) for d in dims))
    return Program((Contraction((t("B", "D"), t("D", "F")), (Op("*", ("D",)),), t("B", "F"), "In @ W_in"),
                    Contraction((t("B", "F"), t("F", "D")), (Op("*", ("F",)),), t("B", "D"), "@ W_out")))


@dataclass(frozen=True)
class PassFormulas:
    """One pass's (or the whole step's) times and where its compute hides its collectives.

    `condition` is the compute-bound region as a relation in the book's per-chip form (B/X >
    ..., Y < ...; B/N > ... at X_opt for FSDP + TP), sympy.true where the pass has no
    collectives, sympy.nan where no formula in the kind's size alone exists (the notes say
    why); `root` the threshold on `over` (B, or Y for tensor parallelism); `book()` the same in
    the book's symbols, W_ici = W_bidi / 2 (and C = alpha W_bidi in the condition)."""

    t_math: sympy.Expr
    t_comms: sympy.Expr
    condition: sympy.Basic
    over: sympy.Symbol
    root: sympy.Expr | None

    def book(self) -> dict[str, sympy.Basic]:
        """In the book's symbols: the times in C and W_bidi, the condition in alpha."""
        return {"t_math": _book(self.t_math, False), "t_comms": _book(self.t_comms, False),
                "condition": _book(self.condition)}


@dataclass(frozen=True)
class StrategyFormulas:
    """A kind's formulas per pass (`forward`, `backward`), over the whole step (`step`), and
    the book's (`book_pass`: the pass the book compares); `numbers` the same with the chip's
    figures and the model's sizes put in, where they were given."""

    kind: str
    axes: dict[str, int]              # torus axes each strategy kind spans (n_axes; M_X, M_Y)
    forward: PassFormulas
    backward: PassFormulas
    step: PassFormulas
    book_pass: str
    values: dict[sympy.Symbol, sympy.Expr] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def per_pass(self) -> PassFormulas:
        """The pass the book compares (its condition is the book's)."""
        return self.forward if self.book_pass == "forward" else self.backward

    def numbers(self, expr: sympy.Basic) -> sympy.Basic:
        """`expr` with the chip's and the model's figures put in (unchanged without them)."""
        return _sides(_book(expr), lambda e: e.xreplace(self.values)) if self.values else expr

    def largest_comms_bound(self, convention: str = "per pass") -> sympy.Expr:
        """The largest tokens per chip (B/X; B/N at X_opt for FSDP + TP) at which the kind
        stays communication-bound with the chip's and the model's figures: the root of the
        threshold, floored (at the root T_math = T_comms)."""
        chosen = {"per pass": self.per_pass, "whole step": self.step}.get(convention)
        if chosen is None:
            raise SpecError(f"the convention is 'per pass' or 'whole step', not {convention!r}")
        bound = self.numbers(chosen.condition)
        if not isinstance(bound, sympy.StrictGreaterThan | sympy.StrictLessThan) or B not in bound.gts.free_symbols:
            raise SpecError(f"{self.kind}: no batch threshold ({bound})")
        per_chip = bound.lts
        if per_chip.free_symbols:
            raise SpecError(f"{self.kind}: the threshold depends on {', '.join(map(str, per_chip.free_symbols))}: "
                            "name the chip and the model (C, W_ici; D and F)")
        return sympy.floor(per_chip)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "torus_axes": self.axes, "book_pass": self.book_pass,
                               "conventions": _CONVENTIONS}
        for name, f in (("forward", self.forward), ("backward", self.backward), ("whole step", self.step)):
            out[name] = {k: _both(v) | ({"value": _number(self.numbers(v))} if self.values else {})
                         for k, v in (("t_math", f.t_math), ("t_comms", f.t_comms), ("condition", f.condition))}
            out[name]["book"] = {k: _both(v) for k, v in f.book().items()}
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def _repr_latex_(self) -> str:
        rows = []
        for name, f in (("forward", self.forward), ("backward", self.backward), ("whole step", self.step)):
            book = f.book()
            rows.append(rf"\text{{{name}}} & {tex(book['t_math'])} & {tex(book['t_comms'])} & "
                        rf"{tex(book['condition'])} \\")
        return (rf"$\text{{{self.kind}}}\ (\text{{per pass is the book's: {self.book_pass}}})"
                r"\quad \begin{array}{llll} & T_\text{math} & T_\text{comms} & \text{compute-bound} \\ "
                + " ".join(rows) + r"\end{array}$")


def _book(expr: sympy.Basic, alpha: bool = True) -> sympy.Basic:
    """In the book's symbols: W_ici = W_bidi / 2 (one way), and C = alpha W_bidi (`alpha`)."""
    subs = {W_ICI: W_BIDI / 2} | ({C: ALPHA * W_BIDI} if alpha else {})
    return _sides(expr, lambda e: sympy.simplify(e.xreplace(subs)))


def _sides(expr: sympy.Basic, f: Callable[[sympy.Expr], sympy.Expr]) -> sympy.Basic:
    """`f` of an expression, or of each side of a relation, kept as written (B/X > alpha,
    as the book reads, not sympy's alpha < B/X)."""
    if expr in (sympy.true, sympy.false) or expr is sympy.nan:
        return expr
    if isinstance(expr, sympy.core.relational.Relational):
        return type(expr)(f(expr.lhs), f(expr.rhs), evaluate=False)
    return f(expr)


def tex(expr: sympy.Basic) -> str:
    """LaTeX of a formula, the book's W_ici (both directions) written W_{ici}^{bidi}."""
    if expr is sympy.true:
        return r"\text{always (no collectives)}"
    if expr is sympy.nan:
        return r"\text{no formula in the kind's size alone}"
    return sympy.latex(expr, symbol_names={W_BIDI: r"W_{\text{ici}}^{\text{bidi}}", W_ICI: r"W_{\text{ici}}"})


def _both(expr: sympy.Basic) -> dict[str, str]:
    return {"formula": str(expr), "latex": tex(expr)}


def _number(expr: sympy.Basic) -> str:
    return str(expr.evalf(6)) if isinstance(expr, sympy.Expr) else str(expr)


def _strategy(kinds: tuple[str, ...], n_axes: Mapping[str, int]) -> Strategy:
    return {k: tuple((a, 0, "ici") for a in _AXES[k][:n_axes[k]]) for k in kinds}


def _to_totals(expr: sympy.Expr, strategy: Strategy) -> sympy.Expr:
    """An expression in the mesh axes' sizes written in each kind's total (X = X*P*Q)."""
    subs = {}
    for axes in strategy.values():
        first, *rest = (dim_symbol(a) for a, _, _ in axes)
        if rest:
            subs[first] = first / sympy.Mul(*rest)
    return sympy.simplify(expr.xreplace(subs)) if subs else expr


def _costed(items: tuple[Item, ...], mesh: Mesh, target: Machine) -> Analysis:
    """A pass as the engine costs it: its statements resolved on the symbolic mesh."""
    text = "\n".join(str(item) for item in items if not isinstance(item, MeshLine))
    program = parse(text, mesh=mesh)
    return Analysis(cost(program), target, program=program)


def _region(t_math: sympy.Expr, t_comms: sympy.Expr, over: sympy.Symbol,
            per: sympy.Expr) -> tuple[sympy.Basic, sympy.Expr | None]:
    """Where T_math > T_comms, solved for `over` (roofline.solve), written per chip (over / per)."""
    if t_comms == 0:
        return sympy.true, None
    lhs, rhs = cleared(t_math, t_comms)
    region = positive_region(sympy.expand(lhs - rhs), over)
    if region.kind not in ("above", "below") or region.condition is not None:
        raise SpecError(f"the compute-bound region in {over} is not one threshold ({region.kind}"
                        f"{': ' + region.reason if region.reason else ''})")
    assert region.root is not None
    root = sympy.simplify(region.root)
    relation = sympy.StrictGreaterThan if region.kind == "above" else sympy.StrictLessThan
    return relation(over / per, sympy.simplify(root / per), evaluate=False), root


def _pass(t_math: sympy.Expr, t_comms: sympy.Expr, over: sympy.Symbol, per: sympy.Expr) -> PassFormulas:
    condition, root = _region(t_math, t_comms, over, per)
    return PassFormulas(t_math, t_comms, condition, over, root)


@functools.lru_cache(maxsize=64)
def _derived(kind: str, n_axes: tuple[tuple[str, int], ...], chip: str | None) -> StrategyFormulas:
    """`_derive` once per kind, axes and chip name (a notebook asks again and again)."""
    return _derive(kind, dict(n_axes), _target(chip)[0])


def _derive(kind: str, n_axes: Mapping[str, int], target: Machine) -> StrategyFormulas:
    kinds, book_pass = KINDS[kind]
    strategy = _strategy(kinds, n_axes)
    split = subscripted(book_layer(), strategy)
    forward = gathered(split, strategy).items
    back = gathered(backward(split, strategy), strategy).items
    assert len(back) == 1 and isinstance(back[0], Backward)
    mesh = Mesh(tuple(MeshAxis(a, None, "ici", True) for axes in strategy.values() for a, _, _ in axes))
    costed = [_costed(items, mesh, target) for items in (forward, back[0].body)]
    times = [(_to_totals(a.t_math, strategy), _to_totals(a.t_network, strategy)) for a in costed]
    step = (sympy.simplify(times[0][0] + times[1][0]), sympy.simplify(times[0][1] + times[1][1]))
    # tensor parallelism alone is bound above in Y; the others' threshold is the batch per chip
    over, per = (Y, sympy.Integer(1)) if kinds == ("tp",) else (B, X * Y if "tp" in kinds else X)
    notes = []
    axes_left = {dim_symbol(a) for axes in strategy.values() for a, _, _ in axes[1:]}
    passes = []
    for name, (t_math, t_comms) in zip(("forward", "backward", "whole step"), (*times, step)):
        if t_comms.free_symbols & axes_left:
            # its cost depends on how the kind's size is split over its axes: no single formula in X
            notes.append(f"{name}: the collectives' time depends on each torus axis's size, not only the "
                         f"kind's total ({t_comms}): the engine reduce-scatters a gradient over one axis after "
                         "another")
            passes.append(PassFormulas(t_math, t_comms, sympy.nan, over, None))
            continue
        if "tp" in kinds and "fsdp" in kinds:
            passes.append(PassFormulas(t_math, t_comms, _mixed_condition(t_math, t_comms), B, None))
        else:
            passes.append(_pass(t_math, t_comms, over, per))
    axes = {k: n_axes[k] for k in kinds}
    forward_, backward_, step_ = passes
    return StrategyFormulas(kind, axes, forward_, backward_, step_, book_pass, notes=tuple(notes))


def _mixed_condition(t_math: sympy.Expr, t_comms: sympy.Expr) -> sympy.Basic:
    """FSDP + TP: compute-bound at the split that minimises this pass's (or step's) T_comms
    (X = X_opt, Y = N / X), as B/N > threshold."""
    best = {Y: N / X, X: _x_opt(t_comms)}
    t_math_opt, t_comms_opt = (sympy.simplify(e.xreplace({Y: best[Y]}).xreplace({X: best[X]}))
                               for e in (t_math, t_comms))
    # T_comms at the optimum goes as sqrt(B): with B = s**2 (s > 0) the difference, cleared
    # of its positive denominators, is s times a*s - c; compute-bound where s > c/a, a > 0
    s = sympy.Symbol("s", positive=True)
    lhs, rhs = cleared(*(sympy.expand(e.xreplace({B: s**2})) for e in (t_math_opt, t_comms_opt)))
    linear = sympy.expand(sympy.cancel(sympy.expand(lhs - rhs) / s))
    a = linear.coeff(s, 1)
    c = -linear.coeff(s, 0)
    if sympy.expand(linear - (a * s - c)) != 0 or not a.is_positive or not c.is_positive:
        raise SpecError(f"the mixed FSDP + TP compute-bound region is not one threshold in B ({linear} > 0)")
    return sympy.StrictGreaterThan(B / N, sympy.simplify((c / a)**2 / N), evaluate=False)


def _x_opt(t_comms: sympy.Expr) -> sympy.Expr:
    """The FSDP size X minimising T_comms at N = X*Y chips: d/dX T_comms(X, N/X) = 0."""
    along = sympy.simplify(t_comms.xreplace({Y: N / X}))
    x = sympy.Symbol("x", positive=True)
    roots = sympy.solve(sympy.diff(along.xreplace({X: x}), x), x)
    if len(roots) != 1:
        raise SpecError(f"T_comms has {len(roots)} stationary points in X, not one: {along}")
    (root,) = roots
    if not sympy.simplify(sympy.diff(along.xreplace({X: x}), x, 2).xreplace({x: root})).is_positive:
        raise SpecError("the stationary point of T_comms in X is not a minimum")
    return sympy.simplify(root)


def x_opt(m_x: int = 1, m_y: int = 1) -> sympy.Expr:
    """The continuous optimum of FSDP + TP over m_x and m_y torus axes: X_opt in B, F and N,
    derived from the forward pass's collectives (the book's pass) by d/dX T_comms = 0.

    Examples:
        >>> x_opt(2, 1)
        sqrt(2)*sqrt(B)*sqrt(N)/sqrt(F)
    """
    f = strategy_formulas(kinds=("fsdp+tp",), n_axes={"fsdp": m_x, "tp": m_y})["fsdp+tp"]
    return _x_opt(f.forward.t_comms)


def _target(chip: str | Chip | None) -> tuple[Machine, Chip | None]:
    """The symbolic chip (no chip named), or the named one with its peak and ICI symbols."""
    if chip is None:
        target = machine("symbolic")
        assert target is not None
        return target, None
    found = chip if isinstance(chip, Chip) else get_chip(chip)
    if not found.texts.get("interconnect.topology", "").startswith("torus"):
        raise SpecError(f"the book's strategy formulas are for a torus of rings (TPU ICI); {found.name}'s "
                        "links are not one")
    target = machine(found, symbolic=("peak", "ici_bw"))
    assert target is not None
    return target, found


def chip_values(chip: Chip) -> dict[sympy.Symbol, sympy.Expr]:
    """The chip's bf16 peak and its ICI link's bidirectional bandwidth, and alpha = C / W_bidi
    (2550 on TPU v5p)."""
    peak = chip.peak_flops("bf16")
    bidi = chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s") or \
        2 * chip.require("interconnect.link_bandwidth_one_way_bytes_per_s", "the book's W_ici")
    return {ALPHA: peak / bidi, W_BIDI: bidi, C: peak, W_ICI: bidi / 2}


def strategy_formulas(chip: str | Chip | None = None, model: str | None = None, *,
                      kinds: tuple[str, ...] = tuple(KINDS), n_axes: Mapping[str, int] | None = None,
                      models_file: str | None = None) -> dict[str, StrategyFormulas]:
    """Each kind's T_math, T_comms and compute-bound condition, per pass and over the whole
    step, derived by the engine from the book's layer (see the module docstring).

    `n_axes` gives the torus axes each strategy kind spans ({"dp": 3}, {"fsdp": 2, "tp": 1}:
    the book's n_axes, M_X, M_Y; 1 each by default). With a named `chip` (a TPU) its figures,
    and with a named `model` its D and F, go into `numbers`.

    Examples:
        >>> f = strategy_formulas(kinds=("dp",), n_axes={"dp": 3})["dp"]
        >>> f.per_pass.book()["condition"]
        B/X > alpha/3
    """
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise SpecError(f"strategy kinds are {', '.join(KINDS)}, not {', '.join(unknown)}")
    axes = {"dp": 1, "fsdp": 1, "tp": 1} | dict(n_axes or {})
    bad = [f"{k}={v}" for k, v in axes.items() if k not in _AXES or not (isinstance(v, int) and 1 <= v <= 3)]
    if bad:
        raise SpecError(f"torus axes per kind are 1 to 3 (dp, fsdp, tp), not {', '.join(bad)}")
    target, found = _target(chip)
    values = chip_values(found) if found is not None else {}
    if model is not None:
        sizes = _configured(model, models_file)
        values |= {D: sympy.Integer(sizes["D"]), F: sympy.Integer(sizes["F"])}
    out = {}
    for kind in kinds:
        derived = _derived(kind, tuple(sorted(axes.items())), chip if isinstance(chip, str) else None) \
            if chip is None or isinstance(chip, str) else _derive(kind, axes, target)
        out[kind] = dataclasses.replace(derived, values=values)
    return out


@dataclass(frozen=True)
class Split:
    """The FSDP/TP split of N chips: the continuous optimum and the whole split chosen."""

    x_opt: sympy.Expr           # at the numbers given
    x_opt_formula: sympy.Expr   # in B, F and N, at the split's M_X and M_Y
    x: int
    y: int
    candidates: tuple[tuple[int, int, sympy.Expr], ...]  # (X, Y, T_comms in units of 4D/W_bidi) each split
    how: str
    m_x: int                    # the torus axes FSDP and TP span (at the split chosen, on a chip)
    m_y: int

    def to_dict(self) -> dict[str, Any]:
        return {"x_opt": float(self.x_opt), "x_opt_formula": _both(self.x_opt_formula), "x": self.x, "y": self.y,
                "m_x": self.m_x, "m_y": self.m_y, "how": self.how,
                "candidates": [{"x": x, "y": y, "t_comms_per_4D_over_W": float(t)} for x, y, t in self.candidates]}

    def _repr_latex_(self) -> str:
        return (rf"$X_\text{{opt}} = {tex(self.x_opt_formula)} = {float(self.x_opt):.4g};\ "
                rf"\text{{chosen}}\ X = {self.x},\ Y = {self.y}$")


def optimal_split(n: int, batch: int, ffn: int, m_x: int | None = None, m_y: int | None = None, *,
                  chip: str | Chip | None = None, slice: str | None = None) -> Split:
    """FSDP over X chips and TP over Y = n / X for the book's layer at `batch` tokens and MLP
    width `ffn`: the continuous X_opt (from the derived formula), and the best whole split,
    X dividing n, by T_comms. The torus axes each kind spans are `m_x` and `m_y` where given
    (the same for every split); else, on a `chip`'s `slice` ("4x4x4") or its pod, they come
    from where the engine lays each split's axes (on v5p's 4x4x4 with X = 16 and Y = 4,
    M_X = 2, M_Y = 1), each split costed there.

    Examples:
        >>> s = optimal_split(64, 48000, 32768, 2, 1)
        >>> s.x_opt_formula, round(float(s.x_opt), 2), s.x, s.y
        (sqrt(2)*sqrt(B)*sqrt(N)/sqrt(F), 13.69, 16, 4)
    """
    for what, v in (("chips", n), ("batch", batch), ("F", ffn)):
        if not isinstance(v, int) or v < 1:
            raise SpecError(f"{what} is a positive whole number, not {v!r}")
    if slice is not None:
        if chip is None:
            raise SpecError("a slice is of a chip's pod: name the chip too (tpu-v5p, 4x4x4)")
        return _split_laid(n, batch, ffn, chip, slice)
    if m_x is None or m_y is None:
        if chip is None:
            raise SpecError("give the torus axes FSDP and TP span (M_X, M_Y), or a chip (and a slice) to lay "
                            "them on")
        return _split_laid(n, batch, ffn, chip, None)
    formula = x_opt(m_x, m_y)
    # T_comms of the forward pass, in units of 4 D / W_bidi, at each whole split; at X = 1 or
    # X = N one kind has a single chip, no collectives: the other kind's alone
    at = {B: batch, F: ffn, N: n}
    candidates = tuple((x, n // x, _unit_comms("fsdp+tp" if 1 < x < n else "tp" if x == 1 else "fsdp", m_x, m_y)
                        .xreplace(at | {X: x, Y: n // x})) for x in _divisors(n))
    x, y, _ = min(candidates, key=lambda c: c[2])
    return Split(formula.xreplace({B: batch, F: ffn, N: n}), formula, x, y, candidates,
                 f"each X dividing {n}, T_comms with M_X = {m_x}, M_Y = {m_y} for every split", m_x, m_y)


def _unit_comms(kind: str, m_x: int, m_y: int) -> sympy.Expr:
    """The derived forward T_comms of `kind` with FSDP over m_x and TP over m_y torus axes,
    per 4 D / W_bidi."""
    f = strategy_formulas(kinds=(kind,), n_axes={"fsdp": m_x, "tp": m_y})[kind]
    return sympy.simplify(_book(f.forward.t_comms) * W_BIDI / (4 * D))


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _split_laid(n: int, batch: int, ffn: int, chip: str | Chip, shape: str | None) -> Split:
    """Each whole split laid by the engine on the chip's slice (or pod) and costed there (its
    rings, the physical axes each kind spans); X_opt with the M's of the split chosen."""
    found = chip if isinstance(chip, Chip) else get_chip(chip)
    sliced = found.on_slice(shape) if shape else found
    if shape and math.prod(sliced.slice or ()) != n:
        raise SpecError(f"the slice {shape} has {math.prod(sliced.slice or ())} chips, not {n}")
    target = machine(sliced, symbolic=("peak", "ici_bw"))
    assert target is not None
    candidates, spanned = [], {}
    for x in _divisors(n):
        y = n // x
        strategy: Strategy = {"fsdp": (("X", x, "ici"),), "tp": (("Y", y, "ici"),)}
        axes = (MeshAxis("X", x), MeshAxis("Y", y))
        try:
            laid = lay_out(axes, sliced)
        except HardwareError:  # a split the slice's axes cannot take is no candidate
            continue
        a = _costed(gathered(subscripted(book_layer(), strategy), strategy).items, Mesh(axes), target)
        t = _book(a.t_network) * W_BIDI / (4 * D)
        candidates.append((x, y, sympy.nsimplify(t.xreplace({B: batch, F: ffn}))))
        spanned[x] = tuple(len(spans(axis, laid)) for axis in axes)
    if not candidates:
        raise SpecError(f"no split of {n} chips into FSDP x TP lays out on {shape}")
    x, y, _ = min(candidates, key=lambda c: c[2])
    m_x, m_y = spanned[x]
    formula = x_opt(m_x, m_y)
    return Split(formula.xreplace({B: batch, F: ffn, N: n}), formula, x, y, tuple(candidates),
                 f"each X dividing {n} laid on {found.name}'s " + (f"{shape} slice" if shape else "pod") +
                 " and costed there; X_opt with the "
                 f"chosen split's M_X = {m_x}, M_Y = {m_y}", m_x, m_y)


def largest_comms_bound_batch(kind: str, chip: str | Chip, model: str | None = None, *,
                              n_axes: Mapping[str, int] | None = None, convention: str = "per pass") -> sympy.Expr:
    """The largest batch per chip (tokens; B/X for dp and fsdp, B/N for fsdp+tp at its
    optimal split) at which `kind` stays communication-bound on a named chip: the derived
    threshold's root, floored (at the root itself T_math = T_comms: not yet compute-bound)."""
    if kind not in ("dp", "fsdp", "fsdp+tp"):
        raise SpecError(f"a batch threshold is derived for dp, fsdp and fsdp+tp, not {kind!r} "
                        "(tensor parallelism's is a bound on Y)")
    return strategy_formulas(chip, model, kinds=(kind,), n_axes=n_axes)[kind].largest_comms_bound(convention)


def attention_share(model: str, *, models_file: str | None = None) -> dict[str, sympy.Expr]:
    """The share of a training step's FLOPs in attention, as a function of the tokens per
    sequence T, for a named model, from its template's costed statements (T left a symbol):
    `scores` the fused score block's (Q K^T, softmax, P V: the work that grows as T^2),
    `attention` the whole attention part (its projections too). The step is costed with the
    backward twice the forward (the template's convention), so each share is the forward's;
    the scores are the full T x S (a causal mask's skipped half is not subtracted).
    `scores_to_matmuls` is the book's ratio: the score block's matrix FLOPs over the layers'
    weight matmuls' (T / (8 D) for multi-head attention with a gated MLP of F = 4 D)."""
    m = report.model(model, "train", None, {"B": 1, "T": None}, models_file=models_file)
    structured = m.structured
    total = sympy.Integer(0)
    found = {"scores": sympy.Integer(0), "attention": sympy.Integer(0)}
    matrix = {"scores": sympy.Integer(0), "layers": sympy.Integer(0)}  # the matrix unit's FLOPs
    # each statement's cost is already as often as it runs (L times in the layers)
    for c, part, item in zip(m.analysis.cost.statements, structured.parts, structured.program.statements):
        flops = m.at(c.flops)
        total += flops
        if part == "attention":
            found["attention"] += flops
            if isinstance(item, Fused):
                found["scores"] += flops
        if part in ("attention", "mlp"):
            matrix["scores" if isinstance(item, Fused) else "layers"] += m.at(c.flops - c.flops_vector)
    shares = {k: sympy.factor(sympy.cancel(v / total)) for k, v in found.items()}
    return shares | {"scores_to_matmuls": sympy.cancel(matrix["scores"] / matrix["layers"])}


def torus_axes(chip: Chip, chips: int) -> tuple[int, list[str]]:
    """How many of the chip's (or its slice's) torus axes one mesh axis of `chips` spans, as
    the engine lays it (topology.lay_out), and a note for each piece that is no ring (the
    formulas take each as one)."""
    axis = MeshAxis("X", chips)
    try:
        pieces = spans(axis, lay_out([axis], chip))
    except HardwareError as e:
        raise SpecError(str(e)) from None
    wrap = int(chip.figure("interconnect.wraparound_min_axis_size") or 0)
    notes = [f"a piece of {piece.size} chips is no ring (no wraparound): the formulas overstate its bandwidth"
             for piece, ring in pieces
             if not (ring if ring is not None else wrap and piece.size is not None and piece.size % wrap == 0)]
    if len(pieces) > 3:
        raise SpecError(f"{chips} chips span {len(pieces)} torus axes; the formulas are derived for 1 to 3")
    return len(pieces), notes


@dataclass(frozen=True)
class TrainingFormulas:
    """`symroof plan --symbolic` and `--optimize`: each kind's formulas on a named chip for a
    named model, the numbers at the plan's chips and batch, and the FSDP/TP split."""

    model: str
    chip: Chip
    chips: int
    batch: int
    slice: str | None
    formulas: dict[str, StrategyFormulas]
    split: Split | None         # with the formulas or --optimize: the mixed kind's X and Y at the plan
    notes: tuple[str, ...]
    ffn: int                    # the model's F
    optimized: bool = False     # the split asked for (--optimize), and shown
    attention: dict[str, sympy.Expr] = field(default_factory=dict)  # attention_share's, with the formulas
    context: int = 0            # the model's context, where the attention share is evaluated

    def _at(self, kind: str) -> dict[sympy.Symbol, sympy.Expr]:
        """The plan's sizes for a kind: B the batch, its chips on its axes."""
        at: dict[sympy.Symbol, sympy.Expr] = {B: sympy.Integer(self.batch), N: sympy.Integer(self.chips)}
        if kind == "tp":
            return at | {Y: sympy.Integer(self.chips)}
        if kind == "fsdp+tp":
            assert self.split is not None
            return at | {X: sympy.Integer(self.split.x), Y: sympy.Integer(self.split.y)}
        return at | {X: sympy.Integer(self.chips)}

    def evaluated(self, kind: str) -> dict[str, Any]:
        """The book's pass at the plan's sizes: T_math, T_comms (seconds, one MLP layer) and
        whether the compute hides the collectives."""
        f = self.formulas[kind]
        at = self._at(kind)
        t_math, t_comms = (f.numbers(e).xreplace(at) for e in (f.per_pass.t_math, f.per_pass.t_comms))
        return {"t_math": t_math, "t_comms": t_comms, "compute_bound": bool(t_math > t_comms)}

    def largest(self, kind: str) -> dict[str, sympy.Expr]:
        """The largest communication-bound batch per chip, per convention, where there is one."""
        f = self.formulas[kind]
        if kind == "tp":
            return {}
        return {name: f.largest_comms_bound(name) for name, p in (("per pass", f.per_pass), ("whole step", f.step))
                if p.condition is not sympy.nan}

    def table(self) -> str:
        v = self.formulas[next(iter(self.formulas))].values if self.formulas else chip_values(self.chip)
        lines = []
        if self.formulas:
            lines += [f"Strategy formulas: the book's MLP layer (How To Scale Your Model, part 5), derived by the "
                      f"engine for {self.model} on {self.chip.name}",
                      f"  D = {v[D]}, F = {v[F]}; C = {float(v[C]):.4g} FLOPs/s (bf16), W_bidi = "
                      f"{float(v[W_BIDI]):.4g} bytes/s (the book's W_ici: both directions of a link; "
                      f"{float(v[W_ICI]):.4g} one way), alpha = C / W_bidi = {pretty(v[ALPHA])}",
                      f"  per pass: {_CONVENTIONS['per pass']}",
                      f"  whole step: {_CONVENTIONS['whole step']}",
                      f"  at this plan: B = {self.batch} tokens on {self.chips} chips; times are one layer's MLP"]
            for kind, f in self.formulas.items():
                axes = ", ".join(f"{k} over {n} torus ax{'is' if n == 1 else 'es'}" for k, n in f.axes.items())
                lines += ["", f"{kind} ({axes})"]
                for name, p in ((f"per pass ({f.book_pass}, the book's)", f.per_pass), ("whole step", f.step)):
                    book = p.book()
                    lines.append(f"  {name}: T_math = {pretty(book['t_math'])}, T_comms = {pretty(book['t_comms'])}")
                    if book["condition"] is sympy.nan:
                        lines.append("    compute-bound: no formula in the kind's size alone (see the note)")
                        continue
                    lines.append(f"    compute-bound while {pretty(book['condition'])}"
                                 + ("" if book["condition"] is sympy.true else
                                    f"  ({pretty(f.numbers(p.condition))})")
                                 + (" at X = X_opt, Y = N / X_opt" if kind == "fsdp+tp" else ""))
                e = self.evaluated(kind)
                lines.append(f"  at this plan ({_sizes(self._at(kind), kind)}): T_math = {seconds(e['t_math'])}, "
                             f"T_comms = {seconds(e['t_comms'])}: "
                             + ("compute-bound" if e["compute_bound"] else "communication-bound"))
                largest = self.largest(kind)
                if largest:
                    lines.append(f"  largest communication-bound batch: {_per_chip(kind)} = "
                                 + ", ".join(f"{v} ({k})" for k, v in largest.items()) + " tokens a chip")
                lines += [f"  note: {n}" for n in f.notes]
            if self.attention:
                a, context = self.attention, sympy.Integer(self.context)
                T = dim_symbol("T")
                lines += ["", f"Attention in {self.model}'s template (T a symbol; the backward twice the forward, "
                              "the full T x T scores)",
                          f"  score matmuls (Q K^T, P V) / weight matmuls = {a['scores_to_matmuls']} (the "
                          "book: T/(8D) for multi-head attention with a gated MLP of F = 4D)",
                          f"  share of a step's FLOPs in the scores: {pretty(a['scores'])}; at T = {context} (the "
                          f"model's context) {float(a['scores'].xreplace({T: context})):.1%}, with the projections "
                          f"{float(a['attention'].xreplace({T: context})):.1%}"]
        if self.optimized and self.split is not None:
            s = self.split
            lines += ([""] if lines else []) + [
                f"Optimal FSDP x TP split of {self.chips} chips (B = {self.batch} tokens, F = "
                f"{self.ffn}): d/dX T_comms(X, N/X) = 0 gives X_opt = {pretty(s.x_opt_formula)} = "
                f"{float(s.x_opt):.4g}",
                f"  whole split: X = {s.x} (FSDP), Y = {s.y} (TP): {s.how}",
                "  T_comms of each split (forward, in units of 4 D / W_bidi): "
                + ", ".join(f"{x}x{y}: {float(t):.6g}" for x, y, t in s.candidates)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "chip": self.chip.name, "chips": self.chips, "batch": self.batch,
                               "conventions": _CONVENTIONS}
        if self.formulas:
            out["strategy_formulas"] = {
                k: f.to_dict() | {"at_plan": {n: (str(v) if isinstance(v, bool) else float(v))
                                              for n, v in self.evaluated(k).items()},
                                  "largest_comms_bound_batch_per_chip": {n: int(v) for n, v in self.largest(k).items()}}
                for k, f in self.formulas.items()}
        if self.attention:
            out["attention"] = {k: _both(v) for k, v in self.attention.items()} | {"context": self.context}
        if self.optimized and self.split is not None:
            out["optimal_split"] = self.split.to_dict()
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def _repr_latex_(self) -> str:
        parts = [f._repr_latex_() for f in self.formulas.values()]
        if self.optimized and self.split is not None:
            parts.append(self.split._repr_latex_())
        return "\n\n".join(parts)


def _per_chip(kind: str) -> str:
    return "B/N" if kind == "fsdp+tp" else "B/X"


def _sizes(at: Mapping[sympy.Symbol, sympy.Expr], kind: str) -> str:
    shown = [B] + ([Y] if kind == "tp" else [X, Y] if kind == "fsdp+tp" else [X])
    return ", ".join(f"{s} = {at[s]}" for s in shown)


def training_formulas(model: str, chip: str | Chip, chips: int, batch: int, *, slice: str | None = None,
                      symbolic: bool = True, optimize: bool = False,
                      models_file: str | None = None) -> TrainingFormulas:
    """What `symroof plan MODEL --symbolic` and `--optimize` print: each kind's formulas with
    the torus axes its chips span on the chip's slice (or pod), as the engine lays them, and
    the FSDP/TP split of `chips` at `batch` tokens."""
    found = chip if isinstance(chip, Chip) else get_chip(chip)
    _target(found)  # a torus, or refused before its slice is asked for
    notes: list[str] = []
    vendor = found.vendor_slice(chips) if slice is None and found.slice is None else None
    if vendor is not None and vendor != found.pod_shape:  # as `symroof chip CHIP --chips N` lays them
        slice = "x".join(map(str, vendor))
        notes.append(f"laid on {found.name}'s {slice} slice, the vendor's shape of {chips} chips (--slice for another)")
    laid = found.on_slice(slice) if slice else found
    if slice and math.prod(laid.slice or ()) != chips:
        raise SpecError(f"the slice {slice} has {math.prod(laid.slice or ())} chips, not {chips}")
    sizes = _configured(model, models_file)
    ffn = int(sizes["F"])
    if batch < chips:
        raise SpecError(f"a batch of {batch} tokens on {chips} chips leaves some without a token")
    split = optimal_split(chips, batch, ffn, chip=found, slice=slice)
    formulas: dict[str, StrategyFormulas] = {}
    if symbolic:
        n, pieces = torus_axes(laid, chips)
        notes += pieces
        assert split is not None
        m_x, m_y = split.m_x, split.m_y
        for kind, axes in (("dp", {"dp": n}), ("fsdp", {"fsdp": n}), ("tp", {"tp": n}),
                           ("fsdp+tp", {"fsdp": m_x, "tp": m_y})):
            formulas |= strategy_formulas(found, model, kinds=(kind,), n_axes=axes, models_file=models_file)
    attention = attention_share(model, models_file=models_file) if symbolic else {}
    return TrainingFormulas(model, found, chips, batch, slice, formulas, split, tuple(notes), ffn, optimize,
                            attention, int(sizes["context"]))


def _configured(model: str, models_file: str | None) -> dict[str, int]:
    """A named model's sizes, where models.json gives its configuration (a model given by its
    parameter count alone has no F, nor the template the attention share is counted on)."""
    config = get_model(model, models_file)
    if "params" in config:
        raise SpecError(f"{config['id']} is given by its parameter count only: the strategy formulas need its "
                        "configuration (D and F, and the template's sizes for attention's share)")
    return config["sizes"]
