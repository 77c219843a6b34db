"""The kinds of parallelism, each declared once: what `--strategy` calls it, the mesh axis
a strategy given by sizes builds for it, and what it splits; strategies.py, backward.py,
the costs, the pipeline and the planner ask these declarations, never a kind's name.

A new kind is one `Kind` in `KINDS`. Where it splits a dim no kind splits yet, strategies.py
writes that dim's subscript (and any collective the split needs) from the property that
says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import SpecError
from .decls import MODES

Axis = tuple[str, int, str]  # name, size, link


@dataclass(frozen=True, slots=True)
class Search:
    """What the planner knows when it picks each kind's sizes."""

    mode: str
    chips: int
    sequences: int  # the batch's sequences (in decode, its sequences of one new token)
    context: int
    experts: int  # 1 for a dense model
    moe: bool


def _any_size(search: Search, n: int) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of parallelism.

    `data`: the batch split, the weights copied (data parallelism and its ZeRO stages: a
    strategy takes one of them); `zero`: the ZeRO stage, 1 splitting the optimizer state over
    its axes, 2 the gradients too; `splits_batch`: the batch's sequences split over its axes;
    `sums_gradients`: the weights' gradients summed over its axes once a step;
    `splits_params`: every parameter split along D and gathered before each use (FSDP);
    `splits_width`: the heads, the MLP width and the vocabulary split (Megatron);
    `stages`: the layers split into pipeline stages; `splits_sequence`: each sequence's
    tokens split (context parallelism); `splits_experts`: a mixture's experts split, the
    tokens exchanged; `sequence_parallel`: a width-splitting kind that also splits the
    activations outside attention and the MLP (the norms', the residuals') along the sequence
    over its axes, in training and prefill (Megatron-LM's `--sequence-parallel`, Korthikanti
    et al. 2022; not context parallelism: T is whole inside attention and the MLP).
    `nesting`: where it sits on a mesh built from sizes, the lowest nearest the chip (the
    fast-link domain is filled in that order, the rest going between domains on `outer`).
    `search`: its place in the planner's search (None: not searched; the data kind takes the
    chips left), `fits` the sizes it may take there beyond those its modes allow; `listed`:
    a plan lists it at size 1 too, `listed_with_experts` only for a mixture of experts.
    `ratio_note`: what its T_math / T_network ratio means, where it needs saying."""

    name: str
    aliases: tuple[str, ...]
    axis: str
    outer: str
    nesting: int
    called: str = ""  # the word the unknown-kind message gives beside the name
    data: bool = False
    zero: int = 0
    splits_batch: bool = False
    sums_gradients: bool = False
    splits_params: bool = False
    splits_width: bool = False
    stages: bool = False
    splits_sequence: bool = False
    splits_experts: bool = False
    sequence_parallel: bool = False
    modes: tuple[str, ...] = MODES
    refusal: str = ""  # why it is refused outside its modes ({name} for its name)
    check: Callable[[tuple[Axis, ...], dict], None] | None = None  # against the model's config
    search: int | None = None
    fits: Callable[[Search, int], bool] = field(default=_any_size)
    listed: bool = False
    listed_with_experts: bool = False
    ratio_note: str = ""

    @property
    def splits_weights(self) -> bool:
        """Each chip holds a share of the weights (a floor on memory no other split lowers)."""
        return self.splits_params or self.splits_width or self.stages or self.splits_experts

    @property
    def defers_gradients(self) -> bool:
        """Gradients are summed over its axes that may wait for a step's last microbatch: the
        weights' over the batch's replicas (`sums_gradients`), and over tp's axes a norm's
        scale's and a bias's under Megatron sequence parallelism and a copied KV head's
        weights' (Megatron-LM sums them once a step too)."""
        return self.sums_gradients or self.splits_width

    @property
    def splits_tokens(self) -> bool:
        """The step's tokens split over its axes (the batch's or each sequence's)."""
        return self.splits_batch or self.splits_sequence

    def allows(self, search: Search, n: int) -> bool:
        """The planner may give it `n` chips."""
        return n == 1 or (search.mode in self.modes and self.fits(search, n))

    def lists(self, search: Search, n: int) -> bool:
        """A plan's candidate names it at this size."""
        return n > 1 or (search.mode in self.modes and
                         (self.listed or (self.listed_with_experts and search.moe)))


def _check_experts(axes: tuple[Axis, ...], config: dict) -> None:
    """ep splits a mixture of experts' experts evenly over its axes."""
    moe = config.get("moe")
    if not moe:
        raise SpecError(f"ep (expert) splits a mixture of experts' experts; {config['name']} has none: split its "
                        "weights with tp (tensor) or fsdp")
    size, experts = math.prod(n for _, n, _ in axes), moe["experts"]
    if experts % size:
        fits = [n for n in range(1, experts + 1) if experts % n == 0]
        raise SpecError(f"ep={size} does not split the {experts} experts of {config['name']} evenly: ep is one of "
                        f"{', '.join(map(str, fits))}")


def copies(size: int, kv_heads: int, heads: int) -> int | None:
    """How many chips hold each KV head when tensor parallelism is `size` chips wide: 1 where
    `size` divides the KV heads (each chip its own), `size / kv_heads` where it is a multiple
    of them dividing the query heads (each KV head copied, as Megatron and vLLM do, its query
    heads split among the copies), None where neither.

    Examples:
        >>> copies(4, 8, 32), copies(16, 8, 32), copies(12, 8, 32), copies(24, 8, 32)
        (1, 2, None, None)
    """
    if kv_heads % size == 0:
        return 1
    return size // kv_heads if size % kv_heads == 0 and heads % size == 0 else None


def _check_heads(axes: tuple[Axis, ...], config: dict) -> None:
    """tp past the KV heads copies them: a multiple of them dividing the query heads (below
    them, a size not dividing them is refused by the sharded program's own check, pointing
    at the declaration)."""
    size, kv_heads, heads = math.prod(n for _, n, _ in axes), config["sizes"]["K"], config["sizes"]["N"]
    if size > kv_heads and copies(size, kv_heads, heads) is None:
        fits = [n for n in range(1, heads + 1) if copies(n, kv_heads, heads) is not None]
        raise SpecError(f"tp={size} does not split the {kv_heads} KV heads and {heads} query heads of "
                        f"{config['name']}: tp is one of {', '.join(map(str, fits))} (past {kv_heads}, each KV head "
                        f"copied on tp/{kv_heads} chips)")


_TRAINS = "{name} shards the optimizer state (and more) for training; to serve, split the weights with tp " \
          "(tensor) or copy them with dp"

# every letter a template uses as a dim is left out of the axes (M for MoE's experts; U is free too);
# tp wider than the KV heads copies each on a lowercase axis (strategies.py: y for Y)
KINDS: tuple[Kind, ...] = (
    Kind("dp", ("data",), "X", "R", 4, called="data", data=True, splits_batch=True, sums_gradients=True,
         listed=True),
    Kind("zero1", ("zero-1",), "X", "R", 4, data=True, zero=1, splits_batch=True, sums_gradients=True,
         modes=("train",), refusal=_TRAINS),
    Kind("zero2", ("zero-2",), "X", "R", 4, data=True, zero=2, splits_batch=True, sums_gradients=True,
         modes=("train",), refusal=_TRAINS),
    Kind("fsdp", ("zero3", "zero-3"), "Z", "Q", 3, called="zero3", splits_batch=True, splits_params=True,
         modes=("train",), refusal=_TRAINS, search=4, listed=True),
    Kind("tp", ("tensor",), "Y", "O", 0, called="tensor", splits_width=True, sequence_parallel=True,
         check=_check_heads, search=0, listed=True,
         ratio_note=" (above 1: compute-bound; the batch does not change it)"),
    # tensor parallelism without Megatron's sequence parallelism: each chip keeps the norms' and
    # residuals' activations whole and the two sublayers' outputs are all-reduced (never searched)
    Kind("tp-nosp", ("tensor-nosp",), "Y", "O", 0, splits_width=True, check=_check_heads,
         ratio_note=" (above 1: compute-bound; the batch does not change it)"),
    Kind("pp", ("pipeline",), "P", "J", 5, called="pipeline", stages=True, modes=("train",),
         refusal="pp (pipeline) is costed for training, with microbatches and a schedule; to serve, split the "
                 "weights with tp (tensor) or copy them with dp",
         search=1, listed=True, ratio_note=" (a microbatch's work against its send)"),
    # sequence parallelism only where the batch has fewer sequences than chips (else splitting
    # sequences among chips costs the keys' gathers for nothing data parallelism cannot do),
    # and a size dividing the context
    Kind("sp", ("sequence", "cp", "context"), "I", "W", 2, called="sequence", sums_gradients=True,
         splits_sequence=True, modes=("train", "prefill"),
         refusal="sp (sequence) splits each sequence's tokens; a decode step has one a sequence: split the "
                 "weights with tp (tensor) or copy them with dp",
         search=3, fits=lambda search, n: search.sequences < search.chips and search.context % n == 0),
    Kind("ep", ("expert",), "M", "U", 1, called="expert", splits_batch=True, sums_gradients=True,
         splits_experts=True, check=_check_experts, search=2,
         fits=lambda search, n: search.experts % n == 0, listed_with_experts=True),
)


def find(word: str) -> Kind | None:
    """The kind a name or an alias calls (any case), or None."""
    word = word.lower()
    return next((k for k in KINDS if word == k.name or word in k.aliases), None)


def kind(name: str) -> Kind:
    """The kind of a canonical name (as a strategy's keys hold them)."""
    found = next((k for k in KINDS if k.name == name), None)
    assert found is not None, f"no kind {name!r}"
    return found


def where(test: Callable[[Kind], bool], within: Iterable[str] | None = None) -> tuple[Kind, ...]:
    """The kinds, in the table's order, that pass `test` (among the names `within`)."""
    among = None if within is None else set(within)
    return tuple(k for k in KINDS if test(k) and (among is None or k.name in among))


def known() -> str:
    """The kinds as the unknown-kind message lists them."""
    shown = [f"{k.name} ({k.called})" if k.called else k.name for k in KINDS]
    return ", ".join(shown[:-1]) + " or " + shown[-1]


def stages() -> Kind:
    """The pipeline's kind (its stages are programs of their own: pipeline.py)."""
    return next(k for k in KINDS if k.stages)


def rest() -> Kind:
    """The kind the planner gives the chips the searched kinds leave: plain data parallelism."""
    return next(k for k in KINDS if k.data and not k.zero)


def zero_stage(stage: int) -> Kind:
    """Data parallelism at a ZeRO stage (0: plain)."""
    return next(k for k in KINDS if k.data and k.zero == stage)
