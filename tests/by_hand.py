"""Hand derivations the model tests share: what a LLaMA-style training step costs with what
its backward pass recomputes, built from the forward and from single statements analysed on
their own (`symroof.analyze`), never from a model's own accounting of what it recomputes."""

from __future__ import annotations

import sympy

import symroof
from symroof.hardware.machines import machine
from symroof.models.catalogue import get_model

# the statements outside a LLaMA block: the embedding's gather, the final norm, the LM head
OUTSIDE = ("gather bf16[V, D], int32[B, T] -> bf16[B, T, D]",
           "rmsnorm_D bf16[B, T, D], bf16[D] -> bf16[B, T, D]",
           "bf16[B, T, D] *_D bf16[D, V] -> bf16[B, T, V]")
# flash attention's backward computes the scores and their softmax again from q and k
SCORES = "bf16[B, T, K, G, H] *_H bf16[B, S, K, H] -> fp32[B, K, G, T, S]"
SOFTMAX = "softmax_S fp32[B, K, G, T, S] -> bf16[B, K, G, T, S]"


def _values(name: str, B: int, T: int) -> dict[str, int]:
    s = get_model(name)["sizes"]
    return {"B": B, "T": T, "S": T, "D": s["D"], "V": s["V"], "K": s["K"], "G": s["N"] // s["K"], "H": s["H"]}


def _alone(spec: str, chip: str, values: dict[str, int]):
    dims = {d.strip() for part in spec.split("[")[1:] for d in part.split("]")[0].split(",")}
    return symroof.analyze(spec, chip=chip, values={k: v for k, v in values.items() if k in dims})


def flash(name: str, chip: str, B: int, T: int) -> tuple[sympy.Expr, sympy.Expr]:
    """One layer's scores and softmax, computed again by flash attention's backward: their
    T_math, and their HBM time: q and k read (bf16), the scores and probabilities kept on chip."""
    v = _values(name, B, T)
    t_math = _alone(SCORES, chip, v).t_math + _alone(SOFTMAX, chip, v).t_math
    read = 2 * v["B"] * v["T"] * v["K"] * v["G"] * v["H"] + 2 * v["B"] * v["S"] * v["K"] * v["H"]
    return t_math, read / machine(chip).bandwidth()


def step(name: str, chip: str, B: int, T: int, remat: str) -> tuple[sympy.Expr, sympy.Expr]:
    """A training step's T_math and T_comms (one chip, no strategy): the forward 3x (the
    backward twice the forward), flash attention's scores again each layer, and under remat
    full each layer's whole forward once more (the forward less what lies outside the blocks)."""
    forward = symroof.model(name, "prefill", chip=chip, sizes={"B": B, "T": T}).analysis
    L = get_model(name)["sizes"]["L"]
    again = flash(name, chip, B, T)
    t_math, t_comms = 3 * forward.t_math + L * again[0], 3 * forward.t_comms + L * again[1]
    if remat == "full":
        outside = [_alone(spec, chip, _values(name, B, T)) for spec in OUTSIDE]
        t_math += forward.t_math - sum(a.t_math for a in outside)
        t_comms += forward.t_comms - sum(a.t_comms for a in outside)
    else:
        assert remat == "none", remat
    return t_math, t_comms


def step_t_math(name: str, chip: str, T: int, remat: str) -> sympy.Expr:
    """A training step's T_math for one sequence of T tokens (see `step`)."""
    return step(name, chip, 1, T, remat)[0]
