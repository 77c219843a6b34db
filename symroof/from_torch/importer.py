"""Import a PyTorch module: export it with symbolic dims (`torch.export.export`, the dims
named through `torch.export.Dim`), write its ATen graph as a symroof program (each op by
its rule: rules.py; the program as the spec's objects, resolved without reading text;
its text printed only for the person), and analyse that; at concrete sizes, check the
FLOPs against torch's own `FlopCounterMode` run on the module.

    >>> import torch                                                   # doctest: +SKIP
    >>> from torch.export import Dim                                    # doctest: +SKIP
    >>> mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))  # doctest: +SKIP
    >>> imported = from_torch(mlp, (torch.randn(8, 64),), ({0: Dim("B")},))  # doctest: +SKIP
    >>> imported.analysis.flops        # 2·64·256 + 256 + 66·256 (GELU's erf form) + 2·256·64 + 64  # doctest: +SKIP
    82752*B

A factory for the command line (`symroof from-torch my_model.py:make`) returns the module,
its example inputs and their dynamic shapes: `(module, args, dynamic_shapes)`, as
`torch.export.export` takes them. The module is exported in eval mode as it is given
(put it in inference mode in the factory, with its `eval` method: dropout in training mode
is not costed, and said).

PyTorch is optional: it is imported here, when a module is imported, never by the core.
"""

from __future__ import annotations

import collections
import functools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy

from .. import dtypes
from ..analysis import Analysis
from ..errors import SpecError, SymroofError, SymroofWarning
from ..hardware.machines import machine
from ..lang import source
from ..lang.structure import Structured, read_source
from ..models.decls import Options
from ..models.report import with_defaults
from ..models.whole import Model
from .check import cross_check
from .framework import load_torch
from .program import Value, Writer, batched, full, vmapped
from .rules import ELEMENTWISE, LAYOUT, RULES, SUBGRAPHS, VMAP

# torch dtype (its str without "torch.") -> symroof's name
_DTYPES = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int64": "int64",
           "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
           "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2", "complex64": None, "complex128": None}


@dataclass
class Imported:
    """A PyTorch module as a symroof program, with what could not be costed."""

    module: Any
    args: tuple
    dynamic_shapes: Any
    program: source.Program
    # each user dim's name -> every (input, axis) that has it (B in each of a KV cache's tensors)
    axes: dict[str, list[tuple[int, int]]]
    nodes: int  # ATen op nodes in the exported graph
    writer: Writer
    params: int  # the module's parameters declared (a tied weight once)
    warnings: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return str(self.program)

    @functools.cached_property
    def structured(self) -> Structured:
        return read_source(self.program)

    def model(self, chip: Any = None, sizes: Mapping[str, int] | None = None) -> Model:
        """The program analysed (symroof.models.whole in prefill: the module run once)."""
        target = chip if chip is None or hasattr(chip, "hbm_bw") else machine(chip)
        return Model(self.structured, target, with_defaults(self.structured, "prefill", None, dict(sizes or {})),
                     Options(mode="prefill"))

    @functools.cached_property
    def analysis(self) -> Analysis:
        return self.model().analysis

    @property
    def dims(self) -> list[str]:
        """The user's dim names, in the order the inputs give them."""
        return list(self.axes)

    def _repr_latex_(self) -> str:
        return self.analysis._repr_latex_()

    def flop_counter(self, sizes: Mapping[str, int]) -> dict:
        """symroof's matrix-unit FLOPs at these sizes beside torch's FlopCounterMode, run on
        the module with inputs of these sizes (check.py says what each counts)."""
        return cross_check(self, sizes)


def from_torch(module: Any, args: Sequence, dynamic_shapes: Any = None, kwargs: Mapping | None = None) -> Imported:
    """Export `module` on `args` with `dynamic_shapes` (torch.export's: each dynamic axis a
    `torch.export.Dim`, its name the dim's name in the program) and write it as a symroof
    program. Parameters become `param` declarations (a tied weight once); buffers are read
    as tensors, their bytes counted, no parameters.
    Ops without a rule are named in `warnings` with their counts (and warned,
    SymroofWarning), never dropped silently."""
    torch = load_torch()
    if not isinstance(module, torch.nn.Module):
        raise SymroofError(f"from-torch imports a torch.nn.Module, not {type(module).__name__}")
    args = tuple(args) if isinstance(args, list | tuple) else (args,)
    try:
        exported = torch.export.export(module, args, kwargs=dict(kwargs or {}), dynamic_shapes=dynamic_shapes,
                                       strict=False)
    except Exception as error:  # torch's export errors are many classes; each is the user's to act on
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SymroofError(f"torch.export could not export the module: {first}") from None
    exported, decomposed = _decomposed(torch, exported)
    imported = _convert(module, args, dynamic_shapes, exported, decomposed)
    return imported


def _ruled(op: str) -> bool:
    """Whether an op (`softplus.default`) has a rule, or is layout, as _walk looks it up."""
    packet = op.split(".")[0]
    if packet.endswith("_") and not packet.startswith("_"):
        packet = packet[:-1]
    return op in RULES or packet in RULES or packet in LAYOUT or packet in SUBGRAPHS or packet in VMAP


def _decomposed(torch: Any, exported: Any) -> tuple[Any, dict[str, int]]:
    """The graph with each op that has no rule but has a decomposition in torch's own table
    (`torch.export.default_decompositions`: softplus, logsumexp, cross_entropy, group_norm...)
    replaced by that decomposition, and how many of each. Only those: decomposing everything
    (`run_decompositions()`) would split linear, layer_norm and scaled_dot_product_attention,
    which have rules of their own (attention fused, as the kernels run it). Repeated while a
    decomposition leaves another such op."""
    done: dict[str, int] = {}
    table: Any = None
    for _ in range(4):
        graphs = [m.graph for m in exported.graph_module.modules() if hasattr(m, "graph")]  # subgraphs too
        unruled = [n.target for graph in graphs for n in graph.nodes if n.op == "call_function"
                   and hasattr(n.target, "overloadpacket") and not _ruled(_op_name(n.target))]
        if not unruled:
            break
        table = table if table is not None else _table(torch)  # 0.3 s: only when needed
        found = collections.Counter(op for op in unruled if op in table)
        if not found:
            break
        try:
            exported = exported.run_decompositions({op: table[op] for op in found})
        except Exception:  # torch's errors are many classes: the ops stay, each named in the warning
            break
        for op, n in found.items():
            done[_op_name(op)] = done.get(_op_name(op), 0) + n
    return exported, done


# data moves whose decompositions are index arithmetic (an iota, a gather): that arithmetic
# is not what a kernel does, so these stay named in the warning rather than mis-costed
_MOVES = ("repeat", "index", "flip", "roll", "upsample_nearest1d",
          "upsample_nearest2d", "upsample_nearest3d", "upsample_bilinear2d", "upsample_linear1d", "_unsafe_index")


def _table(torch: Any) -> dict:
    """torch.export's own decompositions, then torch's full table (`torch._decomp`: the core
    ATen ops export keeps, leaky_relu, elu, hardtanh, group norm, vector norms) where the
    first has none; the data moves left out."""
    table = dict(torch.export.default_decompositions().items())
    try:
        from torch._decomp import decomposition_table
    except ImportError:  # a private module: without it, export's table alone
        decomposition_table = {}
    for op, decomposition in decomposition_table.items():
        table.setdefault(op, decomposition)
    return {op: d for op, d in table.items() if _op_name(op).split(".")[0] not in _MOVES}


def _convert(module: Any, args: tuple, dynamic_shapes: Any, exported: Any,
             decomposed: Mapping[str, int] | None = None) -> Imported:
    graph, signature = exported.graph, exported.graph_signature
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    user, names, axes = _user_dims(exported, placeholders, dynamic_shapes)
    w = Writer()
    w.name_symbols(names)
    env: dict[Any, Any] = {}
    declarations: list[source.Declare] = []
    taken: set[str] = set()
    count = 0
    kinds = {spec.arg.name: spec for spec in signature.input_specs}
    held: dict[Any, str] = {}
    for node in placeholders:
        spec = kinds.get(node.name)
        value = _value(node.meta.get("val"))
        kind = spec.kind.name if spec is not None else "USER_INPUT"
        target = getattr(spec, "target", None)
        if kind == "PARAMETER" and target is not None:
            # the module's parameters only (its own count, sum(p.numel())): a buffer or a constant
            # the graph reads (rotary frequencies, BatchNorm's running statistics, a causal mask) is
            # read as a tensor, its bytes counted where it is read, and counted as no parameter
            data = _state(module, target)
            key = id(data) if data is not None else target
            if key not in held:
                held[key] = source.declared_name(target.split("."), taken)
                labels = w.labels(value.shape) if value.rank else []
                declarations.append(source.Declare("param", (source.Tensor(value.dtype, tuple(
                    source.Dim(label) for label, d in zip(labels, value.shape) if d != 1), held[key]),), target))
                count += 1
            value = Value(value.dtype, value.shape, held[key])
        env[node] = value
    nodes = _walk(w, exported.graph_module, graph, env)
    warned = [f"not costed: {name} x {n} (no rule; left out of every figure)" for name, n in
              sorted(w.skipped.items())] + w.notes
    for message in warned:
        warnings.warn(message, SymroofWarning, stacklevel=3)
    if not w.statements:
        raise SpecError("the module computes nothing symroof can cost"
                        + (f" (not costed: {', '.join(w.skipped)})" if w.skipped else ""))
    header = [f"imported from {type(module).__module__}.{type(module).__name__} by symroof from-torch",
              "inputs: " + ", ".join(f"{n.name}: {_shown(env[n], w)}" for n in placeholders if n.name in user)]
    if w.layout:
        header.append("free (layout, no statement): " + ", ".join(f"{k} x {n}" for k, n in sorted(w.layout.items())))
    if decomposed:
        header.append("decomposed by torch's own table (no rule of their own): "
                      + ", ".join(f"{k} x {n}" for k, n in sorted(decomposed.items())))
    if w.skipped:
        header.append("NOT COSTED: " + ", ".join(f"{k} x {n}" for k, n in sorted(w.skipped.items())))
    program = w.program(declarations, header)
    return Imported(module, args, dynamic_shapes, program, axes, nodes, w, count, warned)


def _walk(w: Writer, owner: Any, graph: Any, env: dict) -> int:
    """Write each op node of `graph` (the module's, or a subgraph's: a region under
    torch.no_grad is one, its own subgraphs held by its GraphModule, `owner`), its inputs'
    values already in `env`; how many op nodes."""
    nodes = 0
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        nodes += 1
        op = _op_name(node.target)
        packet = op.split(".")[0]
        if packet.endswith("_") and not packet.startswith("_"):  # in place (add_, masked_fill_): the same count
            packet = packet[:-1]
        operands = [_read(a, env) for a in node.args]
        options = {k: _read(v, env) for k, v in node.kwargs.items()}
        out = _value(node.meta.get("val"))
        env[node] = out
        if packet in SUBGRAPHS:
            inner = owner.get_submodule(node.args[SUBGRAPHS[packet]].target)
            inputs = [n for n in inner.graph.nodes if n.op == "placeholder"]
            inner_env = dict(zip(inputs, operands[SUBGRAPHS[packet] + 1:]))
            nodes += _walk(w, inner, inner.graph, inner_env)
            w.layout[packet] += 1
            continue
        if packet in VMAP:
            env[node] = VMAP[packet](operands, out)
            w.layout[packet] += 1
            continue
        levels = vmapped([*operands, *options.values()])
        if levels:
            out = batched(out, levels)
            env[node] = out
        if packet in ("dropout", "native_dropout") and operands[2:3] == [True]:
            w.skipped[op] += 1  # in training mode: a mask drawn and applied, which no rule costs (said)
            continue
        if packet in LAYOUT or not _costs(out):
            w.layout[packet] += 1
            continue
        found = RULES.get(op) or RULES.get(packet)
        if found is None or levels and found not in ELEMENTWISE:
            w.skipped[op] += 1
            if levels and found is not None:
                w.said(f"{op} under torch.vmap is not costed (only elementwise ops are, there)")
            continue
        try:
            if levels:
                found(w, [full(x, levels) if isinstance(x, Value) else x for x in operands], options, full(out, levels),
                      packet)
            else:
                found(w, operands, options, out, packet)
        except NotImplementedError as error:
            w.skipped[op] += 1
            w.said(f"{op}: {error}")
    return nodes


def _shown(value: Value, w: Writer) -> str:
    return f"{value.dtype}[{', '.join(w.dim_name(d) for d in value.shape)}]"


def _state(module: Any, target: str) -> Any:
    """The parameter or buffer at a state_dict name (its tensor: tied weights are one)."""
    try:
        return module.get_parameter(target)
    except AttributeError:
        try:
            return module.get_buffer(target)
        except AttributeError:
            return None


def _op_name(target: Any) -> str:
    """`aten.linear.default` -> `linear.default`; a Python builtin (operator.mul on SymInts)
    its name with `_sym` (layout)."""
    name = getattr(target, "__name__", str(target))
    overload = getattr(target, "_overloadname", None)
    packet = getattr(getattr(target, "overloadpacket", None), "__name__", None)
    if packet is not None:
        return f"{packet}.{overload}"
    return {"getitem": "getitem"}.get(name, f"{name}_sym")


def _costs(value: Any) -> bool:
    """Whether a node makes a tensor (a SymInt or a tuple of none makes no statement)."""
    return isinstance(value, Value) or isinstance(value, tuple) and any(isinstance(v, Value) for v in value)


def _user_dims(exported: Any, placeholders: list, dynamic_shapes: Any) -> tuple[set[str], dict, dict]:
    """Each of torch's shape symbols (s0, s1) -> the name the user gave it with
    torch.export.Dim, read off the user inputs' axes; the user inputs' node names; and
    each name -> every (input, axis) that has it."""
    torch = load_torch()
    user_specs = [s for s in exported.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    user = {s.arg.name for s in user_specs}
    flat_dims = _flat_dims(dynamic_shapes)
    names: dict[sympy.Symbol, str] = {}
    where: dict[str, list[tuple[int, int]]] = {}
    inputs = [n for n in placeholders if n.name in user]
    for k, (node, axes) in enumerate(zip(inputs, flat_dims)):
        shape = getattr(node.meta.get("val"), "shape", ())
        for axis, dim in (axes or {}).items():
            if axis >= len(shape):
                continue
            expr = _expr(shape[axis])
            name = getattr(dim, "__name__", None) or str(dim)
            if isinstance(expr, sympy.Symbol):
                # torch may find two Dims equal: the first name stands for both
                names.setdefault(expr, _dim_name(name))
                where.setdefault(names[expr], []).append((k, axis))
            elif expr.is_Integer and isinstance(dim, torch.export.Dim):
                raise SymroofError(f"torch.export specialized dim {name} to {int(expr)}: the module's code fixes "
                                   "its size (a shape check or a constant), so it cannot be symbolic")
    return user, names, where


def _dim_name(name: str) -> str:
    if not name.isidentifier() or "_" in name:
        raise SymroofError(f"dim name {name!r}: a symroof dim is a name without '_' (which subscripts): "
                           f"try {name.replace('_', '') or 'D'!r}")
    return name


def _flat_dims(dynamic_shapes: Any) -> list[dict]:
    """The dynamic-shape spec of each tensor input in order, as {axis: Dim}."""
    if dynamic_shapes is None:
        return []
    if isinstance(dynamic_shapes, dict) and all(isinstance(k, int) for k in dynamic_shapes):
        return [dynamic_shapes]
    if isinstance(dynamic_shapes, dict):
        return [d for v in dynamic_shapes.values() for d in _flat_dims(v)] or [{}]
    if isinstance(dynamic_shapes, list | tuple):
        if all(not isinstance(x, dict | list | tuple) and x is not None for x in dynamic_shapes):
            return [dict(enumerate(dynamic_shapes))]  # a tuple of Dims, one per axis
        return [d for v in dynamic_shapes for d in (_flat_dims(v) if v is not None else [{}])]
    return [{}]


def _expr(dim: Any) -> sympy.Expr:
    """A SymInt's expression (torch's own sympy), or an int."""
    node = getattr(dim, "node", None)
    return node.expr if node is not None else sympy.Integer(int(dim))


def _value(val: Any) -> Any:
    """A node's FakeTensor as a Value (its shape in torch's symbols, which the writer names
    as the user's dims), a tuple of them as a tuple, a SymInt as its expression, anything
    else as itself."""
    if isinstance(val, list | tuple):
        return tuple(_value(v) for v in val)
    if hasattr(val, "shape") and hasattr(val, "dtype"):
        return Value(_dtype(val.dtype), tuple(_expr(d) for d in val.shape))
    if hasattr(val, "node"):
        return _expr(val)
    return val


def _dtype(dtype: Any) -> str:
    name = str(dtype).removeprefix("torch.")
    found = _DTYPES.get(name, "")
    if found is None or (not found and dtypes.lookup(name) is None):
        raise SymroofError(f"a tensor of the exported graph has dtype {name}, which symroof does not know")
    return found or dtypes.lookup(name).name  # type: ignore[union-attr]


def _read(arg: Any, env: dict) -> Any:
    """An op's argument as a rule reads it: a node as its value, a list of them as a list."""
    if isinstance(arg, list | tuple):
        return [_read(a, env) for a in arg]
    if hasattr(arg, "op") and hasattr(arg, "meta"):  # an fx Node
        return env.get(arg, arg)
    if hasattr(arg, "node"):
        return _expr(arg)
    return arg
