"""What a model analysis offers, declared once: its quantities (name, unit, meaning; the
report, the JSON and `symroof check` take them from here) and its options; the training
state's bytes a parameter and a token budget, with their rows and JSON, which a model's
report, a parameter-count model and a plan all print."""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..errors import SpecError
from ..hardware.machines import Machine
from ..render.json_report import json_value
from ..show import human, number, pretty

MODES = ("train", "prefill", "decode")
REMAT = ("full", "none")
GRADS = {"fp32": 4, "bf16": 2}  # bytes a gradient element takes; default: the parameter's own dtype
MASTERS = ("fp32", "none")  # the fp32 master copy of the weights a mixed-precision stack keeps, or none

# bitsandbytes' 8-bit Adam quantizes each moment in blocks of 256 values, one fp32 absmax scale
# a block (bitsandbytes/optim/optimizer.py, Optimizer2State.init_state: `blocks = n // 256`,
# `absmax1`, `absmax2` float32); a tensor under min_8bit_size = 4096 elements keeps fp32
# moments, which is not counted here (norm scales: a few thousandths of a percent of a model)
ADAM8BIT_BLOCK = 256


@dataclass(frozen=True)
class Optimizer:
    """An optimizer's state beside the weights, gradients and master copy: its dense moments'
    bytes per parameter, whether its second moment is factored (Adafactor: a matrix keeps a
    row and a column vector, counted from the program's shapes), and the master copy it
    keeps by default (plain SGD updates the weights as stored: none, today's 0 bytes)."""

    name: str
    moments: sympy.Rational  # bytes per parameter
    meaning: str
    factored: bool = False
    master: str = "fp32"


OPTIMIZERS: dict[str, Optimizer] = {o.name: o for o in (
    Optimizer("adam", sympy.Integer(8), "two fp32 moments (8 bytes/param)"),
    Optimizer("adam-bf16", sympy.Integer(4), "two bf16 moments (4 bytes/param)"),
    Optimizer("adam8bit", 2 * (1 + sympy.Rational(4, ADAM8BIT_BLOCK)),
              f"two 8-bit moments and an fp32 scale per {ADAM8BIT_BLOCK} values each, bitsandbytes' blocks "
              f"(2 + 8/{ADAM8BIT_BLOCK} = 2.03125 bytes/param; tensors under 4096 elements, kept in fp32 there, "
              "counted in 8 bits)"),
    Optimizer("adafactor", sympy.Integer(0),
              "a factored fp32 second moment, as optax keeps it (over a tensor's two largest dims d0, d1: "
              "elements/d0 + elements/d1 values; a vector, or a second-largest dim under 128, in full) and no "
              "first moment (beta1 off, optax's and the paper's default)", factored=True),
    Optimizer("sgd", sympy.Integer(0), "no state (no momentum); with no master copy by default", master="none"),
    Optimizer("sgd-momentum", sympy.Integer(4), "one fp32 momentum (4 bytes/param)"),
)}


@dataclass(frozen=True)
class StateBytes:
    """The bytes a parameter brings to training beside itself, by `state_bytes`: its
    gradient, its fp32 master copy and its optimizer's dense moments (Adafactor's factored
    moment is per matrix, not per parameter: `factored_elements`)."""

    grads: sympy.Rational
    master: sympy.Rational
    moments: sympy.Rational
    optimizer: Optimizer

    @property
    def per_param(self) -> sympy.Rational:
        """Gradient, master copy and moments: the bytes beyond the weight itself."""
        return self.grads + self.master + self.moments

    @property
    def optimizer_state(self) -> sympy.Rational:
        """What `optimizer_bytes` counts per parameter: the master copy and the moments."""
        return self.master + self.moments


def state_bytes(options: Options, param_bytes: sympy.Rational | int) -> StateBytes:
    """The training state's bytes per parameter stored in `param_bytes` bytes, under the
    options: the one table the model, the planner's memory floor and a parameter-count model
    read. A master copy is kept only of parameters narrower than fp32 (an fp32 parameter is
    its own master).

    Examples:
        >>> s = state_bytes(Options(), 2)
        >>> s.grads, s.master, s.moments, s.optimizer_state
        (2, 4, 8, 12)
        >>> s = state_bytes(Options(optimizer="adam8bit", grads="fp32", master="none"), 2)
        >>> s.grads, s.master, s.moments
        (4, 0, 65/32)
    """
    width = sympy.Rational(param_bytes)
    grads = sympy.Integer(GRADS[options.grads]) if options.grads is not None else width
    master = sympy.Integer(4) if options.master_copy == "fp32" and width < 4 else sympy.Integer(0)
    optimizer = OPTIMIZERS[options.optimizer]
    return StateBytes(grads, master, optimizer.moments, optimizer)


# optax's Adafactor (optax/_src/factorized.py, `_factored_dims`): a tensor's second moment is
# factored over its two largest dims, keeping one statistic without each, unless the
# second-largest is under min_dim_size_to_factor (128 by default): then it is kept whole
FACTOR_MIN_DIM = 128


def factored_elements(dims: tuple[sympy.Expr, ...]) -> sympy.Expr:
    """The fp32 values Adafactor's second moment keeps for a tensor of these (numeric)
    dims, as optax keeps it: over its two largest dims d0 >= d1 (>= 128), the elements
    over d0 plus the elements over d1; a vector, or a tensor whose second-largest dim is under
    128, in full.

    Examples:
        >>> factored_elements((4096, 11008)), factored_elements((4096, 32, 1, 128)), factored_elements((4096,))
        (15104, 135168, 4096)
    """
    sizes = [sympy.Integer(d) if isinstance(d, int) else d for d in dims]
    if not all(d.is_number for d in sizes):
        raise SpecError("Adafactor's factored second moment is taken over each parameter's two largest dims: give "
                        "every parameter dim a size (--set)")
    whole = sympy.Mul(*sizes)
    if len(sizes) < 2:
        return whole
    d1, d0 = sorted(sizes)[-2:]
    return whole if d1 < FACTOR_MIN_DIM else whole / d0 + whole / d1


def state_text(options: Options, param_bytes: sympy.Rational | int = 2) -> str:
    """The training state, in words and bytes per parameter, as reports state it."""
    s = state_bytes(options, param_bytes)
    grads = f"gradients in {options.grads}" if options.grads is not None else "gradients in the parameters' dtype"
    master = "an fp32 master copy of the weights (4 bytes/param)" if s.master else \
        "no master copy" + (" (the parameters are fp32)" if options.master_copy == "fp32" else "")
    return (f"{grads} ({s.grads} bytes/param for {param_bytes}-byte parameters); {master}; {options.optimizer}: "
            f"{s.optimizer.meaning}; optimizer_bytes = master copy + moments"
            + ("" if s.optimizer.factored else f" = {_bytes(s.optimizer_state)} bytes/param"))


def _bytes(value: sympy.Expr) -> str:
    return str(value) if value.is_Integer else f"{float(value):g}"


def budget(tokens_per_s: sympy.Expr, chips: sympy.Expr | int, total_tokens: int | float,
           price: float | None = None) -> dict[str, sympy.Expr]:
    """A token budget's time and cost: `seconds`, `days` and `hours` to process
    `total_tokens` at `tokens_per_s`, the `chip_hours` of `chips` chips over them and, with a
    `price` per chip-hour (price units: no currency is assumed, none shipped), the `cost`.

    Examples:
        >>> b = budget(sympy.Integer(1000), 8, 36 * 10**5, 2.5)
        >>> b["hours"], b["chip_hours"], b["cost"]
        (1, 8, 20)
    """
    # exact: 1.5e12 as 1500000000000, never a float's truncation; chips may be a mesh's symbol
    tokens = sympy.Integer(total_tokens) if isinstance(total_tokens, int) else sympy.Rational(repr(float(total_tokens)))
    seconds = tokens / tokens_per_s
    out = {"seconds": seconds, "hours": seconds / 3600, "days": seconds / 86400,
           "chip_hours": (chips if isinstance(chips, sympy.Expr) else sympy.Integer(chips)) * seconds / 3600}
    if price is not None:
        out["cost"] = out["chip_hours"] * price_exact(price)
    return out


def price_exact(price: float) -> sympy.Rational:
    """A price per chip-hour, checked (a positive finite number) and exact (2.5 is 5/2)."""
    if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 < price < 1e12:
        raise SpecError(f"--price is a positive number per chip-hour (in price units), below 1e12, not {price!r}")
    return sympy.Rational(repr(float(price)))


@dataclass(frozen=True)
class ModelQuantity:
    """A model quantity, and when a model has it: `train_only` in training, `inference_only`
    in prefill and decode (training keeps no cache, though its bytes per token are the
    architecture's: still shown), `needs_chip` on a chip, `needs_capacity` on one with an HBM
    capacity (not bare --peak-flops and --hbm-bw figures), `needs_tokens` in a program that
    says its tokens (`let tokens = ...`), `needs_matrix_work` where the step does matrix
    work (a utilisation of the matrix peak), `unmeshed` off a mesh (a mesh fixes the chips)."""

    name: str
    unit: str
    meaning: str
    train_only: bool = False
    needs_chip: bool = False
    inference_only: bool = False
    needs_capacity: bool = False
    needs_tokens: bool = False
    needs_matrix_work: bool = False
    unmeshed: bool = False

    @property
    def needs(self) -> tuple[str, ...]:
        """The conditions it is shown under, by their fields' names."""
        return tuple(need for need in _CONDITIONS if getattr(self, need))


_CONDITIONS = ("train_only", "inference_only", "needs_chip", "needs_capacity", "needs_tokens", "needs_matrix_work",
               "unmeshed")


MODEL_QUANTITIES: tuple[ModelQuantity, ...] = (
    ModelQuantity("params", "", "parameters, all of them"),
    ModelQuantity("params_embedding", "", "parameters of the embeddings (declared `embedding`)"),
    ModelQuantity("params_per_block", "", "parameters of one pass through the repeated block"),
    ModelQuantity("tokens", "", "tokens one step processes (`let tokens = ...`)", needs_tokens=True),
    ModelQuantity("flops", "FLOPs", "FLOPs of one forward step"),
    ModelQuantity("flops_per_token", "FLOPs", "forward FLOPs per token", needs_tokens=True),
    ModelQuantity("flops_train", "FLOPs", "model FLOPs of a training step: forward + backward (2x forward), "
                  "nothing recomputed; what an MFU counts", train_only=True),
    ModelQuantity("flops_train_per_token", "FLOPs", "model FLOPs of a training step per token", train_only=True,
                  needs_tokens=True),
    ModelQuantity("flops_train_hardware", "FLOPs", "hardware FLOPs of a training step: its model FLOPs and "
                  "what the remat policy recomputes; what an HFU counts, and what t_step runs", train_only=True),
    ModelQuantity("flops_train_hardware_per_token", "FLOPs", "hardware FLOPs of a training step per token",
                  train_only=True, needs_tokens=True),
    ModelQuantity("weight_bytes", "bytes", "bytes of the parameters"),
    ModelQuantity("grad_bytes", "bytes", "bytes of the gradients (the parameters' dtype, or --grads)", train_only=True),
    ModelQuantity("optimizer_bytes", "bytes", "bytes of the optimizer state: the fp32 master copy of the weights "
                  "(--master) and the optimizer's moments (--optimizer)", train_only=True),
    ModelQuantity("activation_bytes", "bytes", "activations kept for the backward pass", train_only=True),
    ModelQuantity("kv_bytes", "bytes", "bytes of the KV cache (declared `cache`)", inference_only=True),
    ModelQuantity("kv_bytes_per_token", "bytes", "KV cache bytes per token of context, per sequence"),
    ModelQuantity("memory_bytes", "bytes", "all of the above that must be in HBM at once (on a mesh, as every "
                  "byte count there, per chip)"),
    ModelQuantity("hbm_per_chip", "bytes", "memory_bytes over the chips"),
    ModelQuantity("hbm_left_per_chip", "bytes", "usable HBM a chip has left", needs_chip=True, needs_capacity=True),
    ModelQuantity("min_chips", "", "the fewest chips whose usable HBM holds memory_bytes", needs_chip=True,
                  needs_capacity=True, unmeshed=True),
    ModelQuantity("t_step", "s", "time of one step: the roofline's lower bound of its hardware FLOPs and bytes "
                  "(training: the forward 3x, or the forward and a written backward together, and what is "
                  "recomputed), or at the given MFU, over the chips", needs_chip=True),
    ModelQuantity("tokens_per_s", "tokens/s", "tokens over t_step", needs_chip=True, needs_tokens=True),
    ModelQuantity("mfu", "", "model FLOPs utilisation at t_step: the model FLOPs (flops_train; in inference "
                  "flops) over t_step x the chips x the matrix peak; t_step being a lower bound, the most a "
                  "step reaches", needs_chip=True, needs_matrix_work=True),
    ModelQuantity("hfu", "", "hardware FLOPs utilisation at t_step: flops_train_hardware over t_step x the "
                  "chips x the matrix peak", train_only=True, needs_chip=True, needs_matrix_work=True),
)
MODEL_QUANTITY = {q.name: q for q in MODEL_QUANTITIES}


@dataclass(frozen=True)
class Options:
    mode: str = "train"
    chips: int = 1
    optimizer: str = "adam"
    remat: str = "full"
    mfu: float | None = None
    headroom: sympy.Rational = sympy.Rational(9, 10)  # the fraction of a chip's HBM usable (--hbm-usable)
    strategy: tuple[tuple[str, str], ...] = ()  # each kind of parallelism and its axes: (("dp", "X"),)
    grads: str | None = None  # fp32 or bf16; None: each parameter's own dtype
    master: str | None = None  # fp32 or none; None: the optimizer's default (`Optimizer.master`)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SpecError(f"mode is one of {', '.join(MODES)}, not {self.mode!r}")
        if self.optimizer not in OPTIMIZERS:
            raise SpecError(f"optimizer is one of {', '.join(OPTIMIZERS)}, not {self.optimizer!r}")
        if self.grads is not None and self.grads not in GRADS:
            raise SpecError(f"grads (the gradients' dtype) is one of {', '.join(GRADS)}, not {self.grads!r}")
        if self.master is not None and self.master not in MASTERS:
            raise SpecError(f"master (the weights' master copy) is one of {', '.join(MASTERS)}, not {self.master!r}")
        usable = self.headroom
        if isinstance(usable, bool) or not isinstance(usable, (int, float, sympy.Rational)) or \
                not 0 < usable <= 1:  # NaN fails the comparison too
            raise SpecError(f"the usable fraction of HBM (--hbm-usable) is a fraction in (0, 1], not {usable!r}")
        if not isinstance(usable, sympy.Rational):  # 0.9 as 9/10, not a binary float
            object.__setattr__(self, "headroom", sympy.Rational(repr(float(usable))))
        if self.remat not in REMAT and not (self.remat.startswith("save=") and self.saved):
            raise SpecError(f"remat is one of {', '.join(REMAT)} or save=NAME,NAME (the named tensors "
                            f"kept: save=x,o,h), not {self.remat!r}")
        if isinstance(self.chips, bool) or not isinstance(self.chips, int) or not 1 <= self.chips <= 10**7:
            raise SpecError(f"chips must be a whole number from 1 to 1e7, not {self.chips!r}")
        if self.mfu is not None and (isinstance(self.mfu, bool) or not isinstance(self.mfu, (int, float))
                                     or not 1e-6 <= self.mfu <= 1):
            raise SpecError(f"MFU is a fraction of the peak, from 1e-6 to 1, not {self.mfu}")

    @property
    def default_state(self) -> bool:
        """Whether the training state and usable HBM are the defaults (what reports assume
        unless they say otherwise)."""
        return (self.grads, self.optimizer, self.master, self.headroom) == (None, "adam", None,
                                                                            sympy.Rational(9, 10))

    @property
    def master_copy(self) -> str:
        """The master copy kept: as given, else the optimizer's default."""
        return self.master if self.master is not None else OPTIMIZERS[self.optimizer].master

    @property
    def saved(self) -> tuple[str, ...]:
        """The tensors a `save=...` remat policy keeps, by name."""
        names = self.remat.removeprefix("save=").split(",") if self.remat.startswith("save=") else []
        return tuple(n.strip() for n in names if n.strip())

    @property
    def mfu_exact(self) -> sympy.Rational:
        """The MFU as an exact rational (0.4 is 2/5, not a binary float)."""
        assert self.mfu is not None
        return sympy.Rational(repr(float(self.mfu)))


def usable_hbm(target: Machine, options: Options) -> sympy.Expr:
    """The HBM a chip may fill: its capacity times the usable fraction (`--hbm-usable`)."""
    capacity = target.capacity()
    if capacity is None:
        raise SpecError(f"{target.name} has no HBM capacity figure: the chips a model needs cannot be counted")
    return capacity * options.headroom


def usable_text(options: Options) -> str:
    """The usable fraction of HBM as reports print it: 0.9, 1.0 (never a bare "1 of its capacity")."""
    shown = f"{float(options.headroom):g}"
    return shown if "." in shown or "e" in shown else shown + ".0"


def budget_rows(spent: dict[str, sympy.Expr], total_tokens: int | float,
                price: float | None, step: str = "t_step") -> list[tuple[str, str]]:
    """A token budget's rows (`decls.budget`): days (and hours, under three days), chip-hours
    and, with a price, cost; `step` names the step time each step takes."""
    days = spent["days"]
    each = " (at tokens_per_s)" if step == "tokens_per_s" else f" (each step {step})"
    if not days.is_number:
        return [("days_to_train", f"{pretty(days)} days for {human(total_tokens, 'tokens')}{each}")]
    hours = f" ({number(spent['hours'], 4)} hours)" if days < 3 else ""
    out = [("days_to_train", f"{number(days, 4)} days{hours} for {human(total_tokens, 'tokens')}{each}"),
           ("chip_hours", f"{number(spent['chip_hours'], 4)} chip-hours (every chip of the step, for the "
                          "whole time)")]
    if "cost" in spent:
        out.append(("cost", f"{number(spent['cost'], 4)} price units ({number(price, 4)} per chip-hour, as given; "
                            "no prices are shipped)"))
    return out


def budget_json(spent: dict[str, sympy.Expr], price: float | None) -> dict:
    """A token budget for JSON: days, hours, chip-hours, and with a price the price and cost."""
    out = {k: json_value(spent[k]) for k in ("days", "hours", "chip_hours")}
    if "cost" in spent:
        out.update(price_per_chip_hour=price, cost=json_value(spent["cost"]))  # in the price's units
    return out


def state_json(options: Options, param_bytes: sympy.Rational | int = 2) -> dict:
    """The training state's options and bytes per parameter (for `param_bytes`-byte
    parameters, the templates' bf16) for JSON."""
    s = state_bytes(options, param_bytes)
    # words only where they read as names (every other string of a model's JSON is an expression):
    # grads null is the parameters' own dtype; the state in words is in the conventions
    return {"grads": options.grads, "optimizer": options.optimizer,
            "master": options.master_copy, "hbm_usable": json_value(options.headroom),
            "bytes_per_param": {"param_bytes": json_value(sympy.Rational(param_bytes)), "grads": json_value(s.grads),
                                "master": json_value(s.master), "moments": json_value(s.moments),
                                "optimizer": json_value(s.optimizer_state)},
            "factored_second_moment": s.optimizer.factored}
