"""The table of rules: a jaxpr primitive's name -> the rule that writes its equations, as
JAX registers a cost rule per primitive. A rule is a plain function
`(ctx, eqn, env, depth) -> None`: it reads its operands' views from `env`, writes its
statements into the context (context.py) and binds its results' views in `env`.

Each family registers its rules where it is written, with `@rule("add", "sub", ...)`:
convert.py (elementwise, unary, dot_general, casts, layout ops, inlined calls), scans.py
(reductions, cumulative ops), data.py (gathers, slices, concatenation), scatter.py
(scatters, pads), loops.py (scan, while), cond.py (cond), shard.py (shard_map and its
collectives), gspmd.py (sharding constraints). convert.py imports every family, so the
table is whole once it is imported. A primitive without a rule is not costed: counted
for the warning (`not_costed`), never dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .program import Env, Eqn, View

if TYPE_CHECKING:
    from .context import Context

Rule = Callable[["Context", Eqn, Env, int], None]


@dataclass(frozen=True)
class Entry:
    write: Rule
    # written even where every operand is a constant known with the sizes (a reduction or a
    # scan of constants is computed: XLA folds elementwise ops on constants, not those)
    on_constants: bool = False


RULES: dict[str, Entry] = {}
# run after each equation whatever its rule (a mesh of explicit axes: the type's layout holds, gspmd.py)
AFTER: list[Rule] = []

# jaxpr primitive -> symroof word, for the elementwise and unary families (convert.py)
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
# constants made on the fly, read by nothing a statement counts
FREE = ("iota", "dim_as_value", "axis_index")
# the rule of an equation that makes a constant (FREE's, or one whose operands are all
# constants): no primitive is so named (convert.py registers it)
CONSTANT = "(constant)"


def rule(*names: str, on_constants: bool = False) -> Callable[[Rule], Rule]:
    """Register the decorated function as the rule of each primitive named."""
    def register(write: Rule) -> Rule:
        for name in names:
            if name in RULES:
                raise ValueError(f"two rules for {name}")
            RULES[name] = Entry(write, on_constants)
        return write
    return register


def after_each(hook: Rule) -> Rule:
    AFTER.append(hook)
    return hook


def walk(ctx: Context, jaxpr: Any, env: Env, depth: int = 0) -> None:
    """Write each equation of a jaxpr (its inputs' views in `env`, by var), in order."""
    for eqn in jaxpr.eqns:
        entry = RULES.get(eqn.primitive.name)
        if (entry is None or not entry.on_constants) and (
                eqn.primitive.name in FREE or (eqn.invars and all(ctx.view(v, env).const for v in eqn.invars))):
            RULES[CONSTANT].write(ctx, eqn, env, depth)
        elif entry is None:
            not_costed(ctx, eqn, env)
        else:
            entry.write(ctx, eqn, env, depth)
        for hook in AFTER:
            hook(ctx, eqn, env, depth)


def not_costed(ctx: Context, eqn: Eqn, env: Env) -> None:
    """Not costed: counted for the warning, its outputs treated as arrays of their own."""
    ctx.out.skipped[eqn.primitive.name] += 1
    for v in eqn.outvars:
        env[v] = View.whole(ctx.dtype(v.aval.dtype), tuple(v.aval.shape))

