"""What a model analysis offers, declared once: its quantities (name, unit, meaning; the
report, the JSON and `symroof check` take them from here) and its options."""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..errors import SpecError

MODES = ("train", "prefill", "decode")
OPTIMIZER_BYTES = {"adam": 12, "adafactor": 4, "sgd": 0}  # bytes per parameter beyond its gradient
REMAT = ("full", "none")


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
    ModelQuantity("grad_bytes", "bytes", "bytes of the gradients (the parameters' dtype)", train_only=True),
    ModelQuantity("optimizer_bytes", "bytes", "bytes of the optimizer state", train_only=True),
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
    headroom: sympy.Rational = sympy.Rational(9, 10)
    strategy: tuple[tuple[str, str], ...] = ()  # each kind of parallelism and its axes: (("dp", "X"),)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SpecError(f"mode is one of {', '.join(MODES)}, not {self.mode!r}")
        if self.optimizer not in OPTIMIZER_BYTES:
            raise SpecError(f"optimizer is one of {', '.join(OPTIMIZER_BYTES)}, not {self.optimizer!r}")
        if self.remat not in REMAT and not (self.remat.startswith("save=") and self.saved):
            raise SpecError(f"remat is one of {', '.join(REMAT)} or save=NAME,NAME (the named tensors "
                            f"kept: save=x,o,h), not {self.remat!r}")
        if isinstance(self.chips, bool) or not isinstance(self.chips, int) or not 1 <= self.chips <= 10**7:
            raise SpecError(f"chips must be a whole number from 1 to 1e7, not {self.chips!r}")
        if self.mfu is not None and (isinstance(self.mfu, bool) or not isinstance(self.mfu, (int, float))
                                     or not 1e-6 <= self.mfu <= 1):
            raise SpecError(f"MFU is a fraction of the peak, from 1e-6 to 1, not {self.mfu}")

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
