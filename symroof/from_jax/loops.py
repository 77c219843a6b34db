"""Loops in a jaxpr as `repeat` blocks (the scan and while rules): a scan runs its
body `length` times; a while loop whose condition is `i < n` on a literal start and
bound (a fori_loop) runs it that many times, any other `W1` times, a symbol the user sets,
with a warning."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .program import Closed, Env, Eqn, Opened, View
from .rules import rule, walk

if TYPE_CHECKING:
    from .context import Context


@rule("scan", on_constants=True)
def scan(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    p = eqn.params
    body = p["jaxpr"]
    consts, carry = p["num_consts"], p["num_carry"]
    length = p["length"]
    unroll = int(p.get("unroll", 1))  # iterations per trip of the while loop XLA runs (importer.py)
    ctx.out.scans[len(ctx.out.lines)] = (unroll, length if isinstance(length, int) else ctx.dim_name(length))
    loop = _open(ctx, depth, Opened(ctx.dim_name(length), "scan" + (f", unroll={unroll}" if unroll != 1 else "")))
    inner = {}
    for k, (iv, ov) in enumerate(zip(body.jaxpr.invars, eqn.invars)):
        v = ctx.view(ov, env)
        if k >= consts + carry:  # a slice of a scanned array: its first axis dropped
            v = replace(v, axes=v.axes[1:], const=False, unreduced="")
        elif k >= consts:
            v = _carry(v, iv)
        inner[iv] = v
    for var, value in zip(body.jaxpr.constvars, body.consts):
        inner[var] = ctx.constant(var, value)
    walk(ctx, body.jaxpr, inner, depth + 1)
    _close(ctx, depth, loop)  # (XLA's loop counter: importer.cross_check)
    for n, (v, iv) in enumerate(zip(eqn.outvars, body.jaxpr.outvars)):
        env[v] = View.whole(ctx.dtype(v.aval.dtype), tuple(v.aval.shape))
        _carried(ctx, ctx.view(iv, inner), env[v], stacked=n >= carry)


@rule("while", on_constants=True)
def while_loop(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    p = eqn.params
    known = _trip_count(p, eqn.invars)
    trips = str(known) if known is not None else f"W{ctx.loops + 1}"
    if known is None:
        ctx.loops += 1
        ctx.out.notes.append(f"a while loop's trip count is not known from its condition: written "
                             f"repeat {trips}; give it with --set {trips}=N")
    loop = _open(ctx, depth, Opened(trips, "while"))
    # the condition, then the body, each trip (the condition's last test, one more, is left out)
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    body = p["body_jaxpr"].jaxpr
    carried = [_carry(ctx.view(v, env), iv) for v, iv in zip(eqn.invars[nc + nb:], body.invars[nb:])]
    cond = p["cond_jaxpr"].jaxpr
    walk(ctx, cond, {**dict(zip(cond.invars, [*(ctx.view(v, env) for v in eqn.invars[:nc]), *carried]))},
              depth + 1)
    consts = [ctx.view(v, env) for v in eqn.invars[nc:nc + nb]]
    inner = dict(zip(body.invars, [*consts, *carried]))
    walk(ctx, body, inner, depth + 1)
    _close(ctx, depth, loop)
    for v, iv in zip(eqn.outvars, body.outvars):
        env[v] = View.whole(ctx.dtype(v.aval.dtype), tuple(v.aval.shape))
        _carried(ctx, ctx.view(iv, inner), env[v])


def _open(ctx: Context, depth: int, line: Opened) -> int:
    """A repeat line written; the loop's index in out.loops, its end to come."""
    ctx.out.loops.append((len(ctx.out.lines), -1))
    ctx.out.lines.append((depth, line))
    return len(ctx.out.loops) - 1


def _close(ctx: Context, depth: int, loop: int) -> None:
    ctx.out.loops[loop] = (ctx.out.loops[loop][0], len(ctx.out.lines))
    ctx.out.lines.append((depth, Closed()))


def _carried(ctx: Context, last: View, out: View, stacked: bool = False) -> None:
    """A loop's result split as the body's last value was (a scan's stacked results with
    their new first axis whole), as GSPMD keeps a carry's sharding."""
    split = ctx.splits.get(last.array)
    if split:
        axes = ["" if k is None or k >= len(split) else split[k] for k in last.axes]
        ctx.splits[out.array] = tuple([""] * stacked + axes)


def _carry(first: View, var: Any) -> View:
    """A carry as the body reads it: a constant only on the first trip (a counter from 0),
    and after it an array of the carry's whole shape (an accumulator that starts as
    broadcast zeros is read as the array it becomes)."""
    shape = tuple(var.aval.shape)
    if any(k is None and d != 1 for k, d in zip(first.axes, shape)):
        return View.whole(first.dtype, shape, unreduced=first.unreduced)
    return replace(first, const=False)


def _trip_count(params: dict, invars: list) -> int | None:
    """A fori_loop's trip count: the condition is `i < n` on the first carried value, a
    literal start, and a literal (or constant) bound."""
    cond = params["cond_jaxpr"].jaxpr
    nconst = params["cond_nconsts"]
    if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
        return None
    a, b = cond.eqns[0].invars
    carried = cond.invars[nconst:]
    start_var = invars[nconst + params["body_nconsts"]] if carried and a is carried[0] else None
    if start_var is None or type(start_var).__name__ != "Literal" or type(b).__name__ != "Literal":
        return None
    trips = int(b.val) - int(start_var.val)
    return trips if trips > 0 else None

