"""The backward pass of a template's forward program, written as a program of its own, so
that a strategy's gradient collectives are found by the sharding engine like any other.

It reads the template's forward program (objects, sharded by `strategies.subscripted`) and
writes, block by block in reverse order:

* for a matmul with a parameter (a tensor without the batch B): the gradient into its
  input, `dY *_{W's other dims} W -> dA`, and into its parameter, `A *_{A's other dims}
  dY -> dW`. dW keeps the parameter's sharding, so a split batch contracted away leaves
  partial sums the engine all-reduces (data parallelism) or reduce-scatters (FSDP), and
  a contracted head or width split over a tensor-parallel axis leaves an AllReduce of dA.
  Consecutive matmuls reading one input (q, k and v; the gated MLP's two) send their
  gradients back through one matmul over their weights side by side (`let J1 = ...`), as
  Megatron and XLA do, so the input's gradient is reduced once, not once a weight;
* every other statement (norms, activations, softmax, the fused attention, gathers,
  residual adds) twice: the convention that a backward costs twice its forward; a lookup
  in a table split by vocabulary (tp's input embedding) written with its result unreduced
  (`{U_Y}`): its forward's AllReduce is not the backward's, which needs the stream's
  gradient whole on each chip (each scatters it into its own rows: gathered under
  Megatron sequence parallelism, `strategies.sequence_split`);
* for a parameter no matmul reads (norm scales, biases, embedding tables read by a
  gather), its gradient's reduction written out: ReduceScatter over the FSDP axes where it
  is split along them, AllReduce over the other batch axes;
* where tensor parallelism copies each KV head (strategies.py: wider than the KV heads),
  each copy's k and v gradients hold only its own query heads' share, which the engine
  cannot see (the attention's backward is written as its forward twice): so the gradient of
  a KV head's weights (and biases) is all-reduced over the copies' axes, written out, and
  the input's gradient goes back through q, and through k and v, as two matmuls left
  unreduced and one AllReduce over every tensor-parallel axis (a fused QKV weight's one).

So a training step's matmul FLOPs are exactly 3x the forward's, as the 6·N·tokens rule has
them, and its collectives are those of the sharded program, forward and backward.
"""

from __future__ import annotations

from dataclasses import replace

from ..lang.source import (
    Apply,
    Backward,
    Blank,
    Collective,
    Comment,
    Contraction,
    Declare,
    Dim,
    Fused,
    Item,
    Let,
    MeshLine,
    Op,
    Part,
    Program,
    Repeat,
    Tensor,
)
from .strategies import Strategy, is_parameter, kv_copies, names, sequence_parallel_axes

_LAYOUT = (Blank, Comment, Let, MeshLine)  # lines the backward shares with the forward, or none


def backward(p: Program, strategy: Strategy) -> Program:
    """The backward program of a subscripted forward program (see the module docstring)."""
    body = _body(p.items)
    weights = {m.operands[1].bare for item in _statements(body) if (m := _matmul(item)) is not None}
    writer = _Writer(strategy, weights, kv_copies(p), sequence_parallel_axes(p, strategy))
    out = writer.block(body)
    lets: list[Item] = [Let(((name, expr),)) for name, expr in writer.widths]
    return Program((Backward((*lets, *out), "the backward pass, written by symroof (backward.py)"),))


def _body(items: tuple[Item, ...]) -> tuple[Item, ...]:
    """The items with work in them (statements, declarations, blocks), at every depth."""
    return tuple(replace(item, body=_body(item.body)) if isinstance(item, (Repeat, Part, Backward)) else item
                 for item in items if not isinstance(item, _LAYOUT))


def _statements(items: tuple[Item, ...]) -> list[Item]:
    """Every statement, a fused block's and a repeated block's included."""
    out: list[Item] = []
    for item in items:
        if isinstance(item, (Repeat, Part, Backward)):
            out += _statements(item.body)
        elif isinstance(item, Fused):
            out += item.statements
        else:
            out.append(item)
    return out


def _matmul(item: Item) -> Contraction | None:
    """A matmul with a parameter, `a *_c w -> y` (a unnamed), or None."""
    if not isinstance(item, Contraction) or len(item.operands) != 2:
        return None
    (op,), (a, w) = item.ops, item.operands
    if op.symbol != "*" or not op.summed or a.name or a.unreduced or w.name or w.unreduced or \
            item.output.unreduced or not is_parameter(w):
        return None
    return item


class _Writer:
    def __init__(self, strategy: Strategy, matmul_weights: set[Tensor], copies: str = "", megatron: str = ""):
        # the weights' gradients are summed over these: the batch's replicas' axes, then the sequence's
        self.batch = names(strategy, lambda k: k.sums_gradients and not k.splits_sequence) + \
            names(strategy, lambda k: k.sums_gradients and k.splits_sequence)
        self.sequence = names(strategy, lambda k: k.splits_sequence)
        self.fsdp = names(strategy, lambda k: k.splits_params)
        self.tensor = names(strategy, lambda k: k.splits_width)
        self.copies = copies  # the axes each KV head is copied over
        self.megatron = megatron  # the tp axes Megatron sequence parallelism splits T over (strategies.sequence_split)
        self.matmul_weights = matmul_weights
        self.widths: list[tuple[str, str]] = []

    def block(self, items: tuple[Item, ...]) -> list[Item]:
        out: list[Item] = []
        k = len(items) - 1
        while k >= 0:  # the backward runs the forward in reverse
            item = items[k]
            if isinstance(item, (Repeat, Part)):
                out.append(replace(item, body=tuple(self.block(item.body))))
                k -= 1
            elif isinstance(item, Fused):  # a fused block: its work twice
                out += [_unnamed(item)] * 2
                k -= 1
            else:
                group = self._group(items, k)
                out += self._statement(group)
                k -= len(group)
        return out

    def _group(self, items: tuple[Item, ...], k: int) -> list[Item]:
        """The run of weight matmuls ending at item k that read one input (q, k, v)."""
        first = _matmul(items[k])
        if first is None:
            return [items[k]]
        run: list[Item] = [first]
        j = k - 1
        while j >= 0 and (m := _matmul(items[j])) is not None and m.ops == first.ops and \
                _same_input(m.operands[0], first.operands[0]):
            run.insert(0, m)
            j -= 1
        return run

    def _statement(self, run: list[Item]) -> list[Item]:
        matches = [_matmul(item) for item in run]
        if matches[0] is None:
            item = run[0]
            if isinstance(item, Declare):  # a cache's keys and values have no gradient of their own
                return [] if item.word == "cache" else self._syncs(item)
            if isinstance(item, Apply) and item.word == "gather" and self.fsdp:
                # its backward scatters into the table's gradient, whole
                split = Dim("D", self.fsdp)
                item = item.mapped(lambda t: t.with_dims([Dim("D") if d == split else d for d in t.dims]))
            if isinstance(item, Apply) and item.word == "gather":
                # a table split by vocabulary (tp): each chip scatters the whole gradient of the
                # lookup into its own rows, no reduction; the forward's collective is not the backward's
                vocab = "".join(d.axes for d in item.operands[0].dims if d.name == "V")
                item = replace(item, output=replace(item.output, unreduced=vocab)) if vocab else item
            if isinstance(item, Collective) and item.kind == "AllToAll":
                return [_reversed_exchange(item)]  # an expert exchange: the gradients go back the way they came
            if isinstance(item, Collective) and item.kind == "AllGather":
                # the sequence's keys or values: their gradients scattered back
                kept = replace(item.output, unreduced=self.sequence)
                return [Collective("ReduceScatter", (*self.sequence, "S"), kept, item.input,
                                   "the gradient of the keys or values")]
            return [_unnamed(item)] * 2
        found = [m for m in matches if m is not None]
        out: list[Item] = self._input_grads(found)
        for m in reversed(found):
            a, w = m.operands
            y = _gradient(m.output, a)
            w_names = set(w.names)  # dims a shares with w (an expert's E) are not summed
            batch = tuple(d.name for d in a.dims if d.name not in w_names)
            out.append(Contraction((a, y), (Op("*", batch),), w, "the gradient of a weight"))
            if self._copied(w):
                out.append(Collective("AllReduce", (self.copies,), replace(w, unreduced=self.copies), w,
                                      "a KV head's copies' gradients, each its own query heads' share"))
        return out

    def _copied(self, tensor: Tensor) -> bool:
        """A KV head's tensor (K without its query groups G), where each head is copied."""
        return bool(self.copies) and "K" in tensor.names and "G" not in tensor.names

    def _input_grads(self, matches: list[Contraction]) -> list[Item]:
        """dA through the weights; where KV heads are copied, q's weight is split over more
        axes than k's and v's: one matmul through each group, their partial sums kept, and
        one AllReduce of their sum over all the axes (the copies' k and v gradients are each
        a share, so they are summed over the copies' axes too)."""
        groups: dict[str, list[Contraction]] = {}
        for m in matches:
            groups.setdefault("".join(d.axes for d in _free(m)), []).append(m)
        if not self.copies or len(groups) == 1:
            return [self._input_grad(matches)]
        out: list[Item] = []
        for axes, group in groups.items():
            grad = self._input_grad(group)
            out.append(replace(grad, output=replace(grad.output, unreduced=axes)))
        every = "".join(a for a in self.tensor if a in "".join(groups))
        a = matches[0].operands[0]
        out.append(Collective("AllReduce", (every,), replace(a, unreduced=every), a,
                              "the input's gradient through q, k and v, once"))
        return out

    def _input_grad(self, matches: list[Contraction]) -> Contraction:
        """dA: the output's gradient through the weights (side by side where several)."""
        first = matches[0]
        a, w = first.operands
        y = _gradient(first.output, a)
        c = _contracted(first)
        free = _free(first)
        if len(matches) == 1:
            return Contraction((y, w), (Op("*", tuple(d.name for d in free)),), a, "the gradient of the input")
        sizes, axes = [], set()
        for m in matches:
            mfree = _free(m)
            sizes.append("*".join(d.name for d in mfree) or "1")
            axes |= {"".join(d.axes for d in mfree)}
        name = f"J{len(self.widths) + 1}"
        terms = dict.fromkeys(sizes)
        self.widths.append((name, " + ".join(t if sizes.count(t) == 1 else f"{sizes.count(t)}*{t}" for t in terms)))
        width = Dim(name, axes.pop() if len(axes) == 1 else "")
        kept = [d for d in w.dims if d.name in c]
        free_names = {d.name for d in free}
        dy = Tensor(y.dtype, (*(d for d in y.dims if d.name not in free_names), width))
        wide = Tensor(w.dtype, (*kept, width))
        return Contraction((dy, wide), (Op("*", (name,)),), a,
                           f"the input's gradient through {len(matches)} weights side by side")

    def _syncs(self, declared: Declare) -> list[Item]:
        """The reductions of the gradients of the declared parameters no matmul reads."""
        out: list[Item] = []
        says = "a parameter's gradient"
        for tensor in declared.tensors:
            tensor = tensor.unnamed()
            copies = self.copies if self._copied(tensor) else ""  # a KV head's bias
            # a norm's scale or a bias that is not split over the tp axes reads each chip's own
            # tokens under Megatron sequence parallelism: its gradient is summed over them too
            sequence = self.megatron if declared.word == "param" and \
                not any(set(self.megatron) & set(d.axes) for d in tensor.dims) else ""
            if tensor.bare in self.matmul_weights or not (self.batch or self.fsdp or copies or sequence):
                continue
            split = Dim("D", self.fsdp)
            whole = tensor.with_dims([Dim("D") if d == split else d for d in tensor.dims])
            if self.fsdp and split in tensor.dims:
                out.append(Collective("ReduceScatter", (*self.fsdp, "D"), replace(whole, unreduced=self.fsdp),
                                      tensor, says))
                rest, reduced = self.batch + copies + sequence, tensor
            else:
                rest, reduced = self.batch + self.fsdp + copies + sequence, whole
            if rest:
                out.append(Collective("AllReduce", (rest,), replace(reduced, unreduced=rest), reduced, says))
        return out


def _contracted(m: Contraction) -> set[str]:
    """The dims summed, and those the weight shares with its input (a batched matmul's, as
    an expert's E): neither is the weight's own, summed in the gradient of the input."""
    a, w = m.operands
    return set(m.ops[0].summed) | (set(a.names) & set(w.names))


def _free(m: Contraction) -> list[Dim]:
    """A weight matmul's weight's own dims (its output's width: heads, MLP width, vocabulary)."""
    c = _contracted(m)
    return [d for d in m.operands[1].dims if d.name not in c]


def _same_input(a: Tensor, b: Tensor) -> bool:
    """One input (S = T in training: k and v read the keys' side of the same tensor)."""
    def keys_side(t: Tensor) -> Tensor:
        return t.with_dims([Dim("T", d.axes) if d.name == "S" else d for d in t.dims])
    return keys_side(a) == keys_side(b)


def _gradient(y: Tensor, a: Tensor) -> Tensor:
    """The gradient of a matmul's output, in its input's dtype: a router's fp32 logits
    come back as a bf16 gradient, the backward matmuls running in the forward's dtype."""
    return Tensor(a.dtype, y.dims)


def _reversed_exchange(c: Collective) -> Collective:
    """An AllToAll run backwards: `AllToAll_{M,E} x -> y` becomes `AllToAll_{M,D'} y -> x`,
    D' the dim of x the axes split."""
    axes = c.subscript[:-1]
    dim = next(d.name for d in c.input.dims if set(axes) <= set(d.axes))
    return Collective("AllToAll", (*axes, dim), c.output, c.input, "the gradients back")


def _unnamed(item: Item) -> Item:
    """A forward statement without its tensor names (they name the forward's tensors)."""
    if isinstance(item, (Contraction, Apply, Collective, Fused)):
        return item.mapped(lambda t: t.unnamed())
    return item
