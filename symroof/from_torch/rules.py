"""The table of rules: an ATen op's name (`aten.linear.default`'s packet, `linear`) -> the
rule that writes its statements, one family per function, as from_jax registers a rule
per jaxpr primitive. A rule is `(writer, args, kwargs, out) -> None`: its operands are
`Value`s (a tensor), sympy expressions (a SymInt) or plain Python values, as the graph
gives them; it writes statements (lang.source objects) into the writer, whose counts come
from ops/, never a second copy. An op without a rule is named in a warning with its
count, never dropped silently.

What costs what (docs/from-torch.md):
* layout, no statement: views (as_strided too), reshapes, permutes, transposes, expands, squeezes,
  contiguous and clone (a copy XLA-style fusion would not make; torch eager does for a
  non-contiguous tensor), slices and selects (a view: the consumer reads what it reads),
  dropout in eval mode, the constants made on the fly (arange, ones, full), SymInt
  arithmetic and asserts;
* a cast (`_to_copy`, `to`) to another dtype: bytes, no FLOPs (ops/copy.py); flip and
  roll the same (the elements reordered: read and written once); index_select and
  gather as gathers (ops/gather.py: the elements taken and the indices read); a constant
  pad as pad (ops/pad.py: the input read, the whole result written);
* contractions on the matrix unit, 2 FLOPs per multiply-add; a bias add its own
  elementwise statement (1 FLOP per element);
* scaled_dot_product_attention fused, as flash kernels run it: the scores and
  probabilities stay on chip; the causal mask and the scale cost nothing (applied as
  the scores are made), an explicit mask is read and added;
* var and std (and var_mean): no op kind of their own, so the statements of torch's
  decomposition (mean, subtract, square, sum, divide; std a square root more);
* an op with no rule here but a decomposition in torch's table is decomposed before
  the walk (importer._decomposed) and costed as its steps, said in the header.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy

from ..lang import source
from .program import Value, Writer, first, present, tensor

Rule = Callable[[Writer, list, dict, Any, str], None]
RULES: dict[str, Rule] = {}

# ops with no statement: a view of the same data, or a value made on the fly
LAYOUT = ("view", "_unsafe_view", "reshape", "transpose", "t", "numpy_T", "permute", "as_strided", "unsqueeze",
          "squeeze", "expand", "expand_as", "view_as", "contiguous", "clone", "alias", "detach", "flatten", "unflatten",
          "select",
          "slice", "split", "split_with_sizes", "chunk", "unbind", "getitem", "dropout", "lift_fresh_copy",
          "arange", "ones", "zeros", "full", "empty", "scalar_tensor", "ones_like", "zeros_like", "full_like",
          "sym_size", "sym_numel", "sym_stride", "_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range",
          "sym_constrain_range_for_size", "mul_sym", "add_sym", "floordiv_sym", "sub_sym", "repeat_interleave_sym",
          "_set_grad_enabled", "_enter_autocast", "_exit_autocast", "native_dropout_eval", "new_ones", "new_zeros",
          "new_full", "new_empty", "lazy_load_decompositions_sym", "_vmap_increment_nesting_sym",
          "_vmap_decrement_nesting_sym")
# higher-order ops that run a subgraph (get_attr'd at this argument; its operands follow)
SUBGRAPHS = {"wrap_with_set_grad_enabled_sym": 1, "wrap_with_autocast_sym": 4}

BINARY = {"add": "+", "__and__": "and", "__or__": "or", "sub": "-",
          "rsub": "-", "mul": "*", "div": "/", "maximum": "max", "minimum": "min",
          "pow": "pow", "eq": "compare", "ne": "compare", "lt": "compare", "le": "compare", "gt": "compare",
          "ge": "compare", "bitwise_and": "and", "bitwise_or": "or", "logical_and": "and", "logical_or": "or",
          "remainder": "rem", "fmod": "rem", "atan2": "atan2", "max": "max", "min": "min"}
UNARY = {"exp": "exp", "log": "log", "tanh": "tanh", "rsqrt": "rsqrt", "sqrt": "sqrt", "relu": "relu",
         "abs": "abs", "neg": "neg", "reciprocal": "recip", "sigmoid": "sigmoid", "silu": "silu", "sin": "sin",
         "cos": "cos", "erf": "erf", "square": "square", "logical_not": "not", "bitwise_not": "not",
         "floor": "floor", "ceil": "ceil", "round": "round", "sign": "sign", "expm1": "expm1", "log1p": "log1p"}
REDUCE = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "prod": "prod", "any": "any", "all": "all",
          "argmax": "argmax", "argmin": "argmin", "max": "max", "min": "min"}
_INFIX = ("+", "-", "*", "/")
OUTER = ("a matmul with no dim summed (K = 1: an outer product, as LLaMA's rotary frequencies) is an "
         "elementwise multiply in symroof, 1 FLOP per element on the vector unit; FlopCounterMode counts it a "
         "matrix op, 2*M*N*K")


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(f: Rule) -> Rule:
        for name in names:
            RULES[name] = f
        return f
    return register


def _scalar(dtype: str) -> Value:
    return Value(dtype, ())


def _aligned(w: Writer, operands: Sequence[Value], out: Value) -> tuple[list[source.Tensor], source.Tensor]:
    """Operands broadcast against the result as torch broadcasts (aligned from the right),
    written with the result's labels; a broadcast (size-1) axis left out."""
    out_labels = present(out.shape, w.labels(out.shape))
    written = []
    for v in operands:
        lead = out.rank - v.rank
        written.append(tensor(v, [None if d == 1 else out_labels[lead + j] for j, d in enumerate(v.shape)]))
    return written, tensor(out, out_labels)


def _operand(x: Any, out: Value) -> Value:
    """A Python number operand as a scalar of the result's dtype (bool results: fp32)."""
    return x if isinstance(x, Value) else _scalar(out.dtype if out.dtype != "bool" else "fp32")


@rule(*BINARY, "max.other", "min.other")
def binary(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    word = BINARY[op]
    a, b = (_operand(x, out) for x in args[:2])
    if op == "rsub":
        a, b = b, a
    if kwargs.get("alpha", 1) != 1 or (len(args) > 2 and args[2] != 1):  # add(x, y, alpha=2): y * 2 first
        scaled, _ = _aligned(w, [b, _scalar(b.dtype)], b)
        (bt,), _ = _aligned(w, [b], b)
        w.emit(source.Contraction(tuple(scaled), (source.Op("*"),), bt), "alpha")
    operands, result = _aligned(w, [a, b], out)
    if word in _INFIX:
        w.emit(source.Contraction(tuple(operands), (source.Op(word),), result), op)
    else:
        w.emit(source.Apply(word, (), "call", tuple(operands), result), op)


@rule(*UNARY)
def unary(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    operands, result = _aligned(w, [args[0]], out)
    w.emit(source.Apply(UNARY[op], (), "call", tuple(operands), result), op)


@rule("gelu")
def gelu(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """approximate='none' is the erf form (`gelu_erf`), 'tanh' the tanh form (`gelu`)."""
    word = "gelu" if kwargs.get("approximate", args[1] if len(args) > 1 else "none") == "tanh" else "gelu_erf"
    operands, result = _aligned(w, [args[0]], out)
    w.emit(source.Apply(word, (), "call", tuple(operands), result), op)


@rule("pow")
def power(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """x ** 2 is one multiply (`square`); x ** 0.5 a sqrt; any other exponent `pow`."""
    x, e = args[0], args[1]
    if isinstance(x, Value) and not isinstance(e, Value) and e in (2, 0.5, -0.5, 1):
        if e == 1:
            w.layout[op] += 1
            return
        operands, result = _aligned(w, [x], out)
        w.emit(source.Apply({2: "square", 0.5: "sqrt", -0.5: "rsqrt"}[e], (), "call", tuple(operands), result), op)
        return
    binary(w, args, kwargs, out, op)


@rule("where")
def where(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    operands, result = _aligned(w, [_operand(x, out) for x in args[:3]], out)
    w.emit(source.Apply("select", (), "call", tuple(operands), result), op)


@rule("masked_fill")
def masked_fill(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    x, mask, fill = args[:3]
    operands, result = _aligned(w, [mask, _operand(fill, out), x], out)
    w.emit(source.Apply("select", (), "call", tuple(operands), result), op)


@rule("clamp", "clamp_min", "clamp_max", "hardtanh")
def clamp(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    operands, result = _aligned(w, [_scalar(out.dtype), args[0], _scalar(out.dtype)], out)
    w.emit(source.Apply("clamp", (), "call", tuple(operands), result), op)


@rule("tril", "triu")
def triangle(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """A select against the diagonal: one FLOP per element, the mask made on the fly."""
    operands, result = _aligned(w, [args[0]], out)
    w.emit(source.Apply("select", (), "call", (tensor(Value("bool", ()), []), operands[0], tensor(_scalar(
        out.dtype), [])), result), op)


@rule("_to_copy", "to", "type_as", "_to_dtype")
def cast(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    x = args[0]
    if x.dtype == out.dtype:
        w.layout[op] += 1
        return
    operands, result = _aligned(w, [x], out)
    w.emit(source.Contraction(tuple(operands), (), result), op)


@rule("cat")
def concatenate(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """Each operand read once and the result written: a copy (ops/copy.py) per operand,
    into its slice of the result."""
    for x in args[0]:
        if any(d == 0 for d in x.shape):
            continue  # an empty operand (a cache's first cat onto torch.tensor([])) moves no bytes
        operands, result = _aligned(w, [x], x)
        w.emit(source.Apply("copy", (), "call", tuple(operands), result), op)


def _axes(dims: Any, rank: int) -> list[int]:
    if dims is None or dims == []:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % rank for d in dims)


@rule(*REDUCE)
def reduce(w: Writer, args: list, kwargs: dict, out: Any, op: str = "") -> None:
    x = args[0]
    over = _axes(args[1] if len(args) > 1 and not isinstance(args[1], bool) else kwargs.get("dim"), x.rank)
    over = [j for j in over if x.shape[j] != 1]
    value = first(out)
    if not over:  # over size-1 axes only: the array itself
        w.layout[op] += 1
        return
    labels = w.labels(x.shape, named=over)
    kept = [label if x.shape[j] != 1 else None for j, label in enumerate(labels) if j not in over]
    result = tensor(value, kept if value.rank == len(kept) else [None if j in over else labels[j]
                                                                 for j in range(x.rank)])
    operand = tensor(x, present(x.shape, labels))
    w.emit(source.Apply(REDUCE[op], tuple(labels[j] for j in over), "prefix", (operand,), result), op)


@rule("_softmax", "softmax", "_log_softmax", "log_softmax")
def softmax(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    x, dim = args[0], args[1] % args[0].rank
    labels = w.labels(x.shape, named=[dim])
    written = present(x.shape, labels)
    word = "logsoftmax" if "log" in op else "softmax"
    w.emit(source.Apply(word, (labels[dim],), "prefix", (tensor(x, written),), tensor(out, written)), op)


@rule("layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm")
def norm(w: Writer, args: list, kwargs: dict, out: Any, op: str = "") -> None:
    x, shape = args[0], args[1]
    value = first(out)
    over = list(range(x.rank - len(shape), x.rank))
    labels = w.labels(x.shape, named=over)
    written = present(x.shape, labels)
    scales = [tensor(v, [labels[j] for j in over]) for v in args[2:4 if "layer" in op else 3]
              if isinstance(v, Value)]
    word = "layernorm" if "layer" in op else "rmsnorm"
    w.emit(source.Apply(word, tuple(labels[j] for j in over), "prefix", (tensor(x, written), *scales),
                        tensor(value, written)), op)


@rule("embedding")
def embedding(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    table, indices = args[0], args[1]
    labels = w.labels((*indices.shape, *table.shape))
    rows, cols = labels[indices.rank], labels[indices.rank + 1:]
    w.emit(source.Apply("gather", (), "prefix", (tensor(table, [rows, *cols]), tensor(indices, labels[:indices.rank])),
                        tensor(out, [*labels[:indices.rank], *cols])), op)


def contraction(w: Writer, a: Value, a_axes: str, b: Value, b_axes: str, out: Value, out_axes: str,
                op: str) -> None:
    """An einsum of two operands, axes as letters (`bmk,kn->bmn`): each letter one label,
    the summed ones (in no result axis) named; a letter of size 1 left out."""
    letters = list(dict.fromkeys(a_axes + b_axes + out_axes))
    size = {**dict(zip(b_axes, b.shape)), **dict(zip(a_axes, a.shape)), **dict(zip(out_axes, out.shape))}
    summed = [i for i, letter in enumerate(letters) if letter not in out_axes]
    labels = dict(zip(letters, w.labels([size[letter] for letter in letters], named=summed)))

    def written(v: Value, axes: str) -> source.Tensor:
        return tensor(v, [None if d == 1 else labels[letter] for d, letter in zip(v.shape, axes)])

    over = tuple(labels[letters[i]] for i in summed if size[letters[i]] != 1)
    if not over:  # nothing summed: an outer product, one multiply per element
        w.differs(-2 * sympy.Mul(*out.shape), OUTER)
    w.emit(source.Contraction((written(a, a_axes), written(b, b_axes)), (source.Op("*", over),),
                              written(out, out_axes)), op)


def _matmul_axes(a: int, b: int) -> tuple[str, str, str]:
    """torch.matmul's broadcasting as einsum letters: a [..., M, K] @ b [..., K, N]."""
    batch = "abcdefgh"[:max(a, b) - 2] if max(a, b) > 2 else ""
    ka = (batch[len(batch) - (a - 2):] if a > 2 else "") + ("mk" if a >= 2 else "k")
    kb = (batch[len(batch) - (b - 2):] if b > 2 else "") + ("kn" if b >= 2 else "k")
    ko = batch + ("m" if a >= 2 else "") + ("n" if b >= 2 else "")
    return ka, kb, ko


@rule("mm", "bmm", "matmul")
def matmul(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    a, b = args[:2]
    ka, kb, ko = _matmul_axes(a.rank, b.rank)
    contraction(w, a, ka, b, kb, out, ko, op)


def _bias(w: Writer, bias: Value, out: Value, op: str) -> None:
    operands, result = _aligned(w, [out, bias], out)
    w.emit(source.Contraction(tuple(operands), (source.Op("+"),), result), op + " bias")


@rule("linear")
def linear(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """x [..., K] against weight [N, K], then + bias [N]."""
    x, weight = args[:2]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    batch = "abcdefgh"[:x.rank - 1]
    contraction(w, x, batch + "k", weight, "nk", out, batch + "n", op)
    if isinstance(bias, Value):
        _bias(w, bias, out, op)


@rule("addmm", "baddbmm", "addmv")
def add_product(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """beta * c + alpha * (a @ b): the product, then + c (the scalings, where not 1, not
    counted: said)."""
    c, a, b = args[:3]
    if kwargs.get("beta", 1) != 1 or kwargs.get("alpha", 1) != 1:
        w.said(f"{op}'s alpha and beta scalings are not counted (one multiply per element each)")
    ka, kb, ko = _matmul_axes(a.rank, b.rank)
    contraction(w, a, ka, b, kb, out, ko, op)
    _bias(w, c, out, op)


@rule("einsum")
def einsum(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    equation, operands = args[0].replace(" ", ""), list(args[1])
    inputs, _, output = equation.partition("->")
    terms = inputs.split(",")
    if len(operands) != 2 or "." in equation:
        raise NotImplementedError("an einsum of other than two operands, or with an ellipsis")
    contraction(w, operands[0], terms[0], operands[1], terms[1], out, output, op)


@rule("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
      "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu")
def attention(w: Writer, args: list, kwargs: dict, out: Any, op: str = "") -> None:
    """q [..., S, E] against k [..., T, E], softmax over T, against v [..., T, Ev], fused:
    the scores and probabilities stay on chip. The scale and a causal mask cost nothing
    (applied as the scores are made); an explicit mask is read and added."""
    q, k, v = args[:3]
    value = first(out)
    mask = args[3] if len(args) > 3 and isinstance(args[3], Value) else kwargs.get("attn_mask")
    batch = "abcdefgh"[:q.rank - 2]
    if k.shape[:-2] != q.shape[:-2]:
        raise NotImplementedError("attention whose keys have other batch or head dims than its queries (enable_gqa)")
    letters = batch + "ste" + "f"
    size = dict(zip(batch + "se", q.shape)) | dict(zip(batch + "te", k.shape)) | {"f": v.shape[-1]}
    names = dict(zip(letters, w.labels([size[c] for c in letters], named=[len(batch) + 1, len(batch) + 2])))
    if v.shape[-1] == q.shape[-1]:
        names["f"] = names["e"]

    def t(x: Value, axes: str, dtype: str | None = None) -> source.Tensor:
        labels = [None if d == 1 else names[c] for d, c in zip(x.shape, axes)]
        return tensor(Value(dtype or x.dtype, x.shape), labels)

    scores_value = Value(q.dtype, tuple(size[c] for c in batch + "st"))
    scores = t(scores_value, batch + "st")
    items: list[source.Contraction | source.Apply] = [
        source.Contraction((t(q, batch + "se"), t(k, batch + "te")), (source.Op("*", (names["e"],)),), scores)]
    if isinstance(mask, Value):
        (m, s), r = _aligned_to(mask, scores_value, names, batch + "st"), scores
        items.append(source.Contraction((s, m), (source.Op("+"),), r) if mask.dtype != "bool" else
                     source.Apply("select", (), "call", (m, s, tensor(_scalar(q.dtype), [])), r))
    items.append(source.Apply("softmax", (names["t"],), "prefix", (scores,), scores))
    items.append(source.Contraction((scores, t(v, batch + "tf")), (source.Op("*", (names["t"],)),),
                                    t(value, batch + "sf")))
    w.emit(source.Fused(tuple(items)), op)


def _aligned_to(mask: Value, scores: Value, names: dict[str, str], axes: str) -> tuple[source.Tensor, source.Tensor]:
    lead = scores.rank - mask.rank
    labels = [None if d == 1 else names[axes[lead + j]] for j, d in enumerate(mask.shape)]
    return tensor(mask, labels), tensor(scores, [None if d == 1 else names[c] for d, c in zip(scores.shape, axes)])


@rule("cumsum", "cumprod")
def cumulative(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    x, dim = args[0], args[1] % args[0].rank
    labels = w.labels(x.shape, named=[dim])
    written = present(x.shape, labels)
    w.emit(source.Apply(op, (labels[dim],), "prefix", (tensor(x, written),), tensor(out, written)), op)


@rule("diff")
def difference(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """x[1:] - x[:-1] along its dim (a prepended value first): one subtraction per result
    element, each reading two of x's."""
    operands, result = _aligned(w, [out, out], out)
    w.emit(source.Contraction(tuple(operands), (source.Op("-"),), result), op)


@rule("flat_apply_sym")
def indexed(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """A Python function applied to tensors (torch.export's flat_apply: transformers'
    masks index with one, `x[b, i]`): read as a gather of the elements it returns, no
    FLOPs; each element read and written."""
    tensors = [x for x in args if isinstance(x, Value)]
    if not tensors:
        raise NotImplementedError("a flat_apply of no tensor")
    source_value = Value(tensors[0].dtype, out.shape)
    operands, result = _aligned(w, [source_value], out)
    w.emit(source.Apply("copy", (), "call", tuple(operands), result), "flat_apply (an index)")


@rule("index_select", "gather")
def taken(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """`index_select(x, d, ids[K])` and `gather(x, d, ids)` (ids as x, K along d): a gather
    along d (ops/gather.py: no FLOPs; the elements taken and the indices read)."""
    x, dim, ids = args[0], args[1] % args[0].rank, args[2]
    k = ids.shape[0] if op == "index_select" else ids.shape[dim] if ids.rank == x.rank else None
    if k is None or op == "gather" and any(ids.shape[j] != x.shape[j] for j in range(x.rank) if j != dim):
        raise NotImplementedError("a gather whose indices do not match the input off the gathered dim")
    if x.shape[dim] == 1:
        raise NotImplementedError("a gather along a dim of size 1")
    labels = w.labels((*x.shape, k))
    kept = present(x.shape, labels)
    picked = [*kept[:dim], None if k == 1 else labels[-1], *kept[dim + 1:]]
    index = [labels[-1] if k != 1 else None] if op == "index_select" else picked
    w.emit(source.Apply("gather", (), "prefix", (tensor(x, kept), tensor(ids, index)), tensor(out, picked)), op)


@rule("constant_pad_nd")
def padded(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """F.pad with a constant (ops/pad.py: no FLOPs; the input read, the whole result written)."""
    x = args[0]
    grown = [j for j in range(x.rank) if sympy.simplify(out.shape[j] - x.shape[j]) != 0]
    if any(x.shape[j] == 1 or out.shape[j] == 1 for j in grown):
        raise NotImplementedError("a pad of a size-1 axis, or to one")
    labels = w.labels((*x.shape, *(out.shape[j] for j in grown)))
    kept = present(x.shape, labels)
    result = list(kept)
    for j, label in zip(grown, labels[x.rank:]):
        result[j] = label
    w.emit(source.Apply("pad", (), "prefix", (tensor(x, kept),), tensor(out, result)), op)


@rule("flip", "roll")
def moved(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """The elements reordered: each read once and written once, no FLOPs (ops/copy.py)."""
    operands, result = _aligned(w, [args[0]], out)
    w.emit(source.Apply("copy", (), "call", tuple(operands), result), op)


def _add_batch_dim(operands: list, out: Any) -> Value:
    """torch.vmap's _add_batch_dim(x, dim, level): x with dim vmapped away at `level`."""
    x, dim, level = operands[:3]
    shape = list(x.shape)
    size = shape.pop(dim % x.rank)
    return Value(x.dtype, tuple(shape), x.param, tuple(sorted((*x.levels, (int(level), size)))))


def _remove_batch_dim(operands: list, out: Any) -> Value:
    """_remove_batch_dim(x, level, size, out_dim): x whole again along `level`'s dim."""
    x, level = operands[:2]
    return Value(out.dtype, out.shape, x.param, tuple(entry for entry in x.levels if entry[0] != int(level)))


VMAP = {"_add_batch_dim_sym": _add_batch_dim, "_remove_batch_dim_sym": _remove_batch_dim}
# the rules that may run under vmap: elementwise (the vmapped dims broadcast as any other)
ELEMENTWISE = (binary, unary, gelu, power, where, masked_fill, clamp, cast, difference, indexed)


@rule("convolution", "conv1d", "conv2d", "conv3d", "_convolution", "conv_transpose1d", "conv_transpose2d",
      "conv_transpose3d")
def convolution(w: Writer, args: list, kwargs: dict, out: Value, op: str = "") -> None:
    """x [N, C, *S] against weight [F, C/g, *K] -> [N, F, *S2] (ops/conv.py), then + bias
    [F]; transposed (ConvTranspose: weight [C, F/g, *K]) as `conv_transpose`. Grouped
    (g > 1): the channels written as g groups (a view), and the kernel's too; depthwise
    leaves out the group's one input channel."""
    x, weight = args[:2]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    transposed = op.startswith("conv_transpose") or (
        op in ("convolution", "_convolution") and bool(args[6] if len(args) > 6 else kwargs.get("transposed")))
    # convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups);
    # conv2d(x, w, b, stride, padding, dilation, groups); conv_transpose2d(x, w, b, stride, padding,
    # output_padding, groups, dilation)
    at = 8 if op in ("convolution", "_convolution") else 6
    groups = args[at] if len(args) > at else kwargs.get("groups", 1)
    spatial = x.rank - 2
    g = sympy.Integer(int(groups or 1))
    n, c = x.shape[0], x.shape[1]
    f = weight.shape[1] * g if transposed else weight.shape[0]
    dims = [n, g, c / g, f / g, *x.shape[2:], *weight.shape[2:], *out.shape[2:]]
    labels = w.labels(dims, named=[2, *range(4, 4 + 3 * spatial)])
    keep = present(dims, labels)
    ln, lg, lc, lm = keep[:4]
    ls, lk, lo = keep[4:4 + spatial], keep[4 + spatial:4 + 2 * spatial], keep[4 + 2 * spatial:]
    over = tuple(labels[4:4 + spatial])
    x_t = tensor(Value(x.dtype, (n, g, c / g, *x.shape[2:])), [ln, lg, lc, *ls])
    w_t = tensor(Value(weight.dtype, (g, c / g, f / g, *weight.shape[2:]), weight.param), [lg, lc, lm, *lk])
    o_t = tensor(Value(out.dtype, (n, g, f / g, *out.shape[2:])), [ln, lg, lm, *lo])
    w.emit(source.Apply("conv_transpose" if transposed else "conv", over, "prefix", (x_t, w_t), o_t), op)
    if isinstance(bias, Value):
        b_t = tensor(Value(bias.dtype, (g, f / g), bias.param), [lg, lm])
        w.emit(source.Contraction((o_t, b_t), (source.Op("+"),), o_t), op + " bias")


@rule("batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm", "_batch_norm_with_update")
def batch_norm(w: Writer, args: list, kwargs: dict, out: Any, op: str = "") -> None:
    """Inference (running statistics): per channel, 1/sqrt(var + eps) times the weight (2
    ops over C, one a transcendental); per element, (x - mean) * scale + bias (3 FLOPs)."""
    x, weight, bias, mean, var = args[:5]
    training = args[5] if op in ("batch_norm", "native_batch_norm") and len(args) > 5 else False
    if training or not isinstance(mean, Value) or not isinstance(var, Value):
        raise NotImplementedError("batch norm in training mode (its statistics computed): put the module in "
                                  "inference mode (its eval method) in the factory")
    value = first(out)
    channel = Value(var.dtype, var.shape)
    (c_t,), c_out = _aligned(w, [var], channel)
    w.emit(source.Apply("rsqrt", (), "call", (c_t,), c_out), op + " (1/sqrt(var + eps))")
    if isinstance(weight, Value):
        w.emit(source.Contraction((c_out, tensor(weight, c_out.names)), (source.Op("*"),), c_out), op + " (scale)")
    lead = [sympy.Integer(1)] * (x.rank - 2)  # [C] against [N, C, *S]: C is axis 1
    for symbol, operand in (("-", mean), ("*", Value(var.dtype, var.shape)), ("+", bias)):
        if not isinstance(operand, Value):
            continue
        shaped = Value(operand.dtype, (*operand.shape, *lead), operand.param)
        operands, result = _aligned(w, [x, shaped], value)
        w.emit(source.Contraction(tuple(operands), (source.Op(symbol),), result), op)


@rule("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
      "adaptive_max_pool2d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
      "max_pool2d_with_indices")
def pool(w: Writer, args: list, kwargs: dict, out: Any, op: str = "") -> None:
    """A global pool (every spatial dim to 1): a mean (max) over the spatial dims. A pool
    whose windows tile the input (stride the window, no padding or dilation: a 2x2 max
    pool of stride 2) as a reduction over each window's dims, the input read as
    [N, C, H2, KH, W2, KW] (H2 = floor(H/KH) windows: rows past the last window are not
    read). An overlapping, padded or dilated pool is not costed here (said)."""
    x = args[0]
    value = first(out)
    spatial = list(range(2, x.rank))
    word = "max" if "max" in op else "mean"
    if all(value.shape[j] == 1 for j in spatial if j < value.rank):
        labels = w.labels(x.shape, named=spatial)
        written = present(x.shape, labels)
        kept = [written[j] for j in range(x.rank) if j not in spatial]
        w.emit(source.Apply(word, tuple(labels[j] for j in spatial if x.shape[j] != 1), "prefix",
                            (tensor(x, written),), tensor(value, kept + [None] * (value.rank - len(kept)))), op)
        return
    if op.startswith("adaptive"):
        raise NotImplementedError("an adaptive pool to more than one element (windows of varying size)")
    n = len(spatial)
    kernel = _per_dim(args[1] if len(args) > 1 else kwargs.get("kernel_size"), n)
    stride = _per_dim(args[2] if len(args) > 2 and args[2] else kwargs.get("stride") or kernel, n)
    padding = _per_dim(args[3] if len(args) > 3 else kwargs.get("padding", 0), n)
    dilation = _per_dim(args[4] if len(args) > 4 and "max" in op else kwargs.get("dilation", 1), n)
    ceil = args[5] if len(args) > 5 and "max" in op else args[4] if len(args) > 4 and "avg" in op else False
    if stride != kernel or any(padding) or any(d != 1 for d in dilation) or ceil:
        raise NotImplementedError("a pool whose windows overlap, are padded or dilated, or round up (only pools "
                                  "whose windows tile the input are costed)")
    windows = [value.shape[j] for j in spatial]
    dims = [*x.shape[:2], *(d for pair in zip(windows, kernel) for d in pair)]
    labels = w.labels(dims, named=[2 + 2 * k + 1 for k in range(n)] + [2 + 2 * k for k in range(n)])
    keep = present(dims, labels)
    over = tuple(labels[2 + 2 * k + 1] for k in range(n) if kernel[k] != 1)
    result = keep[:2] + [keep[2 + 2 * k] for k in range(n)]
    w.emit(source.Apply(word, over, "prefix", (tensor(Value(x.dtype, tuple(dims)), keep),),
                        tensor(value, result)), op)


def _per_dim(value: Any, n: int) -> list[int]:
    """A pool's kernel, stride or padding, one per spatial dim (an int stands for every one)."""
    values = list(value) if isinstance(value, list | tuple) else [value] * n
    values = values * n if len(values) == 1 else values
    return [int(v) for v in values]


@rule("var", "std", "var_mean", "std_mean")
def variance(w: Writer, args: list, kwargs: dict, out: Any, op: str = "") -> None:
    """Written as torch's own decomposition computes it, each step by its rule: the mean
    over the dims, x minus it, squared, summed, divided by N - correction (a square root
    more for std). symroof has no variance op kind: its steps are the count."""
    x = args[0]
    dims = args[1] if len(args) > 1 and not isinstance(args[1], bool) else kwargs.get("dim")
    over = _axes(dims, x.rank)
    values = out if isinstance(out, tuple | list) else (out,)
    result = values[0]
    kept = Value(x.dtype, tuple(sympy.Integer(1) if j in over else d for j, d in enumerate(x.shape)))
    reduce(w, [x, over], {}, kept, "mean")
    centred = Value(x.dtype, x.shape)
    binary(w, [x, kept], {}, centred, "sub")
    unary(w, [centred], {}, centred, "square")
    reduce(w, [centred, over], {}, result, "sum")
    binary(w, [result, 1], {}, result, "div")  # / (N - correction): one division per result element
    if op.startswith("std"):
        unary(w, [result], {}, result, "sqrt")
