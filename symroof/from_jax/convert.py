"""A jaxpr as a symroof program: one statement per equation that computes, in the
notation a person would write, with the jaxpr's symbolic dims as dim names.

    c:bf16[B,F] = dot_general[(([1], [0]), ([], []))] a b   ->   bf16[B, D] *_D bf16[D, F] -> bf16[B, F]

How each family is written (and what XLA's lowered module counts for it, which the
cross-check in from_jax.py relies on; benchmarks/xla_conventions.md):

* dot_general: a contraction, its contracted dims named (`*_{D}`), batch dims shared.
* elementwise arithmetic, comparisons, selects, shifts, unary functions: symroof's
  elementwise, unary and select kinds, one FLOP (or one transcendental) per element as XLA
  counts; `integer_pow` as the multiplies XLA emits for it (x^3: two); the functions XLA
  expands into polynomials (erfc, lgamma, digamma, erf_inv, asin, sinh, ...) at the
  FLOPs and transcendentals XLA counts for its expansion (ops/unary.py), a 16-bit float's
  two converts to fp32 and back explained.
* reduce_sum, reduce_max, reduce_min, reduce_prod, reduce_and, reduce_or, argmax, argmin:
  `sum_D`, `max_D`, `min_D`, `prod_D`, `all_D`, `any_D`, `argmax_D fp32[B, D] -> int32[B]`;
  cumsum, cumprod, cummax, cummin, cumlogsumexp: `cumsum_T fp32[B, T] -> fp32[B, T]`
  (jax_scans.py).
* convert_element_type, and bitcast_convert_type between dtypes of one width: a cast
  (`fp32[B, D] -> bf16[B, D]`), bytes only.
* gathers, slices, concatenation, updates: jax_data.py.
* shard_map and its collectives: jax_shard.py (a `mesh` line, splits as subscripts).
* jit's in/out shardings and sharding constraints: jax_gspmd.py (the splits carried
  through each statement as GSPMD carries them; symroof inserts the collectives).
* broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev, stop_gradient, copy: no
  statement. They change how an array is indexed, not its data (XLA's lowered module
  counts a transpose or reshape as a layout change, free); the next statement reads the
  array it came from, broadcasting by dim name (`bf16[B, D] + bf16[D]`).
* pjit, closed calls, custom_jvp/vjp calls and remat: their body, inline.
* scan: `repeat LENGTH { body }`, the body's slices of the scanned arrays as its operands;
  a while loop with a trip count known from its condition (`fori_loop`) the same, any
  other `repeat W1 {...}` with a symbol for the unknown trip count, and a warning.
* cond and switch: the branch that costs the most in every count (jax_cond.py), as XLA
  counts a conditional; not costed where no branch does.
* a PRNG key is its uint32 words (random_wrap, random_unwrap: no statement).
* anything else (sort, random_bits, ppermute, conv_general_dilated, reduce_window, ...):
  not costed, named in a warning with its count. Never dropped silently.

Dims: a symbolic dim is its own name (B); an integer its literal (4096); a composite dim
(B*T, from a reshape) a name of its own with a `let` line (`let BT = B*T`). Where one
statement has two axes of the same size (a square weight, D x D), the second gets an
alias (`let D2 = D`), so that each axis has its own label and the contraction is the
jaxpr's, not a guess; an array is read with the labels it was written with wherever they
fit (jax_labels.py), so that a `fused { ... }` block around its writer and its reader
keeps it on chip.

This module reads jaxprs and never imports JAX itself: from_jax.py traces.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import sympy

from .. import dtypes
from ..errors import SpecError
from .cond import Conds
from .data import DataMoves
from .gspmd import Gspmd
from .labels import Naming
from .loops import Loops
from .program import Converted, Statement, View, join_label, split_label, union
from .scans import COMBINE, REDUCE, Scans, subscript

# jaxpr primitive -> symroof word, for each written family
BINARY = {"add": "+", "add_any": "+", "sub": "-", "mul": "*", "div": "/", "max": "max", "min": "min",
          "and": "and", "or": "or", "xor": "xor", "rem": "rem", "pow": "pow", "atan2": "atan2",
          "eq": "compare", "ne": "compare", "lt": "compare", "le": "compare", "gt": "compare", "ge": "compare",
          "shift_left": "shl", "shift_right_logical": "shr", "shift_right_arithmetic": "shr"}
UNARY = {"exp": "exp", "log": "log", "tanh": "tanh", "rsqrt": "rsqrt", "sqrt": "sqrt", "logistic": "sigmoid",
         "square": "square", "abs": "abs", "neg": "neg", "sign": "sign", "floor": "floor", "ceil": "ceil",
         "round": "round", "not": "not", "is_finite": "isfinite", "erf": "erf", "cbrt": "cbrt", "sin": "sin",
         "cos": "cos", "tan": "tan", "expm1": "expm1", "log1p": "log1p", "exp2": "exp2",
         "population_count": "popcount", "clz": "clz", "erfc": "erfc", "erf_inv": "erfinv", "lgamma": "lgamma",
         "digamma": "digamma", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
         "asinh": "asinh", "acosh": "acosh", "atanh": "atanh"}
# computed in fp32 where the operand is a 16-bit float: XLA counts a convert in and out
UPCAST = ("erfc", "erf_inv", "lgamma", "digamma", "sinh", "cosh")
UPCAST_WHY = ("XLA computes erfc, erf_inv, lgamma, digamma, sinh and cosh of a 16-bit float in fp32: a convert in "
              "and out, 2 FLOPs per element")
CONVERT_WHY = "XLA counts a convert as 1 FLOP per element"
CONVERT_BROADCAST_WHY = ("XLA counts a convert of a broadcast array as 1 FLOP per element of the broadcast; symroof "
                         "casts the array before it is broadcast, bytes only")
DOT_NO_SUM_WHY = ("XLA counts a dot with no summed dim (an einsum like 'bnt,n->bnt') as a dot, 2 FLOPs per "
                  "product (a multiply and an add); symroof writes it as an elementwise product, 1 FLOP per element")
# no data moved: the next statement reads the array these index differently
LAYOUT = ("broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "stop_gradient", "copy", "copy_p",
          "optimization_barrier", "reduce_precision", "pvary", "rev", "random_wrap", "random_unwrap")
# constants made on the fly, read by nothing a statement counts
FREE = ("iota", "dim_as_value", "axis_index")
INLINE = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
          "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr"}


class Converter(Naming, Loops, Gspmd, DataMoves, Scans, Conds):
    def __init__(self, rename: Callable[[str], str] | None = None):
        """`rename`: a jaxpr dim's text -> the text it stands for (a trace whose dims were
        scaled so that shard_map's splits divide them: jax_import.py), or None."""
        self.rename = rename
        self.out = Converted()
        self.names: dict[str, str] = {}  # a dim's text (str of the jaxpr dim) -> its symroof name
        self.used: set[str] = set()  # every name given out
        self.aliases: dict[str, str] = {}
        self.locals: dict[str, str] = {}  # inside shard_map, a chip's share of a split dim (T2Y) -> its label (T2_Y)
        self.written: dict[int, dict[int, str]] = {}
        self.reads: Counter = Counter()
        self.made: dict[int, tuple[int, int, str, list[str | None]]] = {}
        self.splits: dict[int, tuple[str, ...]] = {}
        self.loops = 0

    def dim_text(self, dim) -> str:
        """A jaxpr dim as text in the user's dim names: B*T, B/2."""
        text = str(dim).replace(" ", "")
        return text if self.rename is None or isinstance(dim, int) else self.rename(text)

    # -- writing --------------------------------------------------------------------

    @staticmethod
    def dtype(aval_dtype) -> str:
        name = str(aval_dtype)
        if name.startswith("key<"):  # a PRNG key (key<fry>): its words are uint32s (random_wrap's operand)
            return "uint32"
        found = dtypes.lookup(name)
        if found is None:
            raise SpecError(f"a jaxpr value has dtype {name}, which symroof does not know")
        return found.name

    def emit(self, text: str, primitive: str, depth: int, xla_flops: sympy.Expr | None = None, why: str = "",
             xla_transcendentals: sympy.Expr | None = None) -> None:
        self.out.lines.append((depth, text + f"   # {primitive}"))
        inside = self.out.shard_maps > 0
        self.out.statements.append(Statement(text, primitive, depth, xla_flops or sympy.Integer(0), why, inside,
                                             self.out.shardings_read and not inside,
                                             xla_transcendentals or sympy.Integer(0), len(self.out.lines) - 1))

    # -- the walk -------------------------------------------------------------------

    def walk(self, jaxpr, env: dict, depth: int = 0) -> None:
        """Write each equation of a jaxpr (its inputs' views in `env`, by var), in order."""
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            handler = getattr(self, "_" + name, None)
            if name in LAYOUT:
                self._layout(eqn, env)
            elif name in FREE or (eqn.invars and all(self.view(v, env).const for v in eqn.invars)
                                  and name not in INLINE and name not in ("scan", "while", "cond")
                                  and name not in REDUCE and name not in COMBINE):
                self._constant(eqn, env)
            elif name in INLINE:
                self._inline(eqn, env, depth, INLINE[name])
            elif name in BINARY:
                self._elementwise(eqn, env, depth, BINARY[name])
            elif name in UNARY:
                self._elementwise(eqn, env, depth, UNARY[name])
            elif name in REDUCE:
                self._reduce(eqn, env, depth)
            elif handler is not None:
                handler(eqn, env, depth)
            else:
                self._skip(eqn, env)
            self.typed(eqn, env, depth)  # a mesh of explicit axes: the type's layout holds

    def _constant(self, eqn, env) -> None:
        """No statement: iota's array is made at run time; a dim's value (and arithmetic on
        literals and such values) is a Python number once the sizes are concrete. (A
        reduction or a scan of constants is computed: XLA folds elementwise ops on
        constants, not those.)"""
        name = eqn.primitive.name
        for v in eqn.outvars:
            env[v] = View.whole(self.dtype(v.aval.dtype), tuple(v.aval.shape), const=name != "iota")
        self.out.layout["constant" if name not in FREE else name] += 1

    def _skip(self, eqn, env) -> None:
        """Not costed: counted for the warning, its outputs treated as arrays of their own."""
        self.out.skipped[eqn.primitive.name] += 1
        for v in eqn.outvars:
            env[v] = View.whole(self.dtype(v.aval.dtype), tuple(v.aval.shape))

    def constant(self, var, value) -> View:
        """A closed jaxpr's constant (an array the function closes over: a weight), read as
        an array of its own; remembered, so the program declares it (jax_import.py)."""
        view = View.whole(self.dtype(var.aval.dtype), tuple(var.aval.shape))
        self.out.closed.setdefault(id(value), (view.dtype, view.dims, []))[2].append(view.array)
        return view

    def view(self, var, env) -> View:
        if type(var).__name__ == "Literal":
            return View.whole(self.dtype(var.aval.dtype), tuple(var.aval.shape), const=True)
        if var not in env:  # a closed-over constant
            env[var] = View.whole(self.dtype(var.aval.dtype), tuple(var.aval.shape))
        return env[var]

    def result(self, eqn, env, k: int = 0, unreduced: str | None = None,
               labels: list[str | None] | None = None, splits: list[str] | None = None) -> View:
        """A statement's result: an array of its own, written with `labels` (one per axis)
        and, outside shard_map, `splits`; inside shard_map, partial sums over the axes its
        operands' are (a local op on partial sums), or over `unreduced`."""
        v = eqn.outvars[k]
        if unreduced is None:
            unreduced = union(*(self.view(u, env).unreduced for u in eqn.invars))
        env[v] = View.whole(self.dtype(v.aval.dtype), tuple(v.aval.shape), unreduced=unreduced)
        if labels is not None:
            self.remember(env[v], labels, splits)
        return env[v]

    def _layout(self, eqn, env) -> None:
        name, x = eqn.primitive.name, self.view(eqn.invars[0], env)
        out = eqn.outvars[0]
        shape_in, shape_out = tuple(eqn.invars[0].aval.shape), tuple(out.aval.shape)
        if name == "broadcast_in_dim":
            axes: list[int | None] = [None] * len(shape_out)
            for k, j in enumerate(eqn.params["broadcast_dimensions"]):
                if shape_in[k] == shape_out[j]:  # kept, not a size-1 axis stretched
                    axes[j] = x.axes[k]
            env[out] = replace(x, axes=tuple(axes))
        elif name == "transpose":
            env[out] = replace(x, axes=tuple(x.axes[k] for k in eqn.params["permutation"]))
        elif name in ("reshape", "squeeze", "expand_dims") and _drop_ones(shape_in) == _drop_ones(shape_out):
            kept = iter([a for a, d in zip(x.axes, shape_in) if d != 1])
            env[out] = replace(x, axes=tuple(None if d == 1 else next(kept) for d in shape_out))
        elif name == "reshape":  # merges or splits dims: read as an array of the new shape
            env[out] = View.whole(x.dtype, shape_out, x.const, x.unreduced)
            self.reshaped(x, env[out], shape_in, shape_out)
        else:  # stop_gradient, copy, optimization_barrier, reduce_precision, rev (read backwards), a PRNG
            # key's wrapping (its words as a key): the same array
            for i, v in enumerate(eqn.outvars):
                env[v] = self.view(eqn.invars[i], env)
        self.out.layout[name] += 1

    def _inline(self, eqn, env, depth: int, key: str) -> None:
        inner = eqn.params[key]
        jaxpr = getattr(inner, "jaxpr", inner)  # ClosedJaxpr or Jaxpr
        for var, value in zip(jaxpr.constvars, getattr(inner, "consts", ())):
            if var not in env:
                env[var] = self.constant(var, value)
        inner_env = {**{v: env[v] for v in jaxpr.constvars if v in env},
                     **{iv: self.view(ov, env) for iv, ov in zip(jaxpr.invars, eqn.invars)}}
        self.read_shardings(eqn, jaxpr, inner_env, "in_shardings", depth)  # jit's, where given
        self.walk(jaxpr, inner_env, depth)
        self.read_shardings(eqn, jaxpr, inner_env, "out_shardings", depth)
        for ov, iv in zip(eqn.outvars, jaxpr.outvars):
            env[ov] = self.view(iv, inner_env)

    def _elementwise(self, eqn, env, depth: int, word: str) -> None:
        out = eqn.outvars[0]
        shape = tuple(out.aval.shape)
        views = [self.view(var, env) for var in eqn.invars]
        alike = [len(var.aval.shape) == len(shape) for var in eqn.invars]  # the rest: scalars
        names, labels = self.axis_labels(shape, reads=tuple(v for v, a in zip(views, alike) if a))
        # an operand's axis of size 1 where the result's is not is broadcast: not read, no label
        at = [[j if a and var.aval.shape[j] == shape[j] else None for j in range(len(v.axes))]
              for var, v, a in zip(eqn.invars, views, alike)]
        reads = [(v, [labels[j] if j is not None else None for j in axes], axes) for v, axes in zip(views, at)]
        self._widen(reads, views, shape, labels, eqn)
        operands, splits = self.operands(reads, len(shape), depth, what=eqn.primitive.name)
        result = self.result_text(self.dtype(out.aval.dtype), labels, splits)
        if word in ("+", "-", "*", "/"):
            text = f" {word} ".join(operands) + f" -> {result}"
        else:
            text = f"{word}({', '.join(operands)}) -> {result}"
        if eqn.primitive.name in UPCAST and dtypes.DTYPES[self.dtype(out.aval.dtype)].bytes == 2:
            self.emit(text, eqn.primitive.name, depth, 2 * self.size(names), UPCAST_WHY)
        else:
            self.emit(text, eqn.primitive.name, depth)
        self.result(eqn, env, labels=labels, splits=splits)

    def _widen(self, reads: list, views: list[View], shape: tuple, labels: list[str | None], eqn) -> None:
        """Where a result axis comes only from a broadcast (`x[D] * 2.0 -> [B, D]`, a mask
        `and`ed with a broadcast True), one operand is read as the broadcast array, at the
        result's shape: symroof's elementwise takes each result dim from an operand, and
        XLA's lowered module materializes the broadcast too. A constant is widened first
        (nothing is read twice), else the operand that carries the most axes; the bytes it
        counts for that operand are an upper bound, said in a note."""
        carried = {j for v, _, at in reads for j, k in zip(at, v.axes) if j is not None and k is not None}
        missing = [j for j in range(len(shape)) if j not in carried and labels[j] is not None]
        if not missing:
            return
        k = max(range(len(reads)), key=lambda i: (views[i].const, sum(k is not None for k in views[i].axes), -i))
        wide = View.whole(views[k].dtype, shape, const=views[k].const)
        reads[k] = (wide, list(labels), list(range(len(shape))))
        self._said(f"{eqn.primitive.name}: a result dim ({', '.join(str(labels[j]) for j in missing)}) comes only "
                   f"from a broadcast; one operand is read at the result's shape, so its bytes are an upper bound "
                   f"(a fused broadcast reads less)")

    def _integer_pow(self, eqn, env, depth: int) -> None:
        """x^y as XLA lowers it: squarings and multiplies (x^3: two), and a divide for y < 0."""
        y = eqn.params["y"]
        if y in (0, 1):
            self.out.layout["integer_pow"] += 1
            env[eqn.outvars[0]] = View.whole(self.dtype(eqn.outvars[0].aval.dtype), tuple(eqn.outvars[0].aval.shape)) \
                if y == 0 else self.view(eqn.invars[0], env)
            return
        multiplies = abs(y).bit_length() - 1 + bin(abs(y)).count("1") - 1
        shape, x = tuple(eqn.outvars[0].aval.shape), self.view(eqn.invars[0], env)
        _, labels = self.axis_labels(shape, reads=(x,))
        (first,), splits = self.operands([(x, labels, list(range(len(shape))))], len(shape), depth)
        t = self.result_text(self.dtype(eqn.outvars[0].aval.dtype), labels, splits)
        for k in range(multiplies):
            self.emit(f"{first} * {first} -> {t}" if k == 0 else f"{t} * {t} -> {t}", "integer_pow", depth)
        if y < 0:
            self.emit(f"recip({t}) -> {t}", "integer_pow", depth)
        self.result(eqn, env, labels=labels, splits=splits)

    def _select_n(self, eqn, env, depth: int) -> None:
        if len(eqn.invars) != 3:
            return self._skip(eqn, env)
        self._elementwise(eqn, env, depth, "select")

    def _clamp(self, eqn, env, depth: int) -> None:
        self._elementwise(eqn, env, depth, "clamp")

    def _bitcast_convert_type(self, eqn, env, depth: int) -> None:
        """The same bits read as another dtype of the same width: a cast, bytes only (XLA
        counts it 1 FLOP per element, as a convert); between widths, the shape changes too:
        not costed."""
        if tuple(eqn.invars[0].aval.shape) != tuple(eqn.outvars[0].aval.shape):
            return self._skip(eqn, env)
        self._convert_element_type(eqn, env, depth)

    def _convert_element_type(self, eqn, env, depth: int) -> None:
        var = eqn.invars[0]
        if type(var).__name__ == "Literal" or not var.aval.shape:
            self.out.layout["convert_element_type"] += 1  # a scalar constant: folded
            self.result(eqn, env)
            return
        shape, x = tuple(eqn.outvars[0].aval.shape), self.view(var, env)
        names, labels = self.axis_labels(shape, reads=(x,))
        (operand,), splits = self.operands([(x, labels, list(range(len(shape))))], len(shape), depth)
        kept = [j for j in range(len(shape)) if x.axes[j] is not None or labels[j] is None]
        dtype = self.dtype(eqn.outvars[0].aval.dtype)
        if len(kept) == len(shape):
            self.emit(f"{operand} -> {self.result_text(dtype, labels, splits)}", eqn.primitive.name, depth,
                      self.size(names), CONVERT_WHY)
            self.result(eqn, env, labels=labels, splits=splits)
            return
        # a cast of a broadcast (a causal mask's bool[T, T2] broadcast to [B, 1, T, T2], then
        # cast): the array is cast as it is, and its result read broadcast, as the operand was
        # (XLA's lowered module casts every element of the broadcast: 1 FLOP each)
        sub = [labels[j] for j in kept]
        self.emit(f"{operand} -> {self.result_text(dtype, sub, [splits[j] for j in kept])}", eqn.primitive.name,
                  depth, self.size(names), CONVERT_BROADCAST_WHY)
        made = View.whole(dtype, tuple(shape[j] for j in kept), unreduced=x.unreduced)
        self.remember(made, sub, [splits[j] for j in kept])
        env[eqn.outvars[0]] = replace(made, axes=tuple(kept.index(j) if j in kept else None for j in range(len(shape))))

    def _dot_general(self, eqn, env, depth: int) -> None:
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.invars
        ls, rs = tuple(lhs.aval.shape), tuple(rhs.aval.shape)
        lfree = [j for j in range(len(ls)) if j not in lc and j not in lb]
        rfree = [j for j in range(len(rs)) if j not in rc and j not in rb]
        # one label per distinct axis: batch pairs, the free axes, contracted pairs
        # (the contracted dims named before the free ones: x[B, D] @ w[D, D] keeps D for the
        # summed dim and calls w's free one D2)
        groups = [("b", j, k) for j, k in zip(lb, rb)] + [("c", j, k) for j, k in zip(lc, rc)] + \
            [("l", j, None) for j in lfree] + [("r", None, k) for k in rfree]
        dims = [ls[j] if j is not None else rs[k] for _, j, k in groups]
        # a summed axis of size 1 stays: XLA counts 2·M·N·K with K = 1, not an outer product
        kept = [i for i, d in enumerate(dims) if d != 1 or groups[i][0] == "c"]
        at = {i: n for n, i in enumerate(kept)}
        views = (self.view(lhs, env), self.view(rhs, env))
        sides: tuple[list, list] = ([None] * len(ls), [None] * len(rs))  # each operand axis's group
        for i, (_, j, k) in enumerate(groups):
            if j is not None:
                sides[0][j] = i
            if k is not None:
                sides[1][k] = i
        # each operand read with the labels its array was written with, where they fit
        prefer = self.prefer([(v, [at.get(i) for i in side]) for v, side in zip(views, sides)])
        names = self.labels([dims[i] for i in kept], frozenset(n for n, i in enumerate(kept) if groups[i][0] == "c"),
                            prefer)
        label = {i: n for i, n in zip(kept, names)}
        summed = [label[i] for i, g in enumerate(groups) if g[0] == "c" and i in label]
        result = [label.get(i) for i, g in enumerate(groups) if g[0] != "c"]
        op = "*" if not summed else "*_" + subscript(summed)
        # outside shard_map, a contracted dim split alike on both sides is summed by symroof's
        # own AllReduce (the result is written without {U_X}); inside, the body's psum sums it
        contracted = frozenset(i for i, g in enumerate(groups) if g[0] == "c")
        reads = [(v, [label.get(i) for i in side], side) for v, side in zip(views, sides)]
        (left, right), splits = self.operands(reads, len(groups), depth, contracted, summed, "dot_general")
        out_splits = [splits[i] for i, g in enumerate(groups) if g[0] != "c"]
        # inside shard_map, a contracted dim split over mesh axes leaves partial sums over
        # them: written {U_X}, so that symroof inserts no AllReduce (the body's psum is one)
        unreduced = union(*(split_label(label)[1] for label in summed),
                          *(self.view(v, env).unreduced for v in (lhs, rhs)))
        text = (f"{left} {op} {right} -> {self.result_text(self.dtype(eqn.outvars[0].aval.dtype), result, out_splits)}"
                + (f" {{{join_label('U', unreduced)}}}" if unreduced else ""))
        if summed:
            self.emit(text, "dot_general", depth)
        else:  # no summed dim (a head mask, a norm's scale, an outer product): symroof's elementwise product
            self.emit(text, "dot_general", depth, self.size([r for r in result if r is not None]), DOT_NO_SUM_WHY)
        self.result(eqn, env, unreduced=unreduced, labels=result, splits=out_splits)


def _drop_ones(shape: tuple) -> tuple:
    return tuple(d for d in shape if d != 1)
