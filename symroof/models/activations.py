"""The activations a training step keeps for its backward pass, under a remat policy
(decls.Options.remat): "full" keeps each repeated block's input (the first tensor
its first statement reads), "none" every statement's output (a fused block's
intermediates are recomputed, as flash attention does), "save=x,o,h" the tensors so named.
Under "full" and "save=" the statements after the last repeated block, which are not
recomputed, keep what their backward reads: the first one's input and each one's output;
in a program without a repeated block, nothing is recomputed and every statement keeps its
output, as under "none".
On a mesh each is its shard on a chip, as the chip holds it once the statement's collectives
have run (under Megatron sequence parallelism a row-parallel matmul's result is its shard of
the sequence, reduce-scattered; a collective written as a statement keeps nothing of its own:
the stream a column-parallel matmul reads whole is gathered again by the backward).

And the other side of the same policy: what the backward pass computes again because it
was not kept (`recomputed`). "full": every statement of each repeated block, once more (the
block's whole forward, as Megatron's and llm-analysis's 4x-forward count has it); "save=":
the statements of a repeated block whose output is not named in the list; "none": nothing.
Under every policy a fused block's intermediates, which never reach HBM, are computed again
by its backward (flash attention's backward recomputes the scores and probabilities from
q and k). A statement outside the repeated blocks keeps its output. A collective written as
a statement is run again only where it moves activations: a parameter gathered for the
forward (FSDP) is gathered once more by the backward, for the backward's own use, and that
gather serves the recomputation too."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import sympy

from ..errors import SpecError
from ..ir import Arrays, Collective, Fused, Statement, Tensor, dim_symbol, tensors_of
from ..lang.structure import Structured
from ..mesh import Mesh
from ..roofline.cost import Cost, combine, statement_cost, statement_costs
from .decls import Options

# dims that carry the step's tokens in a template: the batch B, and a mixture of experts'
# tokens per expert C (Ct per expert a decode step touches), routed `tokens` and experts'
# results `slots`; parameters have none
TOKEN_DIMS = frozenset({"B", "C", "Ct", "tokens", "slots"})


def carries_tokens(dims: Iterable[str | None]) -> bool:
    """Whether a tensor with these (bare) dims is an activation: it carries the tokens."""
    return not TOKEN_DIMS.isdisjoint(dims)


def activation_bytes(s: Structured, options: Options) -> sympy.Expr:
    """The bytes kept, in the program's dims (relations not yet substituted)."""
    statements = s.program.statements
    mesh = s.program.mesh
    if options.remat == "none":
        each = statement_costs(s.program)
        return sympy.Add(*(k * _kept(statement, c, mesh) for statement, c, k in zip(statements, each, s.counts)))
    if options.saved:  # the named tensors, each once per pass where it first appears
        _check_saved(s, options)
        found: dict[str, sympy.Expr] = {}
        for statement, count in zip(statements, s.counts):
            for tensor in tensors_of(statement):
                if tensor.name in options.saved and tensor.name not in found:
                    found[tensor.name] = count * _local_bytes(tensor, mesh)
        return sympy.Add(*found.values()) + _after_blocks(s)
    return sympy.Add(*(count * each for count, each in _block_inputs(s))) + _after_blocks(s)


def _after_blocks(s: Structured) -> sympy.Expr:
    """What the statements after the last repeated block keep, none of them recomputed: the
    first one's input (the last block's output) and each one's output (the final norm's, the
    LM head's logits, which the loss's gradient reads). Those before the first block leave
    only its input, counted with the blocks' (a gather's backward reads its indices alone).
    A program without a repeated block recomputes nothing, so each statement keeps its
    output, as under "none"."""
    statements = s.program.statements
    inside = [i for block in s.blocks if block.parent is None for i in block.statements]
    after = [i for i in range(max(inside) + 1 if inside else 0, len(statements))
             if not isinstance(statements[i], (Collective, Arrays))]
    if not after:
        return sympy.Integer(0)
    each = statement_costs(s.program)
    first = _local_bytes(_first_input(statements[after[0]]), s.program.mesh) if inside else sympy.Integer(0)
    return first + sympy.Add(*(s.counts[i] * _kept(statements[i], each[i], s.program.mesh) for i in after))


def recomputed(s: Structured, options: Options) -> list[tuple[int, Cost]]:
    """What the backward pass computes again (see the module docstring): for each forward
    statement it recomputes, the statement's index and the cost of what is run again, per
    chip and once (the statement's `counts` scale it as they scale the statement)."""
    statements = s.program.statements
    mesh = s.program.mesh
    if options.saved:
        _check_saved(s, options)
    inside = {i for block in s.blocks if block.parent is None for i in block.statements}
    found = []
    for i, statement in enumerate(statements):
        each = statement_cost(statement, mesh)
        if i in inside and _run_again(statement, options):
            found.append((i, each))
        if isinstance(statement, Fused) and len(statement.statements) > 1:  # its intermediates, in its backward
            found.append((i, combine(list(each.statements[:-1]), mesh)))
    return found


def _check_saved(s: Structured, options: Options) -> None:
    """A `save=` policy names tensors the program has (a misspelt name would keep nothing)."""
    names = {t.name for statement in s.program.statements for t in tensors_of(statement) if t.name}
    missing = [n for n in options.saved if n not in names]
    if missing:
        raise SpecError(f"remat save: no tensor named {', '.join(missing)} in the program (named: "
                        f"{', '.join(sorted(names)) or 'none'})")


def _run_again(statement: Statement, options: Options) -> bool:
    """Whether a statement of a repeated block is recomputed under the policy."""
    if options.remat == "none" or isinstance(statement, Arrays):
        return False
    if isinstance(statement, Collective) and not carries_tokens(d.name for d in statement.input.dims):
        return False  # a parameter's gather: the backward's own serves (see the module docstring)
    if options.saved:
        return statement.output.name not in options.saved  # a fused block's: its last statement's
    return True


def block_input_bytes(s: Structured) -> sympy.Expr:
    """The bytes a chip holds of the first outermost repeated block's input (what a
    pipeline stage receives from the one before it), in the program's dims; 0 without one."""
    return next((each for _, each in _block_inputs(s)), sympy.Integer(0))


def _block_inputs(s: Structured) -> Iterator[tuple[sympy.Expr, sympy.Expr]]:
    """Each outermost repeated block's count and the bytes a chip holds of its input: what
    its first computation reads (FSDP's gathers of parameters come before it)."""
    statements = s.program.statements
    for block in s.blocks:
        work = [statements[i] for i in block.statements if not isinstance(statements[i], Collective)]
        if block.parent is None and work:
            yield block.count, _local_bytes(_first_input(work[0]), s.program.mesh)


def _kept(statement: Statement, c: Cost, mesh: Mesh | None) -> sympy.Expr:
    """What a statement leaves in HBM: a fused block's outputs, another statement's result
    as its chip holds it once its collectives have run (a row-parallel matmul's partial sums
    written whole, then reduce-scattered under Megatron sequence parallelism, keep their
    shard); a collective written as a statement keeps nothing of its own."""
    if isinstance(statement, (Collective, Arrays)):
        return sympy.Integer(0)
    return c.bytes_written if isinstance(statement, Fused) else _local_bytes(statement.output, mesh)


def _first_input(statement: Statement) -> Tensor:
    inner = statement.statements[0] if isinstance(statement, Fused) else statement
    return inner.input if isinstance(inner, Collective) else inner.operands[0]


def _local_bytes(tensor: Tensor, mesh: Mesh | None) -> sympy.Expr:
    """The bytes of a tensor each chip holds: its shard on a mesh."""
    sizes = [dim_symbol(d.name) if d.name is not None else sympy.Integer(d.size) for d in tensor.dims]
    if mesh is not None:
        sizes = [size / mesh.over(d.axes) for size, d in zip(sizes, tensor.dims)]
    return tensor.dtype.bytes * sympy.Mul(*sizes)
