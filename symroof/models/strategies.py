"""Parallelism strategies as shardings of a template's program (issue 12).

A strategy maps kinds of parallelism to mesh axes: `dp=4,tp=8` builds the mesh X=4, Y=8
with data parallelism over X and tensor parallelism over Y; `dp=X,tp=Y` uses the axes of a
mesh given beside it, and `fsdp=XY` puts one kind over two axes. The template's program is
then written sharded, as a person would write it, and the sharding engine finds the
collectives:

* data (dp): the batch B is split over the axis (`B_X`); every chip holds all the weights;
  in training each weight's gradient is all-reduced (the engine infers it: the gradient
  matmul contracts the split batch);
* zero1, zero2 (ZeRO stages 1 and 2, training only): data parallelism with each chip
  keeping the optimizer state (zero1), and the gradients too (zero2), of 1/n of the
  parameters; the gradients are reduce-scattered and the updated parameters all-gathered
  once a step, the volume and time of the AllReduce data parallelism runs (costed as it);
* fsdp (ZeRO-3): the batch is split as in data parallelism, and every parameter too, along
  its model width D (`bf16[D_Z, F]`): each use gathers it first (`AllGather_Z`, written
  into the program before the statement, again in the backward pass), and each gradient
  is reduce-scattered back to its shard (inferred from the gradient's sharded result);
  parameters without a D (biases) stay whole and their gradients are all-reduced;
* tensor (tp, Megatron): the attention heads (`K_Y`, each chip its KV heads and their
  query groups) and the MLP width (`F_Y`) are split; the attention output and MLP down
  projections then hold partial sums, which the engine all-reduces: two AllReduces per
  layer forward, two backward (the gradients into each sublayer's input). The output
  layer is split by vocabulary (`V_Y`), and the input embedding table too, as Megatron's
  VocabParallelEmbedding and vLLM split it: each chip looks up the tokens in its rows
  (the others zero), and the lookup's partial sums are all-reduced over the tp axes.
  Wider than the KV heads (tp=16 over 8), each KV head is copied, as Megatron and vLLM
  do: tp's innermost axes hold the copies (`Y=8, y=2`: `K_Y`, and `G_y`, each copy its
  share of the head's query heads); the KV projections' weights and the cache are split
  over the heads' axes only, so each chip holds and computes its head's whole, and in
  training each copy's gradient of them (its own query heads' share) is all-reduced over
  the copies' axes (backward.py writes it).
  In training and prefill tp runs with Megatron-LM's sequence parallelism (Korthikanti et
  al. 2022; `tp-nosp` runs without, as above): the residual stream, the norms' inputs and
  outputs, is split along the sequence over the tp axes (`bf16[B, T_Y, D]`); an AllGather
  over them makes T whole before the column-parallel matmuls (q, k, v; the MLP's up
  projections; the output layer), and the row-parallel ones (the attention output and MLP
  down projections) write their partial sums into `T_Y`, which the engine reduce-scatters:
  the bytes of the AllReduce, split into its two halves (the embedding's lookup, too). The
  backward mirrors them (`sequence_split`); decode has one token a sequence, and nothing to
  split.

* sequence (sp, context parallelism): every sequence's tokens split over the axis (`T_I`,
  and `S_I` on the keys' side); each attention block's keys and values are gathered
  over it before the block (`AllGather_I`, written into the program) and their gradients
  reduce-scattered back in the backward; the weights' gradients are summed over it as
  over a data-parallel axis;
* pipeline (pp): the layers split into stages over the axis, the batch into microbatches;
  each end stage is a program of its own, sharded by the other kinds (pipeline.py);
* expert (ep, a mixture of experts): the experts split over the axis (`E_M`, each chip
  its E/|M| experts' weights), and the batch too, as over a data-parallel axis, for the
  layers outside the experts. Each chip routes its own tokens; an AllToAll then sends
  each expert its tokens (dispatch, `AllToAll_{M,E}`), and another brings the results
  back to their tokens' chips (combine), both written into the program; the experts'
  weights' gradients are summed over the data-parallel axes only, the others' over the
  expert axes too.

The backward pass is written by `backward.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace

from ..errors import SpecError
from ..hardware.machines import Machine
from ..ir import Mesh, MeshAxis, Statement, tensors_of
from ..lang.parsing import parse_mesh
from ..lang.source import (
    Apply,
    Backward,
    Collective,
    Contraction,
    Declare,
    Dim,
    Fused,
    Item,
    Let,
    MeshLine,
    Part,
    Program,
    Repeat,
    Tensor,
    map_items,
)
from . import kinds
from .activations import carries_tokens
from .kinds import Axis, Kind

Strategy = dict[str, tuple[Axis, ...]]


def mesh_axes(found: Strategy) -> tuple[MeshAxis, ...]:
    """A strategy's axes, sized, in the order its program's mesh line writes them."""
    return tuple(MeshAxis(a, size, link) for axes in found.values() for a, size, link in axes)


def _axes_named(value: str, mesh: Mesh, kind: str) -> list[str]:
    """`X`, or `XY`: one axis name, or axis names run together (each a letter)."""
    if value in mesh.names:
        return [value]
    if all(ch in mesh.names for ch in value) and len(set(value)) == len(value):
        return list(value)
    raise SpecError(f"strategy {kind}={value}: no mesh axis {value} (the mesh has {', '.join(mesh.names)})")


def parse_strategy(text: str, mesh: Mesh | None = None, domain: int | None = None, partial: bool = False
                   ) -> Strategy:
    """`dp=4,tp=8` (sizes: the mesh is built) or `dp=X,tp=Y`, `fsdp=XY` (axes of `mesh`,
    with their links), as {kind: ((axis, size, link), ...)}. A mesh built from sizes sits
    on the chip's fast links (ICI, NVLink) while it fits its `domain`; past it, data
    parallelism (or else FSDP) goes on the slower network between domains (DCN: pods, or
    nodes), as it is deployed. `partial`: a domain may be used in part (`_across_domains`)."""
    if mesh is not None:
        mesh.number("a parallelism strategy")
    found: Strategy = {}
    for part in text.split(","):
        kind, eq, value = (p.strip() for p in part.partition("="))
        if not eq or not kind or not value:
            raise SpecError(f"--strategy takes KIND=SIZE or KIND=AXIS, e.g. dp=4,tp=8; got {part.strip()!r}")
        called = kinds.find(kind)
        if called is None:
            raise SpecError(f"unknown strategy '{kind}': {kinds.known()}")
        kind = called.name
        if kind in found:
            raise SpecError(f"strategy {kind} is given twice")
        if value.isdigit():
            if mesh:
                raise SpecError("with --mesh, a strategy names its axes (dp=X,tp=Y), not sizes")
            size = int(value)
            if not 1 <= size <= 65536:
                raise SpecError(f"{kind}={size}: a strategy's size is from 1 to 65536 chips")
            found[kind] = ((called.axis, size, "ici"),)
            continue
        if mesh is None:
            raise SpecError(f"strategy {kind}={value}: no mesh to name axes of: give --mesh X=4,Y=8, "
                            "or sizes (dp=4,tp=8)")
        names = _axes_named(value, mesh, kind)
        used = {a for axes in found.values() for a, *_ in axes}
        twice = [a for a in names if a in used]
        if twice:
            raise SpecError(f"mesh axis {twice[0]} is used by two strategies")
        found[kind] = tuple((a, mesh.axis(a).number, mesh.axis(a).link) for a in names)
    data = [k.name for k in kinds.where(lambda k: k.data, found)]
    if len(data) > 1:
        raise SpecError(f"{' and '.join(data)} each split the batch over the data-parallel axes (zero1 with the "
                        "optimizer state split too, zero2 the gradients as well): give one")
    width = [k.name for k in kinds.where(lambda k: k.splits_width, found)]
    if len(width) > 1:
        raise SpecError(f"{' and '.join(width)} are one tensor parallelism, with Megatron sequence parallelism and "
                        "without: give one")
    chips = math.prod(size for axes in found.values() for _, size, _ in axes)
    if mesh is None and domain and chips > domain:
        found = _across_domains(found, domain, partial=partial)
    unused = [a for a in (mesh.names if mesh else ()) if a not in {n for axes in found.values() for n, *_ in axes}]
    if unused:
        raise SpecError(f"mesh axis {', '.join(unused)} is given to no strategy: name it (dp={unused[0]}) or "
                        "drop it")
    return found


def _across_domains(found: Strategy, domain: int, first: str | None = None, partial: bool = False) -> Strategy:
    """A mesh built from sizes, past the chip's fast-link domain (an NVLink node, a TPU
    pod): the domain is filled from the innermost kind out (by `Kind.nesting`: tp, then ep, sp,
    fsdp, dp and pp), and what is left of a kind goes between domains, on DCN, as its own axis
    (`Kind.outer`). `first` names a kind to fill the domain with right after those that split
    the width (tp: its collectives are on activations, each layer's, so it stays inside).

    Each kind takes the largest share of its size the room left holds: on a torus, a
    divisor of the room too (its axes must tile the pod: gcd); where the domain may be used
    in part (`partial`: GPUs behind NVSwitches, or fully connected, all alike), any divisor of
    the size, so that tp=8,dp=16 on NVL72 racks of 72 puts 64 GPUs in each of 2 racks, not 8
    in each of 16."""
    def place(kind: kinds.Kind) -> tuple[bool, bool, int]:
        return not kind.splits_width, kind.name != first, kind.nesting

    budget, out = domain, Strategy()
    for kind in sorted(kinds.where(lambda k: True, found), key=place):
        (name, size, _), = found[kind.name]
        inner = max(d for d in range(1, min(size, budget) + 1) if size % d == 0) if partial else \
            math.gcd(size, budget)
        budget //= inner
        axes = ((kind.outer, size // inner, "dcn"),) if size > inner else ()
        out[kind.name] = axes + (((name, inner, "ici"),) if inner > 1 or not axes else ())
    return {kind: out[kind] for kind in found}


def layouts(sizes: dict[str, int], domain: int | None, partial: bool = False) -> list[tuple[dict[str, str], Mesh]]:
    """The ways worth costing to lay a strategy given by sizes on the chip's fast-link
    domains, each as the axes each kind takes (for `--strategy dp=X,fsdp=QZ`) and the mesh
    (`--mesh`): first as `parse_strategy` lays it (by `Kind.nesting`), then with each other
    kind filling the domain first after tp, where that lays it otherwise (`partial`: as
    `_across_domains`). None where the strategy fits one domain.

    Examples:
        >>> [(axes, mesh.axes_text()) for axes, mesh in layouts({"dp": 2, "fsdp": 16, "tp": 1}, 8)]
        [({'dp': 'R', 'fsdp': 'QZ'}, 'R=2@dcn, Q=2@dcn, Z=8'), ({'dp': 'X', 'fsdp': 'QZ'}, 'X=2, Q=4@dcn, Z=4')]
    """
    given: Strategy = {kind: ((kinds.kind(kind).axis, size, "ici"),) for kind, size in sizes.items() if size > 1}
    if not domain or math.prod(sizes.values()) <= domain:
        return []
    found: list[Strategy] = []
    for first in (None, *(k.name for k in kinds.where(lambda k: not k.splits_width, given))):
        laid = _across_domains(given, domain, first, partial)
        if laid not in found:
            found.append(laid)
    return [({kind: "".join(a for a, *_ in axes) for kind, axes in laid.items()}, Mesh(mesh_axes(laid)))
            for laid in found]


def fills_in_part(target: Machine | None) -> bool:
    """Whether a strategy may use the chip's fast-link domain in part: GPUs behind switches
    or fully connected (any of them alike), not a torus's chips (its axes tile the pod)."""
    chip = target.chip if target is not None else None
    return chip is not None and chip.texts.get("interconnect.topology") in ("switch", "mesh")


def is_parameter(tensor: Tensor) -> bool:
    """A parameter of the template (a weight, a table, a norm's scale): activations and
    caches carry the step's tokens (the batch B; an expert's C, the routed `tokens` and
    the experts' result `slots`), parameters do not."""
    return not carries_tokens(tensor.names)


def names(strategy: Strategy, test: Callable[[Kind], bool]) -> str:
    """The axis names of the kinds that pass `test`, run together in the table's order ("XZ")."""
    return "".join(a for kind in kinds.where(test) for a, *_ in strategy.get(kind.name, ()))


def subscripted(p: Program, strategy: Strategy) -> Program:
    """The program with a mesh line, and each dim a kind splits subscripted with its axes
    in every tensor (never in `let` lines); FSDP's parameters are written sharded but still
    used whole (`gathered` writes their gathers)."""
    if not strategy:
        return p
    batch = names(strategy, lambda k: k.splits_batch)
    tensor, fsdp = names(strategy, lambda k: k.splits_width), names(strategy, lambda k: k.splits_params)
    heads, copies = _heads(p, strategy)
    sequence, expert = names(strategy, lambda k: k.splits_sequence), names(strategy, lambda k: k.splits_experts)
    # an expert's tokens (C) once each chip holds its experts' (before, `_exchanged`, over the
    # expert axes too); a MoE's gathers look up each chip's own rows, so `tokens` and `slots`,
    # the tables they index, are written whole
    routed = names(strategy, lambda k: k.splits_tokens and not k.splits_experts)

    def split(t: Tensor) -> Tensor:
        parameter = is_parameter(t)
        # an expert's weights (they have F, or MLA's experts' Fe) and its tokens (C, Ct) are
        # split by expert; the router's are not
        by_expert = "C" in t.names or "Ct" in t.names or (parameter and ("F" in t.names or "Fe" in t.names))
        # the vocabulary: the output layer's, and the input embedding table's (its lookup's
        # partial sums the engine reduces), over every tp axis, KV heads' copies' included
        axes = {"B": batch, "K": heads, "G": copies, "F": tensor, "D": fsdp if parameter else "",
                "V": tensor, "T": sequence, "S": sequence, "E": expert if by_expert else "", "C": routed,
                "Et": expert if by_expert else "", "Ct": routed}
        return t.with_dims([Dim(d.name, axes.get(d.name, "")) for d in t.dims])

    def each(item: Item) -> tuple[Item, ...]:
        if isinstance(item, (Contraction, Apply, Collective, Fused, Declare)):
            return (item.mapped(split),)
        return (item,)

    items = map_items(p.items, each)
    mesh = MeshLine(tuple((a, size, link) for axes in strategy.values() for a, size, link in axes))
    out = Program((*items[:1], mesh, *items[1:]))
    return _exchanged(_context_gathered(out, sequence), expert, routed)


def _heads(p: Program, strategy: Strategy) -> tuple[str, str]:
    """The tensor-parallel axes the KV heads are split over, and those each is copied over
    (`head_axes`), for the KV heads the template's `let` gives."""
    axes = tuple(axis for kind in kinds.where(lambda k: k.splits_width) for axis in strategy.get(kind.name, ()))
    kv = next((v for item in p.items if isinstance(item, Let) for n, v in item.entries if n == "K"), "")
    if not axes or not kv.isdigit():  # not a template's program: its K is split as written, and checked so
        return "".join(a for a, *_ in axes), ""
    return head_axes(axes, int(kv))


_EXPERTS, _PER_EXPERT = ("E", "Et"), ("C", "Ct")  # all experts and their tokens; decode's touched ones


def _exchanged(p: Program, axes: str, routed: str) -> Program:
    """Expert parallelism: each chip routes its own tokens (the dispatch gather sorts them
    by expert, every expert's C split over all the token axes), then an AllToAll over the
    expert axes sends each expert its tokens (E split, C over the other axes); before the
    combine gather, another sends the results back to their tokens' chips."""
    if not axes:
        return p

    def unrouted(t: Tensor) -> Tensor:  # the experts (E, or decode's touched Et) whole, their tokens split
        return t.with_dims([Dim(d.name) if d.name in _EXPERTS and d.axes == axes
                            else Dim(d.name, routed + axes) if d.name in _PER_EXPERT and d.axes == routed
                            else d for d in t.dims])

    def split(t: Tensor) -> str | None:  # the name of the experts' dim split over the expert axes
        return next((d.name for d in t.dims if d.name in _EXPERTS and d.axes == axes), None)

    def exchange(items: tuple[Item, ...]) -> tuple[Item, ...]:
        out: list[Item] = []
        for item in items:
            if isinstance(item, (Repeat, Part, Backward)):
                out.append(replace(item, body=exchange(item.body)))
            elif isinstance(item, Apply) and item.word == "gather" and (experts := split(item.output)):
                # dispatch: each chip its own tokens, sorted by expert
                result = item.output
                out += [item.mapped(unrouted), Collective("AllToAll", (*axes, experts), unrouted(result), result,
                                                          "dispatch: to the experts' chips")]
            elif isinstance(item, Apply) and item.word == "gather" and item.operands[0].names[0] == "slots":
                last = out[-1]
                assert isinstance(last, Contraction)  # the experts' results
                result = last.output.unnamed()
                each = next(d.name for d in result.dims if d.name in _PER_EXPERT)
                out += [Collective("AllToAll", (*axes, each), result, unrouted(result),
                                   "combine: back to the tokens' chips"), item]
            else:
                out.append(item)
        return tuple(out)

    return Program(exchange(p.items))


def _context_gathered(p: Program, axes: str) -> Program:
    """Sequence (context) parallelism: attention reads every key and value of the sequence,
    so before each fused attention block its keys and values are gathered over the axes
    (each chip computed those of its own tokens), and inside it S is whole."""
    if not axes:
        return p
    local = Dim("S", axes)

    def whole(t: Tensor) -> Tensor:
        return t.with_dims([Dim("S") if d == local else d for d in t.dims])

    def each(item: Item) -> tuple[Item, ...]:
        if not isinstance(item, Fused):
            return (item,)
        # each read of the keys or the values (a tensor with S and no T)
        gathers = tuple(Collective("AllGather", (axes,), t.unnamed(), whole(t.unnamed()),
                                   "the sequence's keys or values")
                        for s in item.statements for t in s.operands
                        if local in t.dims and "T" not in t.names)
        return (*gathers, item.mapped(whole))

    return Program(map_items(p.items, each))


def sequence_parallel_axes(p: Program, strategy: Strategy) -> str:
    """The axes Megatron sequence parallelism splits the sequence over in `p` (a template's
    subscripted program, forward or backward): the sequence-parallel tp kind's, where the
    program has a residual stream `[B, T, D]` (none in decode) and no mixture of experts
    (its routed tokens, C, are not split along the sequence: "" there, and said so)."""
    axes = names(strategy, lambda k: k.sequence_parallel)
    if not axes:
        return ""
    shapes = _shapes(p.items)
    return axes if _STREAM in shapes and not any("C" in s for s in shapes) else ""


def _shapes(items: tuple[Item, ...]) -> set[tuple[str, ...]]:
    """The dims (bare) of every tensor the items' statements read or write, at every depth."""
    out: set[tuple[str, ...]] = set()
    for item in items:
        if isinstance(item, (Repeat, Part, Backward)):
            out |= _shapes(item.body)
        elif isinstance(item, Fused):
            out |= {t.names for s in item.statements for t in s.tensors()}
        elif isinstance(item, (Contraction, Apply, Collective)):
            out |= {t.names for t in item.tensors()}
    return out


# the residual stream's shape, and its keys' side (S = T in training and prefill)
_STREAM, _KEYS = ("B", "T", "D"), ("B", "S", "D")


def sequence_split(p: Program, strategy: Strategy, backward: bool = False) -> Program:
    """Megatron sequence parallelism (see the module docstring) written into a subscripted
    program, the forward or (`backward`) the backward pass written from it. Every `[B, T,
    D]` activation is split along T over the tp axes (`T_Y`), but where a matmul reads it
    beside a tensor split over them (a column-parallel weight; in the backward, a
    row-parallel weight or the gradient a weight's gradient contracts): there it is read
    whole, an AllGather written before the first such read of it. So the row-parallel
    matmuls' partial sums, and in the backward the column-parallel ones' input gradients,
    are written `T_Y`: reduce-scattered (the gradients of the forward's AllGathers). The
    weights' gradients read the column-parallel matmuls' inputs whole, gathered again in
    the backward as Megatron-LM does (the forward kept only each chip's shard). The input
    embedding's lookup in its table split by vocabulary holds partial sums: written `T_Y`,
    reduce-scattered into the stream's shard (Megatron's VocabParallelEmbedding); a table
    not split over the tp axes (learned positions) is looked up whole, each chip keeping
    its shard. In the backward the lookups' gradient is gathered whole before the tables'
    (each chip scatters every token's gradient into its own rows)."""
    axes = sequence_parallel_axes(p, strategy)
    if not axes:
        return p
    tp = set(axes)

    def split(t: Tensor) -> Tensor:
        return t.with_dims([Dim("T", d.axes + axes) if d.name == "T" else d for d in t.dims])

    def whole(t: Tensor) -> Tensor:
        """The T form of a stream tensor (S = T), whole over the tp axes (and reduced)."""
        return replace(t, name=None, unreduced="").with_dims([Dim("T", d.axes) if d.name == "S" else d
                                                              for d in t.dims])

    def beside_split(s: Contraction | Apply, t: Tensor) -> bool:
        return any(tp & set(d.axes) for o in s.operands if o is not t for d in o.dims)

    def gather(t: Tensor) -> Collective:
        return Collective("AllGather", (axes,), split(whole(t)), whole(t),
                          "Megatron sequence parallelism: the tokens made whole")

    def walk(items: tuple[Item, ...]) -> tuple[Item, ...]:
        out: list[Item] = []
        fresh: Tensor | None = None  # the stream tensor the last AllGather made whole, while it is still read
        for item in items:
            if isinstance(item, (Repeat, Part, Backward)):
                out.append(replace(item, body=walk(item.body)))
                fresh = None
                continue
            read: list[Tensor] = []
            if isinstance(item, Contraction):
                read = [t for t in item.operands if t.names in (_STREAM, _KEYS) and beside_split(item, t)]
                kept = {id(t) for t in read}
                # partial sums written as such (KV heads' copies: backward.py) stay whole until reduced
                item = replace(item, operands=tuple(t if id(t) in kept or t.names != _STREAM else split(t)
                                                    for t in item.operands),
                               output=split(item.output) if item.output.names == _STREAM and
                               not item.output.unreduced else item.output)
            elif isinstance(item, Apply) and item.word == "gather" and item.output.names == _STREAM:
                if backward:  # it reads the gradient of its output, whole
                    read = [item.output]
                elif beside_split(item, item.output):  # the table split by vocabulary: its partial sums scattered
                    item = replace(item, output=split(item.output))
            elif isinstance(item, Collective) and item.kind == "AllReduce" and item.output.names == _STREAM:
                # partial sums of the stream written out: reduce-scattered into its shard instead
                assert set("".join(item.subscript)) == tp, item
                item = Collective("ReduceScatter", (*axes, "T"), item.input, split(item.output), item.comment)
            elif isinstance(item, (Apply, Collective)):
                item = item.mapped(lambda t: split(t) if t.names == _STREAM else t)
            wanted = {whole(t) for t in read}
            if wanted and wanted != {fresh}:
                fresh, = wanted
                out.append(gather(fresh))
            elif not wanted and _writes_stream(item):  # a new stream: what was gathered is stale
                fresh = None
            out.append(item)
        return tuple(out)

    return Program(walk(p.items))


def _writes_stream(item: Item) -> bool:
    """A statement writing the residual stream (or its gradient), or a block's boundary."""
    if isinstance(item, (Contraction, Apply, Collective)):
        return item.output.names == _STREAM
    return isinstance(item, (Fused, Repeat, Part, Backward))


def megatron_note(kind: str, axes: str, statements: Iterable[Statement], mode: str) -> str:
    """What a strategy's report says of a tensor-parallel kind's sequence parallelism ("" for
    another kind), from the program's statements (`statements`, the IR's): whether T is split
    over its axes."""
    declared = kinds.kind(kind)
    if not declared.splits_width:
        return ""
    if not declared.sequence_parallel:
        return "no Megatron sequence parallelism: norms and residuals whole on every chip"
    if mode == "decode":
        return "no Megatron sequence parallelism in decode: one token a sequence"
    split = any(d.name == "T" and set(axes) <= set(d.axes) for s in statements for t in tensors_of(s) for d in t.dims)
    if not split:
        return "no Megatron sequence parallelism: not modelled for a mixture of experts' layers"
    again = "; the backward gathers each column-parallel matmul's input again for its weights' gradient, " \
            "counted exposed (Megatron-LM overlaps it with the input's gradient)" if mode == "train" else ""
    return ("with Megatron sequence parallelism: norms and residuals split over the sequence, each AllReduce a "
            f"ReduceScatter and an AllGather{again}; tp-nosp runs without")


def gathered(p: Program, strategy: Strategy) -> Program:
    """FSDP: before each statement that reads a sharded parameter, an AllGather of it over
    the FSDP axes, and the statement reads the gathered whole."""
    fsdp = names(strategy, lambda k: k.splits_params)
    if not fsdp:
        return p
    mark = Dim("D", fsdp)

    def whole(t: Tensor) -> Tensor:
        return t.with_dims([Dim("D") if d == mark else d for d in t.dims])

    def gather(items: tuple[Item, ...]) -> tuple[Item, ...]:
        out: list[Item] = []
        previous: Item | None = None
        for item in items:
            if isinstance(item, (Repeat, Part, Backward)):
                out.append(replace(item, body=gather(item.body)))
                previous = None
            elif isinstance(item, Fused):  # gathered before the block: a collective is no kernel's part
                found = [c for s in item.statements for c in _gathers(s, mark, fsdp, whole)]
                out += list(dict.fromkeys(found))
                out.append(replace(item, statements=tuple(_reading_whole(s, found) for s in item.statements)))
                previous = None
            elif item == previous:  # a statement written twice (a backward's) reads what was gathered for the first
                out.append(out[-1])
            elif isinstance(item, (Contraction, Apply)):
                previous = item
                found = _gathers(item, mark, fsdp, whole)
                out += [*found, _reading_whole(item, found)]
            else:
                previous = item
                out.append(item)
        return tuple(out)

    return Program(gather(p.items))


def _gathers(s: Contraction | Apply, mark: Dim, fsdp: str, whole: Callable[[Tensor], Tensor]) -> list[Collective]:
    """The AllGathers of the sharded parameters a statement reads, each once."""
    read = dict.fromkeys(t.unnamed() for t in s.operands if is_parameter(t) and mark in t.dims)
    return [Collective("AllGather", (fsdp,), t, whole(t)) for t in read]


def _reading_whole(s: Contraction | Apply, found: list[Collective]) -> Contraction | Apply:
    """The statement reading each gathered parameter whole (its result keeps its own form)."""
    if not found:
        return s
    swap = {c.input: c.output for c in found}
    return replace(s, operands=tuple(replace(swap[t.unnamed()], name=t.name) if t.unnamed() in swap else t
                                     for t in s.operands))


def shard(p: Program, strategy: Strategy) -> Program:
    """The forward program written sharded (`subscripted`, `sequence_split`, then `gathered`)."""
    return gathered(sequence_split(subscripted(p, strategy), strategy), strategy)


def strategy_of(strategy: str | None, mesh: str | Mesh | None, mode: str, config: dict, chips: int,
                target: Machine | None = None) -> Strategy:
    """The strategy a named model is sharded with ({} for none), checked against the model."""
    if not strategy:
        if mesh:
            raise SpecError("--mesh goes with --strategy KIND=AXIS (dp=X,tp=Y)")
        return {}
    domain = target.chip.figure("interconnect.domain_size") if target is not None and target.chip is not None \
        else None
    given = parse_mesh(mesh) if mesh else None
    clash = [a for a in (given.names if given else ()) if a in _TEMPLATE_DIMS]
    if clash:
        raise SpecError(f"mesh axis {clash[0]} is also a dim of the model's program ({_TEMPLATE_DIMS[clash[0]]}): "
                        f"name the axis otherwise (X, Y, Z, P, I, M, ...)")
    found = parse_strategy(strategy, given, int(domain) if domain else None, fills_in_part(target))
    for kind in kinds.where(lambda k: True, found):  # a kind refused outside its modes, or by the model
        if mode not in kind.modes:
            raise SpecError(kind.refusal.format(name=kind.name))
        if kind.check is not None:
            kind.check(found[kind.name], config)
    laid = _copies_laid(found, config["sizes"]["K"], built=given is None)
    spans = math.prod(n for axes in laid.values() for _, n, _ in axes)
    if chips not in (1, spans):  # --chips beside a strategy must say what its axes span
        raise SpecError(f"--strategy {strategy} spans {spans} chips, not the {chips} of --chips: give one, or the "
                        "other to match")
    return laid


def _copies_laid(found: Strategy, kv_heads: int, built: bool) -> Strategy:
    """Tensor parallelism wider than the KV heads, each head copied: on a mesh built from
    sizes its innermost axes hold a head's copies (neighbours, on the fastest links, as
    Megatron ranks them), an axis they take part of split in two, the copies' part named in
    lowercase (Y=16 over 8 KV heads: Y=8, y=2). A given mesh's tp axes must end with the
    copies' (`head_axes` says so where they do not)."""
    out = dict(found)
    for kind in kinds.where(lambda k: k.splits_width, found):
        axes = found[kind.name]
        size = math.prod(n for _, n, _ in axes)
        left = size // kv_heads if size > kv_heads else 1  # kinds.copies checked it is whole
        kept, copied = list(axes), list[Axis]()
        while built and left > 1:
            name, n, link = kept.pop()
            if left % n == 0:  # the whole axis holds copies
                copied.insert(0, (name, n, link))
                left //= n
            elif n % left == 0:
                kept.append((name, n // left, link))
                copied.insert(0, (name.lower(), left, link))
                left = 1
            else:
                raise SpecError(f"{kind.name}={size} copies each of the {kv_heads} KV heads on {size // kv_heads} "
                                f"chips, which its axes ({', '.join(f'{a}={n}' for a, n, _ in axes)}) do not "
                                f"split off: give the mesh (--mesh) with {kind.name}'s axes named, the copies' last")
        out[kind.name] = (*kept, *copied)
        head_axes(out[kind.name], kv_heads, kind.name)
    return out


def head_axes(axes: tuple[Axis, ...], kv_heads: int, kind: str = "tp") -> tuple[str, str]:
    """The tensor-parallel axes the KV heads are split over, and those each head is copied
    over where the axes are wider than the heads: the last axes, spanning as many chips as
    each head has copies (its query heads split among them, G).

    Examples:
        >>> head_axes((("Y", 8, "ici"),), 8), head_axes((("Y", 8, "ici"), ("y", 2, "ici")), 8)
        (('Y', ''), ('Y', 'y'))
    """
    names = [a for a, *_ in axes]
    if any(n is None for _, n, _ in axes):  # a strategy family's (families.py): the copies' axes are lowercase
        return "".join(a for a in names if not a.islower()), "".join(a for a in names if a.islower())
    size = math.prod(n for _, n, _ in axes)
    if size <= kv_heads or size % kv_heads:  # split as today (a size not dividing them is refused downstream)
        return "".join(names), ""
    copies, tail = size // kv_heads, 1
    for k in range(len(axes) - 1, -1, -1):
        tail *= axes[k][1]
        if tail == copies:
            return "".join(names[:k]), "".join(names[k:])
    raise SpecError(f"{kind}={''.join(names)} ({size} chips) is wider than the {kv_heads} KV heads, so each is "
                    f"copied on {size}/{kv_heads} chips: {kind}'s last axes must span the copies (e.g. --mesh "
                    f"Y={kv_heads},W={copies} --strategy {kind}=YW)")


def kv_copies(p: Program) -> str:
    """The axes each KV head is copied over in a sharded template ("" where none): those its
    query groups G are split over."""
    return next((d.axes for item in _all_items(p.items) if isinstance(item, Declare)
                 for t in item.tensors for d in t.dims if d.name == "G" and d.axes), "")


def _all_items(items: tuple[Item, ...]) -> list[Item]:
    out: list[Item] = []
    for item in items:
        out += _all_items(item.body) if isinstance(item, (Repeat, Part, Backward)) else [item]
    return out


# the dims the transformer template writes (templates.py), which a mesh axis must not be named
_TEMPLATE_DIMS = {"B": "the batch", "T": "tokens per sequence", "S": "tokens attended to", "D": "the model width",
                  "F": "the MLP width", "K": "KV heads", "G": "query heads per KV head", "H": "the head dim",
                  "L": "layers", "V": "the vocabulary", "N": "query heads", "E": "the experts",
                  "A": "active experts", "C": "tokens per expert"}
