"""The activations a training step keeps for its backward pass, under a remat policy
(model_decls.Options.remat): "full" keeps each repeated block's input (the first tensor
its first statement reads), "none" every statement's output (a fused block's
intermediates are recomputed, as flash attention does), "save=x,o,h" the tensors so named.
On a mesh each is its shard on a chip."""

from __future__ import annotations

import sympy

from .cost import Cost, cost
from .errors import SpecError
from .ir import Collective, dim_symbol, tensors_of
from .model_decls import Options
from .structure import Structured

# dims that carry the step's tokens in a template: the batch B, and a mixture of experts'
# tokens per expert C, routed `tokens` and experts' results `slots`; parameters have none
TOKEN_DIMS = frozenset({"B", "C", "tokens", "slots"})


def carries_tokens(dims) -> bool:
    """Whether a tensor with these (bare) dims is an activation: it carries the tokens."""
    return not TOKEN_DIMS.isdisjoint(dims)


def activation_bytes(s: Structured, options: Options) -> sympy.Expr:
    """The bytes kept, in the program's dims (relations not yet substituted)."""
    statements = s.program.statements
    mesh = s.program.mesh
    if options.remat == "none":
        each = cost(s.program).statements
        return sympy.Add(*(k * _output_bytes(c) for c, k in zip(each, s.counts)))
    if options.saved:  # the named tensors, each once per pass where it first appears
        found: dict[str, sympy.Expr] = {}
        for statement, count in zip(statements, s.counts):
            for tensor in tensors_of(statement):
                if tensor.name in options.saved and tensor.name not in found:
                    found[tensor.name] = count * _local_bytes(tensor, mesh)
        missing = [n for n in options.saved if n not in found]
        if missing:
            names = sorted({t.name for st in statements for t in tensors_of(st) if t.name})
            raise SpecError(f"remat save: no tensor named {', '.join(missing)} in the program (named: "
                            f"{', '.join(names) or 'none'})")
        return sympy.Add(*found.values())
    return sympy.Add(*(count * each for count, each in _block_inputs(s)))


def block_input_bytes(s: Structured) -> sympy.Expr:
    """The bytes a chip holds of the first outermost repeated block's input (what a
    pipeline stage receives from the one before it), in the program's dims; 0 without one."""
    return next((each for _, each in _block_inputs(s)), sympy.Integer(0))


def _block_inputs(s: Structured):
    """Each outermost repeated block's count and the bytes a chip holds of its input: what
    its first computation reads (FSDP's gathers of parameters come before it)."""
    statements = s.program.statements
    for block in s.blocks:
        work = [statements[i] for i in block.statements if not isinstance(statements[i], Collective)]
        if block.parent is None and work:
            yield block.count, _local_bytes(_first_input(work[0]), s.program.mesh)


def _output_bytes(c: Cost) -> sympy.Expr:
    """What a statement leaves in HBM: its last step's output (a fused block's outputs)."""
    return c.bytes_written


def _first_input(statement):
    inner = statement.statements[0] if hasattr(statement, "statements") else statement
    operands = getattr(inner, "operands", None) or (inner.input,)
    return operands[0]


def _local_bytes(tensor, mesh) -> sympy.Expr:
    """The bytes of a tensor each chip holds: its shard on a mesh."""
    sizes = [dim_symbol(d.name) if d.name is not None else sympy.Integer(d.size) for d in tensor.dims]
    if mesh is not None:
        sizes = [size / sympy.Mul(*(mesh.axis(a).size for a in d.axes)) for size, d in zip(sizes, tensor.dims)]
    return tensor.dtype.bytes * sympy.Mul(*sizes)
