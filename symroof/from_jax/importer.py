"""Import a JAX function: trace it with symbolic shapes, write its jaxpr as a symroof
program (each primitive by its rule: rules.py; the program as the spec's objects,
lang/source.py, resolved without reading text; its text printed only for the person),
and analyse that; at concrete sizes, check the counts against XLA's own cost analysis of
the same function.

    >>> imported = from_jax(lambda x, w: x @ w, "x=bf16[B, D]; w=bf16[D, F]")  # doctest: +SKIP
    >>> imported.text                                                           # doctest: +SKIP
    'bf16[B, D] *_D bf16[D, F] -> bf16[B, F]   # dot_general\\n'

JAX is optional: it is imported here, when a function is imported, never by the core.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Any

import numpy
import sympy

from .. import dtypes
from ..analysis import Analysis
from ..errors import SpecError, SymroofError, SymroofWarning
from ..hardware.machines import machine
from ..lang import source
from ..lang.relations import expression
from ..lang.structure import Structured, read_source
from ..models.decls import Options
from ..models.report import with_defaults
from ..models.whole import Model
from ..targets import load_target
from .cond import COUNTS
from .context import Context
from .convert import walk
from .program import Converted, Line, View, join_label, split_label
from .xla import FOLDED, SCALAR_CONVERT, folds

# symroof dtype -> numpy/JAX dtype name
_JAX_DTYPES = {"fp64": "float64", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "int64": "int64",
               "int32": "int32", "int16": "int16", "int8": "int8", "uint64": "uint64", "uint32": "uint32",
               "uint16": "uint16", "uint8": "uint8", "bool": "bool", "fp8_e4m3": "float8_e4m3fn",
               "fp8_e5m2": "float8_e5m2"}
_SHAPE = re.compile(r"\s*(?P<name>[A-Za-z_]\w*(?:\.\w+)*)\s*=\s*(?P<dtype>\w+)\s*\[(?P<dims>[^\]]*)\]\s*")
_DIM = re.compile(r"[^\W\d_][^\W_]*|\d+")


@dataclass(frozen=True)
class Argument:
    name: str
    dtype: str  # symroof's name
    dims: tuple[str, ...]  # dim names or literal sizes
    # a leaf of a pytree given whole (a model's params): the tree's structure, shared by its
    # leaves, which are in its flattening order
    treedef: Any = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(self.dims)}]"


def read_shapes(text: str | Mapping[str, Any]) -> list[Argument]:
    """`"x=bf16[B, D]; w=bf16[D, F]"` (or {"x": "bf16[B, D]", ...}) as arguments. In a
    mapping, an argument may be a pytree of arrays (a model's params, concrete: their
    shapes and dtypes are read, not their values), its leaves named by their paths
    (`p.transformer.h.0.attn.c_attn.kernel`) and its structure kept as it is.

    Examples:
        >>> [str(a) for a in read_shapes("x=bf16[B, D]; w=int8[D, 4096]")]
        ['x: bf16[B, D]', 'w: int8[D, 4096]']
    """
    if isinstance(text, Mapping):
        trees = [(k, v) for k, v in text.items() if not isinstance(v, str)]
        texts = "; ".join(f"{k}={v}" for k, v in text.items() if isinstance(v, str))
        return (read_shapes(texts) if texts else []) + [a for k, v in trees for a in _pytree(k, v)]
    out: list[Argument] = []
    at = 0
    for part in text.split(";"):
        if not part.strip():
            at += len(part) + 1
            continue
        found = _SHAPE.fullmatch(part)
        if found is None:
            raise SpecError("expected NAME=DTYPE[DIM, ...] (x=bf16[B, D]), separated by ';'", text,
                            at + len(part) - len(part.lstrip()))
        dtype = dtypes.lookup(found["dtype"])
        if dtype is None or dtype.name not in _JAX_DTYPES:
            hint = dtypes.suggest(found["dtype"])
            raise SpecError(f"{found['dtype']!r} is not a dtype JAX and symroof share"
                            + (f"; did you mean {hint}?" if hint else ""), text, at + found.start("dtype"))
        dims = tuple(d.strip() for d in found["dims"].split(",") if d.strip())
        for d in dims:
            if not _DIM.fullmatch(d):
                raise SpecError(f"a dim is a name or a whole number, not {d!r}", text, at + found.start("dims"))
        if any(a.name == found["name"] for a in out):
            raise SpecError(f"{found['name']} is given twice", text, at + found.start("name"))
        whole = next((a.name for a in out if found["name"].startswith(a.name + ".")
                      or a.name.startswith(found["name"] + ".")), None)
        if whole is not None:
            raise SpecError(f"{found['name']} and {whole} are both given: an argument is one array or a pytree of "
                            "leaves (p.w=..., p.b=...), not both", text, at + found.start("name"))
        out.append(Argument(found["name"], dtype.name, dims))
        at += len(part) + 1
    if not out:
        raise SpecError("--shapes gives no argument: write x=bf16[B, D]; w=bf16[D, F]")
    return out


def _pytree(root: str, tree: Any) -> list[Argument]:
    """A pytree argument's leaves as arguments: an array at its concrete shape, a string
    as the shape it writes (`"fp32[B, S, 4, 16]"`: a KV cache's leaves with symbolic dims)."""
    jax = _jax()
    names = {v: k for k, v in _JAX_DTYPES.items()}
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    if not flat:
        raise SpecError(f"{root}: the pytree given has no array")
    out = []
    for path, leaf in flat:
        name = ".".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)
        if isinstance(leaf, str):
            (written,) = read_shapes(f"leaf={leaf}")
            out.append(Argument(f"{root}.{name}" if name else root, written.dtype, written.dims, treedef))
            continue
        shape, dtype = getattr(leaf, "shape", None), str(getattr(leaf, "dtype", ""))
        if shape is None or dtype not in names:
            raise SpecError(f"{root}: a leaf at {jax.tree_util.keystr(path)} is not an array of a dtype symroof "
                            f"knows ({type(leaf).__name__}{', ' + dtype if dtype else ''})")
        out.append(Argument(f"{root}.{name}" if name else root, names[dtype], tuple(str(int(d)) for d in shape),
                            treedef))
    return out


def load_function(target: str) -> Callable:
    """`MODULE:FUNCTION` (a dotted module on the path, or a .py file) as the function; JAX
    checked first, so that a module that imports it says what to install."""
    _jax()
    return load_target(target, "FUNCTION")


def _jax() -> Any:
    try:
        import jax
    except ImportError:
        raise SymroofError("importing a JAX function needs JAX, which is not installed here: "
                           "pip install 'symroof[jax]' (in a clone: pip install -e '.[jax]')") from None
    return jax


@dataclass
class Imported:
    """A JAX function as a symroof program, with what could not be costed."""

    function: Callable
    arguments: list[Argument]
    converted: Converted
    jaxpr: str
    equations: int
    text: str  # the program in symroof notation
    warnings: list[str] = field(default_factory=list)
    # the bounds it was traced under (`T <= 64`): the program holds for sizes within them only
    bounds: tuple[str, ...] = ()

    def model(self, chip: Any = None, sizes: Mapping[str, int] | None = None) -> Model:
        """The program analysed (symroof.models.whole in prefill: the function as written, once);
        sizes outside the bounds it was traced under refused (the function computes otherwise
        there: a causal LM's min(n_positions, T) is T only up to n_positions)."""
        _within(self.bounds, sizes or {})
        return _model(self.structured, chip, sizes or {})

    @functools.cached_property
    def structured(self) -> Structured:
        """The program resolved from its objects (no text read), once however often it is analysed."""
        return read_source(self.converted.program())

    @functools.cached_property
    def analysis(self) -> Analysis:
        """The program's analysis, as `symroof.analyze` gives one (counts only: no chip),
        made once: `to_dict` and the LaTeX read the same one."""
        return self.model().analysis

    def to_dict(self, limit: str | Iterable[str] | None = None, solve: str | None = None) -> dict:
        """The program's analysis as a JSON-ready dict (`Analysis.to_dict`)."""
        return self.analysis.to_dict(limit=limit, solve=solve)

    def _repr_latex_(self) -> str:
        return self.analysis._repr_latex_()

    def dims(self) -> list[str]:
        return list(dict.fromkeys(d for a in self.arguments for d in a.dims if not d.isdigit()))

    def xla(self, sizes: Mapping[str, int]) -> dict:
        """symroof's FLOPs, transcendentals and bytes at concrete sizes beside XLA's cost
        analysis of the function (lowered, and compiled), each difference explained."""
        return cross_check(self, sizes)


def from_jax(function: Callable, shapes: str | Mapping[str, Any], params: str | Iterable[str] = (),
             most: Mapping[str, int] | None = None, least: Mapping[str, int] | None = None) -> Imported:
    """Trace `function` with symbolic shapes (`"x=bf16[B, D]; w=bf16[D, F]"`: its parameters
    by name; a pytree argument by its leaves, `p.w=bf16[D, F]; p.b=bf16[F]`, or, in a
    mapping, whole: `{"p": model.params, "ids": "int32[B, T]"}`) and write it as
    a symroof program. Primitives it cannot cost are named, with their counts, in
    `warnings` (and warned, SymroofWarning), never dropped silently.

    `params` names the arguments that are the model's parameters (its weights: `"w_up,
    w_down"`, or a pytree argument whole, `"p"`): each is declared `param` in the program,
    as is each array the function closes over, so `symroof model` counts them (params,
    weight_bytes).

    `most` bounds dims (`{"T": 1024}`: T <= 1024) for JAX's symbolic shapes, where the
    function takes the least of a dim and a number (transformers' causal LMs slice their
    position mask to min(n_positions, T)): the program holds for sizes within them.
    `least` likewise from below (`{"T": 2}`: a loss over the shifted sequence, T - 1)."""
    jax = _jax()
    arguments = read_shapes(shapes)
    weights = _weights(arguments, params)
    bounds = _bounds(arguments, most or {}, "<=") + _bounds(arguments, least or {}, ">=")
    traced, rename = _trace(jax, function, arguments, bounds)
    closed, dead = _live(traced)
    # what XLA folds marked before counting (xla.py); a conditional's branches priced to find the costliest (cond.py)
    ctx = Context(rename, folds(closed), _price)
    ctx.out.xla_extra += [(1, SCALAR_CONVERT, 0)] * ctx.folded.converts
    for a in arguments:
        for d in a.dims:
            if not d.isdigit():
                ctx.used.add(d)
    env = {v: View.whole(ctx.dtype(v.aval.dtype), tuple(v.aval.shape)) for v in closed.jaxpr.invars}
    env.update({v: ctx.constant(v, value) for v, value in zip(closed.jaxpr.constvars, closed.consts)})
    walk(ctx, closed.jaxpr, env)
    out = ctx.out
    out.dead = dead
    if out.mesh and not all(st.in_shard_map or st.derived for st in out.statements):
        out.notes.append("statements outside shard_map are costed whole on every chip of the mesh where no jit's "
                         "shardings lay their operands out (the splits XLA's partitioner would choose for them are "
                         "not derived)")
    warned = [f"not costed: {name} x {n} (no cost model; left out of every figure)"
              for name, n in sorted(out.skipped.items())] + out.notes
    for w in warned:
        warnings.warn(w, SymroofWarning, stacklevel=2)
    # each input as jit's in_shardings lay it out (B_X), where they do
    array = {a.name: env[v].array for a, v in zip(_leaves(jax, function, arguments), closed.jaxpr.invars)}
    split = {name: ctx.splits.get(k, ()) for name, k in array.items()}
    inputs = [replace(a, dims=tuple(join_label(d, s) for d, s in zip(a.dims, split[a.name])))
              if split.get(a.name) else a for a in arguments]
    out.params = _declarations([(a, array[a.name]) for a in arguments if a.name in weights], ctx)
    header = [f"# imported from {getattr(function, '__module__', '?')}:{getattr(function, '__name__', '?')} "
              f"by symroof from-jax", "# inputs: " + ", ".join(map(str, inputs))]
    if out.layout:
        free = ", ".join(f"{k} x {n}" for k, n in sorted(out.layout.items()))
        header.append(f"# free (layout, no statement): {free}")
    if bounds:
        header.append(f"# holds for {', '.join(bounds)} (the bounds it was traced under)")
    if dead:
        header.append(f"# dropped: {dead} jaxpr equation(s) whose results nothing uses (jit drops them too)")
    if out.skipped:
        header.append("# NOT COSTED: " + ", ".join(f"{k} x {n}" for k, n in sorted(out.skipped.items())))
    text = "\n".join(header) + "\n" + out.text
    if not out.statements:
        raise SpecError("the function computes nothing symroof can cost"
                        + (f" (not costed: {', '.join(out.skipped)})" if out.skipped else "")
                        + "".join(f"; {note}" for note in out.notes))
    return Imported(function, arguments, out, str(closed), len(traced.jaxpr.eqns), text, warned, bounds)


def _weights(arguments: list[Argument], params: str | Iterable[str]) -> set[str]:
    """The arguments (by name) that `params` names: `"w_up, w_down"`, an argument whole, or
    a pytree argument (`p`) or part of one (`p.dense`) with every leaf under it."""
    names = list(params.split(",") if isinstance(params, str) else params)
    if any(not isinstance(n, str) for n in names):
        raise SymroofError("params names arguments: give their names (\"w_up, w_down\")")
    names = [n.strip() for n in names]
    out: set[str] = set()
    for name in filter(None, names):
        found = {a.name for a in arguments if a.name == name or a.name.startswith(name + ".")}
        if not found:
            raise SpecError(f"params names {name!r}, which --shapes does not give (it gives "
                            f"{', '.join(a.name for a in arguments)})")
        out |= found
    return out


def _declarations(weights: list[tuple[Argument, int]], converter: Context) -> list[source.Declare]:
    """`param` lines: the arguments named as parameters (with their arrays), then each
    array the function closes over that a statement reads (a scalar constant is no weight:
    left out), each with a name symroof reads (no `_`, which subscripts: w_up is wUp), its
    dims split as each chip holds it, and what it stands for."""
    taken: set[str] = set()
    lines = []
    for a, array in weights:
        parts = a.name.split(".")
        name = source.declared_name(parts[1:] if len(parts) > 1 else parts, taken)
        dims = tuple(source.Dim(d, s) for d, s in zip(a.dims, _held(converter, array, len(a.dims))))
        lines.append(source.Declare("param", (source.Tensor(a.dtype, dims, name),), f"argument {a.name}"))
    k = 0
    for dtype, shape, arrays in converter.out.closed.values():
        read = [array for array in arrays if converter.reads[array]]
        if shape and read:
            k += 1
            dims = tuple(source.Dim(str(d), s) for d, s in zip(shape, _held(converter, read[0], len(shape))))
            name = source.declared_name([f"const{k}"], taken)
            lines.append(source.Declare("param", (source.Tensor(dtype, dims, name),),
                                        "an array the function closes over"))
    return lines


def _held(converter: Context, array: int, n: int) -> list[str]:
    """The mesh axes each of an array's n dims is split over on a chip: as jit's shardings
    lay it out, else as the first shard_map that reads it splits it (its in_specs: the
    labels it was read with, D_Y; a chip's share of a split dim, T2Y, is T2_Y), else none."""
    split = converter.splits.get(array)
    if split:
        return [split[k] if k < len(split) else "" for k in range(n)]
    written = converter.written.get(array, {})
    return [split_label(converter.locals.get(written[k], written[k]))[1] if k in written else "" for k in range(n)]


def _price(ctx: Context, lines: list[tuple[int, Line]]) -> dict[str, sympy.Expr]:
    """The counts of a program of these lines (with what the conversion has built so far:
    its mesh and lets), by cond.COUNTS: from the objects, no text read."""
    a = _model(read_source(ctx.out.program(lines)), None, {}).analysis
    return dict(zip(COUNTS, (a.flops, a.transcendentals, a.bytes,
                             sympy.Add(*(m.count * m.bytes for m in a.cost.moves)))))


def _live(closed: Any) -> tuple[Any, int]:
    """The jaxpr without the equations whose results nothing uses (JAX's own dead-code
    pass, into jit bodies and loops too): jit drops them before XLA sees the module, and
    a run never computes them. Its inputs all kept (each is a parameter). And how many
    equations were dropped."""
    from jax._src.interpreters import partial_eval
    from jax.extend.core import ClosedJaxpr
    jaxpr = closed.jaxpr
    live, _ = partial_eval.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
    dropped = _equations(jaxpr) - _equations(live)
    return (ClosedJaxpr(live.replace(invars=jaxpr.invars), closed.consts), dropped) if dropped else (closed, 0)


def _equations(jaxpr: Any) -> int:
    """Equations in a jaxpr and in the jaxprs inside it."""
    inner = [getattr(j, "jaxpr", j) for eqn in jaxpr.eqns for p in eqn.params.values()
             for j in (p if isinstance(p, tuple | list) else [p])
             if hasattr(j, "eqns") or hasattr(getattr(j, "jaxpr", None), "eqns")]
    return len(jaxpr.eqns) + sum(_equations(j) for j in inner)


# shard_map and jit's shardings need each split dim to divide by its mesh axes, which a
# bare symbol does not; traced again as GRAIN*B, it does (any split of up to 4096 in 2s,
# with 3, 5 and 7 among them), and each dim's text is read back in B (Context's
# `rename`): 2580480*B is B/2
GRAIN = 2**12 * 3**2 * 5 * 7


def _bounds(arguments: list[Argument], most: Mapping[str, int], relation: str) -> tuple[str, ...]:
    """Bounds as JAX's constraints on symbolic dims (`T <= 1024`), each dim one of the shapes'."""
    names = {d for a in arguments for d in a.dims if not d.isdigit()}
    out = []
    for name, value in most.items():
        if name not in names:
            raise SpecError(f"a bound on {name}, which no shape has (its dims: {', '.join(sorted(names))})")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpecError(f"the bound on {name} is {value!r}: a whole number of 1 or more")
        out.append(f"{name} {relation} {value}")
    return tuple(out)


def _within(bounds: tuple[str, ...], sizes: Mapping[str, int]) -> None:
    """Refuse sizes that break a bound (`T <= 64` at T = 100), in one line."""
    for bound in bounds:
        name, relation, value = bound.split(" ")
        if name in sizes and not (int(sizes[name]) <= int(value) if relation == "<=" else
                                  int(sizes[name]) >= int(value)):
            raise SpecError(f"{name} = {sizes[name]} breaks {bound}, the bound the function was traced under "
                            "(it computes otherwise there): import it again with another bound")


def _trace(jax: Any, function: Callable, arguments: list[Argument],
           bounds: tuple[str, ...] = ()) -> tuple[Any, Callable[[str], str] | None]:
    """The function's jaxpr with symbolic dims, and how to read its dims back where they
    had to be traced as multiples (None where not)."""
    try:
        return jax.make_jaxpr(function)(*_structs(jax, function, arguments, None, bounds=bounds)), None
    except SymroofError:
        raise
    except Exception as error:  # JAX's own complaint about the function at these shapes
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        if "divisible" not in str(error) and "evenly divide" not in str(error):  # shard_map's; jit's
            raise SpecError(f"JAX could not trace it at these shapes: {first}") from None
    try:
        closed = jax.make_jaxpr(function)(*_structs(jax, function, arguments, None, GRAIN, bounds))
    except Exception as error:  # noqa: BLE001 (scaling mended the splits: what JAX says now stands)
        text = str(error).replace(f"{GRAIN}*", "")
        raise SpecError(f"JAX could not trace it at these shapes: {text.splitlines()[0] if text else first}") from None

    def rename(text: str) -> str:
        value = expression(text)
        return str(value.xreplace({s: s / GRAIN for s in value.free_symbols})).replace(" ", "")

    return closed, rename


def _structs(jax: Any, function: Callable, arguments: list[Argument], sizes: Mapping[str, int] | None,
             grain: int = 1, bounds: tuple[str, ...] = ()) -> list:
    """The function's arguments as ShapeDtypeStructs, in its parameters' order: symbolic
    dims (one scope for all; each `grain` times its symbol) or, with `sizes`, concrete ones."""
    import jax.numpy as jnp
    params = _params(function, arguments)
    given = {_root(a.name) for a in arguments}
    missing = [p for p in params if p not in given]
    extra = list(dict.fromkeys(_root(a.name) for a in arguments if _root(a.name) not in params))
    if extra:
        raise SpecError(f"--shapes gives {', '.join(extra)}, which the function does not take "
                        f"(its parameters: {', '.join(params)})")
    if missing:  # (every argument given names a parameter, so some parameter is given)
        raise SpecError(f"--shapes does not give {', '.join(missing)} (its parameters: {', '.join(params)})")
    names = list(dict.fromkeys(d for a in arguments for d in a.dims if not d.isdigit()))
    if sizes is None:
        scaled = tuple(b if grain == 1 else re.sub(r"^(\w+) (<=|>=) ", rf"{grain}*\1 \2 {grain}*", b)
                       for b in bounds)
        symbols = dict(zip(names, jax.export.symbolic_shape(
            ", ".join(n if grain == 1 else f"{grain}*{n}" for n in names), constraints=scaled))) if names else {}
    else:
        unknown = [n for n in names if n not in sizes]
        if unknown:
            raise SpecError(f"give a size for {', '.join(unknown)} (--set {unknown[0]}=...)")
        symbols = {n: int(sizes[n]) for n in names}
    return [_tree(arguments, p, lambda a: jax.ShapeDtypeStruct(
        tuple(int(d) if d.isdigit() else symbols[d] for d in a.dims), jnp.dtype(_JAX_DTYPES[a.dtype])))
        for p in params if p in given]


def _root(name: str) -> str:
    """The function's parameter an argument is (a pytree's leaf `p.w`: p)."""
    return name.split(".", 1)[0]


def _tree(arguments: list[Argument], root: str, leaf: Callable[[Argument], object]) -> object:
    """The parameter `root` as the function takes it: one array, or a pytree of its leaves
    (`p.dense.w`: dicts, a level whose keys are 0, 1, ... n-1 a list; a pytree given whole
    its own structure), each `leaf(argument)`."""
    given = [a for a in arguments if _root(a.name) == root and a.treedef is not None]
    if given:
        return _jax().tree_util.tree_unflatten(given[0].treedef, [leaf(a) for a in given])
    tree: dict = {}
    for a in arguments:
        if a.name == root:
            return leaf(a)
        if _root(a.name) == root:
            node = tree
            *path, last = a.name.split(".")[1:]
            for key in path:
                node = node.setdefault(key, {})
            node[last] = leaf(a)
    return _lists(tree)


def _lists(node: object) -> object:
    if not isinstance(node, dict):
        return node
    node = {k: _lists(v) for k, v in node.items()}
    if set(node) == {str(i) for i in range(len(node))}:
        return [node[str(i)] for i in range(len(node))]
    return node


def _leaves(jax: Any, function: Callable, arguments: list[Argument]) -> list[Argument]:
    """The arguments in the order JAX flattens them into the jaxpr's inputs."""
    index = {a.name: k for k, a in enumerate(arguments)}
    params = [p for p in _params(function, arguments) if p in {_root(a.name) for a in arguments}]
    return [arguments[k] for p in params for k in jax.tree_util.tree_leaves(_tree(arguments, p,
                                                                                lambda a: index[a.name]))]


def _params(function: Callable, arguments: list[Argument]) -> list[str]:
    """The function's parameters, in order (the arguments' order where it has no signature)."""
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return list(dict.fromkeys(_root(a.name) for a in arguments))


def cross_check(imported: Imported, sizes: Mapping[str, int]) -> dict:
    """At concrete sizes: symroof's counts, XLA's lowered and compiled cost analysis, and
    the differences each convention explains (among them what XLA folds before it counts,
    jnp.tril's iota + 0 for one: xla.py). XLA counts a loop's body once, so loops are
    compared once through (symroof's figure for the whole function is given beside)."""
    jax = _jax()
    if imported.converted.shardings_read:
        # the lowered module is the whole program, before XLA partitions it (the mesh's counts,
        # not a chip's), and the partitioned one compiles only with a device for each chip
        raise SymroofError("--xla compares one chip's counts with XLA's lowered module, which for a jit with "
                           "shardings is the whole program, not yet partitioned: not compared (the compiled, "
                           "partitioned module needs a device per chip of the mesh)")
    _within(imported.bounds, sizes)
    structs = _structs(jax, imported.function, imported.arguments, sizes)
    lowered = jax.jit(imported.function).lower(*structs)
    low = _costs(lowered.cost_analysis())
    try:
        compiled = _costs(lowered.compile().cost_analysis())
    except Exception:  # noqa: BLE001 (a backend without it: the lowered figures still stand)
        compiled = None
    c = imported.converted
    structured = imported.structured
    # each scan's length at these sizes (a dim's name: through the program's lets), where it is unrolled
    at_sizes = _model(structured, None, _used(structured, sizes)).at \
        if any(u != 1 and not isinstance(n, int) for u, n in c.scans.values()) else sympy.Integer
    lengths = {at: n if isinstance(n, int) else 1 if u == 1 else int(at_sizes(expression(n)))
               for at, (u, n) in c.scans.items()}  # (unrolled once: each trip one copy, whatever its length)
    loops = {at: _xla_loop(unroll, lengths[at]) for at, (unroll, _) in c.scans.items()}
    copies = [loops[start][0] if start in loops else 1 for start, _ in c.loops]  # each block's, by its index
    once = _as_xla_counts(structured, copies)
    m = _model(once, None, _used(once, sizes))
    a = m.analysis

    def times(at: int) -> int:
        """How many times XLA counts what is at this position in the lines (a statement's,
        or what was said between them): the copies of each loop it lies in."""
        return math.prod(k for (start, end), k in zip(c.loops, copies) if start < at <= end)

    explained: dict[str, sympy.Expr] = {}
    for st in c.statements:
        if st.why:  # in the program's dims and lets: the model substitutes both
            explained[st.why] = explained.get(st.why, sympy.Integer(0)) + m.at(st.xla_flops) * times(st.line)
    counter = "XLA runs a scan as a while loop with a counter: an add and a compare"
    extras = [*c.xla_extra, *((2, counter, at) for at, (_, looped) in loops.items() if looped)]
    for extra, why, at in extras:
        explained[why] = explained.get(why, sympy.Integer(0)) + m.at(
            sympy.Integer(extra) if isinstance(extra, int) else extra) * times(at)
    explained_t: dict[str, sympy.Expr] = {}  # transcendentals, where a statement's differ (cumlogsumexp)
    for st in c.statements:
        if st.why and st.xla_transcendentals != 0:
            explained_t[st.why] = explained_t.get(st.why, sympy.Integer(0)) + m.at(st.xla_transcendentals) \
                * times(st.line)
    flops = int(a.flops)
    expected = flops + sum(int(v) for v in explained.values())
    expected_t = int(a.transcendentals) + sum(int(v) for v in explained_t.values())
    # XLA adds its counts up in float32: past 2^24 a count is to within its spacing there
    # (one per term added), not exact; below, exact
    terms = len(c.statements) + len(extras)
    resolution = _float32_spacing(low["flops"]) * terms
    result = {"sizes": dict(sizes), "symroof": {"flops": flops, "transcendentals": int(a.transcendentals),
                                                "bytes": int(a.bytes)},
              "xla_lowered": low, "xla_compiled": compiled,
              "explained_flops": {k: int(v) for k, v in explained.items()},
              "flops_agree": abs(low["flops"] - expected) <= resolution, "flops_unexplained": low["flops"] - expected,
              "xla_resolution": resolution,
              "explained_transcendentals": {k: int(v) for k, v in explained_t.items()},
              "transcendentals_agree": abs(low["transcendentals"] - expected_t)
              <= _float32_spacing(low["transcendentals"]) * terms,
              "transcendentals_unexplained": low["transcendentals"] - expected_t,
              "bytes_within_lowered": int(a.bytes) <= low["bytes"] + _float32_spacing(low["bytes"]) * terms,
              "loops_counted_once": _has_loops(imported),
              "unrolled": [f"a scan of {lengths[at]} unrolled {u}: XLA counts its body {loops[at][0]} time(s), "
                           "and so does the comparison" for at, (u, _) in c.scans.items() if u != 1],
              "not_costed": dict(c.skipped)}
    if not result["bytes_within_lowered"] and any(st.why == FOLDED for st in c.statements):
        # what XLA folds away it neither reads nor writes: the rest of the program against XLA's bytes
        folded = {i for i, st in enumerate(c.statements) if st.why == FOLDED}
        kept = _as_xla_counts(structured, copies, folded)
        rest = int(_model(kept, None, _used(once, sizes)).analysis.bytes) if kept.program.statements else 0
        result["bytes_without_folded"] = rest
        result["bytes_within_lowered"] = rest <= low["bytes"] + _float32_spacing(low["bytes"]) * terms
    if _has_loops(imported):
        whole = imported.model(None, sizes).analysis
        result["symroof_whole"] = {"flops": int(whole.flops), "bytes": int(whole.bytes)}
    return result


def _float32_spacing(count: int) -> int:
    """The gap between float32s at `count`: 0 below 2^24, where every whole number is one."""
    return int(numpy.spacing(numpy.float32(count))) if count >= 2**24 else 0


def _has_loops(imported: Imported) -> bool:
    return bool(imported.converted.loops)


def _used(structured: Structured, sizes: Mapping[str, int]) -> dict[str, int]:
    """The sizes of the names a program has (a model refuses the others): its dims, its
    `let` names and the symbols in its repeat counts and relations."""
    symbols: set[sympy.Basic] = set()
    for expr in (*structured.relations.values(), *(b.count for b in structured.blocks)):
        symbols |= expr.free_symbols
    names = {*structured.program.dims, *(s.name for s in structured.relations), *(str(s) for s in symbols)}
    return {k: v for k, v in sizes.items() if k in names}


def _model(structured: Structured, chip: Any, sizes: Mapping[str, int]) -> Model:
    """The program's model in prefill (the function as written, once), as symroof.models.whole
    makes one of a program's text."""
    target = chip if chip is None or hasattr(chip, "hbm_bw") else machine(chip)  # a name, a Chip or a Machine
    return Model(structured, target, with_defaults(structured, "prefill", None, dict(sizes)), Options(mode="prefill"))


def _xla_loop(unroll: int, length: int) -> tuple[int, bool]:
    """A scan of `length` unrolled `unroll` as JAX lowers it (jax's _scan_impl): how many
    copies of its body the lowered module holds, each counted once by XLA, and whether a
    while loop (with its counter) remains. unroll=1: one copy in a loop; unroll=k: k in
    a loop and the remainder after it; all of them where one trip would do (unroll=True)."""
    if unroll == 1:
        return 1, True
    trips, remainder = divmod(length, unroll) if unroll else (0, length)
    if trips == 1 and remainder == 0:
        trips, remainder = 0, length
    return (unroll if trips else 0) + remainder, trips > 0


def _as_xla_counts(structured: Structured, copies: list[int], drop: Set[int] = frozenset()) -> Structured:
    """The program as XLA's cost analysis counts it: each repeat block's body once, or as
    many times as an unrolled scan's lowered module holds it (`copies`, by the block's
    index); the statements in `drop` (by index) left out."""
    kept = [i for i in range(len(structured.program.statements)) if i not in drop]
    at = {i: n for n, i in enumerate(kept)}
    blocks = tuple(replace(b, count=sympy.Integer(k), statements=tuple(at[i] for i in b.statements if i in at))
                   for b, k in zip(structured.blocks, copies, strict=True))
    counts = [math.prod(k for b, k in zip(structured.blocks, copies) if i in b.statements) for i in kept]
    program = replace(structured.program, statements=tuple(structured.program.statements[i] for i in kept))
    return replace(structured, program=program, counts=tuple(sympy.Integer(n) for n in counts),
                   parts=tuple(structured.parts[i] for i in kept), blocks=blocks)


def _costs(found: Any) -> dict:
    if isinstance(found, list):  # older JAX: one dict per computation
        found = found[0] if found else {}
    found = found or {}
    return {"flops": int(found.get("flops", 0)), "transcendentals": int(found.get("transcendentals", 0)),
            "bytes": int(found.get("bytes accessed", 0))}
