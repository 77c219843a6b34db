"""What XLA folds away before it counts, for the cross-check (importer.cross_check).

`jax.jit(f).lower(...).cost_analysis()` counts the HLO module that JAX's StableHLO becomes,
and that conversion canonicalizes it (MLIR's folders) first. Measured with jax 0.10.2 (CPU),
the lowered module's `flops` against each jaxpr (tests/from_jax/test_from_jax_masks.py checks each):

* x + 0, 0 + x, x - 0 (-0.0 too), x * 1, 1 * x: x, whatever the dtype. Not folded: 0 - x,
  x / 1, a float's x * 0 and x - x, max(x, -inf), shifts by 0, a select on a constant.
* integers and booleans: x * 0, x & 0 -> 0; x | ~0 -> ~0; x & ~0, x | 0, x ^ 0 -> x;
  x - x, x ^ x -> 0; x == x, x <= x, x >= x -> true; x != x, x < x, x > x -> false.
  (x & x, x | x, max(x, x) are counted.)
* select(p, x, x) -> x.
* a slice of a constant of one value is that constant (what a symbolic trace writes as a
  gather of one window: `jnp.ones((P, P))[:T, :T]`, a causal mask's table sliced to T).
* an op whose operands are all constants (a fold's constant among them): a constant.
* but a convert of a scalar that is no constant in its function (a jit's argument, as
  jnp.where's fill value is in its body, or a computed scalar) is counted: 1 FLOP, where
  symroof writes a scalar's convert as free.

"A constant": a literal, a broadcast, reshape or convert of one (jnp.zeros, ones, full),
or a closed-over array of one value. Folds stay inside a function: a jit's body is a
function of its own (its arguments are not constants to it, its results not to its
caller), as is a loop's body; custom_jvp, custom_vjp and remat are inlined, constants
crossing. jnp.tril(x) (and tri, triu(k=1), arange) compute iota + 0, the offset k: the T^2
that a causal mask differs by.

What XLA folds it neither reads nor writes: where symroof's bytes exceed the lowered
module's, the cross-check compares them without the folded statements (a function whose
only op folds away: 0 bytes in XLA).

Not folds, but XLA's counts that the cross-check explains beside them (convert.py): a
dot_general with no summed dim, 2 FLOPs per product in the lowered module (a multiply and
an add) where symroof writes an elementwise product (1); a convert of a broadcast array,
1 FLOP per element of the broadcast, where symroof casts the array before it. And a scan
unrolled k times is counted as its lowered module holds it (importer.cross_check).

symroof counts each such statement as written, one FLOP per element; the cross-check
explains it (a statement's xla_flops, minus its elements). Code dead from the start (an
unused result) is dropped before conversion (importer._live), as jit drops it; what a
fold leaves dead (the compare in select(x > 0, x + 0, x)) XLA drops too, and it is
marked here as folded. Dead transcendentals (exp of a value only a folded op reads)
still differ in XLA's transcendental count.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy
import sympy

from ..ops import elementwise, unary
from .context import Folded
from .program import Eqn
from .rules import BINARY, UNARY

if TYPE_CHECKING:
    from .context import Context

FOLDED = "XLA folds x + 0, x * 1 and other identities with constants before counting"
CONSTANT_ARGUMENT = ("XLA counts an op on a jit's constant arguments inside its body (jnp.remainder's divisor checks): "
                     "a function's arguments are no constants to it, 1 FLOP per element")
SCALAR_CONVERT = "XLA counts a convert of a scalar that is no constant in its function (jnp.where's fill) as 1 FLOP"

# call-like primitives lowered inline (a constant argument is a constant in the body)
_INLINED = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
            "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr"}
# a constant in, the same constant out (convert: cast)
_PASS = ("broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "convert_element_type", "copy",
         "copy_p", "stop_gradient", "reduce_precision")
_NUMPY = {"add": numpy.add, "add_any": numpy.add, "sub": numpy.subtract, "mul": numpy.multiply,
          "max": numpy.maximum, "min": numpy.minimum, "and": numpy.bitwise_and, "or": numpy.bitwise_or,
          "xor": numpy.bitwise_xor, "eq": numpy.equal, "ne": numpy.not_equal, "lt": numpy.less,
          "le": numpy.less_equal, "gt": numpy.greater, "ge": numpy.greater_equal, "neg": numpy.negative,
          "not": numpy.invert, "abs": numpy.abs}
_SAME = {"sub": 0, "xor": 0, "eq": True, "le": True, "ge": True, "ne": False, "lt": False, "gt": False}
_ELEMENTWISE = set(BINARY) | set(UNARY) | {"select_n", "clamp", "integer_pow"}


def one_flop(primitive: str) -> bool:
    """Whether symroof counts the primitive as one FLOP per result element and no
    transcendental (ops/: select and clamp are selects; a unary function's count is
    ops/unary.py's, a binary op's ops/elementwise.py's)."""
    if primitive in ("select_n", "clamp"):
        return True
    if primitive in BINARY:
        return primitive not in elementwise.TRANSCENDENTAL
    return primitive in UNARY and unary.FUNCTIONS[UNARY[primitive]][:2] == (1, 0)


def folds(closed: Any) -> Folded:
    """What XLA folds in a closed jaxpr, and in the jaxprs inside it."""
    out = Folds()
    consts = {v: ("c", value) for v, c in zip(closed.jaxpr.constvars, closed.consts)
              if (value := _splat(c)) is not None}
    _run(closed.jaxpr, consts, out)
    return Folded(dict(out), out.converts)


class Folds(defaultdict):
    """Equation (by id) -> whether XLA folds it, once per visit in the order the rules
    walk; `converts`: the scalar converts XLA counts (one FLOP each) and symroof does not."""

    def __init__(self) -> None:
        super().__init__(list)
        self.converts = 0


def _splat(array: Any) -> Any:
    """The one value of an array of one value (0-d, of its dtype), or None."""
    try:
        a = numpy.asarray(array)
        if a.size == 0 or not (a == a.flat[0]).all():
            return None
    except (TypeError, ValueError):  # not numbers (a PRNG key)
        return None
    return a.reshape(-1)[:1].reshape(())


def _fact(var: Any, facts: dict) -> tuple[str, Any]:
    """("c", its value) for a constant (None: not known here, or not one value), else
    ("x", the variable it equals)."""
    if type(var).__name__ == "Literal":
        return ("c", numpy.asarray(var.val, dtype=var.aval.dtype))
    return facts.get(var, ("x", var))


def _run(jaxpr: Any, known: dict, out: Folds) -> list:
    facts = dict(known)
    for eqn in jaxpr.eqns:
        results, folded = _eqn(eqn, [_fact(v, facts) for v in eqn.invars], out)
        out[id(eqn)].append(folded)
        for v, fact in zip(eqn.outvars, results):
            if fact is not None:
                facts[v] = fact
    _dead(jaxpr, facts, out)
    return [_fact(v, facts) for v in jaxpr.outvars]


def _dead(jaxpr: Any, facts: dict, out: Folds) -> None:
    """Mark as folded the elementwise equations that only folded ones read (in
    select(x > 0, x + 0, x), the compare): XLA drops them once it has folded their
    readers. A folded equation whose result is read keeps its operands (x + 0: x)."""
    needed = {f[1] for v in jaxpr.outvars if (f := _fact(v, facts))[0] == "x"}
    for eqn in reversed(jaxpr.eqns):
        if not any(v in needed for v in eqn.outvars) and eqn.primitive.name in _ELEMENTWISE and not eqn.effects:
            out[id(eqn)][-1] = True  # read by nothing XLA keeps
            continue
        for v in eqn.invars:
            if type(v).__name__ != "Literal":
                f = _fact(v, facts)
                needed.update((v, f[1]) if f[0] == "x" else (v,))


def _eqn(eqn: Eqn, ins: list, out: Folds) -> tuple[list, bool]:
    """The facts of an equation's results (None: a value of its own), and whether XLA folds it."""
    name, none = eqn.primitive.name, [None] * len(eqn.outvars)
    if name in _INLINED:
        inner = eqn.params[_INLINED[name]]
        jaxpr = getattr(inner, "jaxpr", inner)
        return _run(jaxpr, dict(zip(jaxpr.invars, ins)), out), False
    subs = [j for p in eqn.params.values() for j in (p if isinstance(p, tuple | list) else [p])
            if hasattr(j, "eqns") or hasattr(getattr(j, "jaxpr", None), "eqns")]
    for j in subs:  # a function of its own: its arguments are not constants to it
        _run(getattr(j, "jaxpr", j), {}, out)
    if subs or not eqn.outvars:
        return none, False
    if name == "dim_as_value":  # a symbolic dim's value: a number at the sizes XLA is given
        return [("c", None)], False
    dtype = eqn.outvars[0].aval.dtype
    if _window_of(eqn) and ins[0][0] == "c":  # a window of a splat is the splat: XLA folds through a slice
        return [ins[0]], False
    if name in _PASS and ins and ins[0][0] == "c":
        value = ins[0][1]
        return [("c", None if value is None else value.astype(dtype))], name == "convert_element_type"
    if name == "convert_element_type" and not eqn.outvars[0].aval.shape and eqn.invars[0].aval.dtype != dtype:
        out.converts += 1
    if name not in _ELEMENTWISE or len(eqn.outvars) != 1:
        return none, False
    if all(f[0] == "c" for f in ins):  # folded, whether or not its value is known here
        return [("c", _evaluate(name, [f[1] for f in ins], dtype))], True
    found = _identity(name, ins, eqn.invars, eqn.outvars[0])
    return [found], found is not None


def _window_of(eqn: Eqn) -> bool:
    """A slice, or the gather JAX traces one to where a dim is symbolic (its indices in
    bounds: a gather in mode fill puts its fill value out of bounds, no longer a splat)."""
    return eqn.primitive.name == "slice" or eqn.primitive.name == "gather" \
        and getattr(eqn.params.get("mode"), "name", "") == "PROMISE_IN_BOUNDS"


def _evaluate(name: str, values: list, dtype: Any) -> Any:
    if any(v is None for v in values):
        return None
    try:
        if name == "select_n":
            return numpy.asarray(values[1 + int(values[0])]).astype(dtype)
        if name not in _NUMPY:
            return None
        with numpy.errstate(all="ignore"):
            return numpy.asarray(_NUMPY[name](*values)).astype(dtype)
    except (TypeError, ValueError, IndexError):
        return None


def _identity(name: str, ins: list, invars: list,
              result: Any) -> tuple[str, Any] | None:
    """The fact of a result XLA folds (a constant, or the operand it equals), else None."""
    # folded to an operand: the operand, or its broadcast (a value of its own)
    def same_as(fact: tuple[str, Any]) -> tuple[str, Any] | None:
        v = fact[1]
        if v.aval.dtype != result.aval.dtype:
            return None
        return fact if tuple(v.aval.shape) == tuple(result.aval.shape) else ("x", result)

    integral = numpy.dtype(invars[0].aval.dtype).kind in "biu"
    if name == "select_n":
        cases = ins[1:]
        return same_as(cases[0]) if all(f[0] == "x" and f[1] is cases[0][1] for f in cases) else None
    if len(ins) != 2:
        return None
    (a, b) = ins
    if a[0] == "x" and b[0] == "x":
        if a[1] is b[1] and integral and name in _SAME:
            return ("c", numpy.asarray(_SAME[name], dtype=result.aval.dtype))
        return None
    (x, c) = (a, b[1]) if b[0] == "c" else (b, a[1])
    if c is None or name == "sub" and b[0] != "c":  # a constant of values unknown here; 0 - x: counted
        return None
    zero, ones = bool((c == 0).all()), integral and bool((numpy.invert(c) == 0).all())
    if name in ("add", "add_any", "sub", "or", "xor") and zero or name == "and" and ones \
            or name == "mul" and bool((c == 1).all()):
        return same_as(x)
    if name in ("mul", "and") and zero and integral or name == "or" and ones:
        return ("c", numpy.asarray(c, dtype=result.aval.dtype))
    return None


def elementwise_folded(ctx: Context, eqn: Eqn, at: int) -> None:
    """The statement an elementwise rule wrote (at `at` in the statements, if it wrote one)
    marked with what XLA folds: minus its elements, FOLDED."""
    if ctx.folds(eqn) and one_flop(eqn.primitive.name) and len(ctx.out.statements) == at + 1:
        names, _ = ctx.axis_labels(tuple(eqn.outvars[0].aval.shape))
        ctx.out.statements[at] = replace(ctx.out.statements[at], xla_flops=-ctx.size(names), why=FOLDED)


def constant_counted(ctx: Context, eqn: Eqn) -> None:
    """An op on constants that XLA does not fold (a jit's constant arguments are no
    constants in its body): what it counts, said."""
    if one_flop(eqn.primitive.name) and not ctx.folds(eqn):
        names, _ = ctx.axis_labels(tuple(eqn.outvars[0].aval.shape))
        ctx.out.extra(ctx.size(names), CONSTANT_ARGUMENT)


def convert_folded(ctx: Context, eqn: Eqn, at: int) -> None:
    """A folded constant, cast (the statement at `at`, if one was written): XLA does not count it."""
    if ctx.folds(eqn) and len(ctx.out.statements) == at + 1:
        ctx.out.statements[at] = replace(ctx.out.statements[at], xla_flops=sympy.Integer(0), why="")
