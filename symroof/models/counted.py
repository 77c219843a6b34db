"""A model given only by its parameter count N (and whichever sizes are known), as the
back-of-envelope questions give one: "a 70e9-parameter model, 15e12 tokens, 8960 TPU v5p
chips at 40% MFU: how many days?", "weights plus Adam state of 7e10 parameters: how many
16 GB chips?".

What follows from N alone, each answer stating its convention:
* forward FLOPs 2·N a token, training 6·N a token (forward 2·N, backward 4·N: the 6·N rule,
  attention's T-dependent FLOPs left out); where L, D and T are given, the attention scores'
  matmuls (QKᵀ and AV over the full T x T scores, the templates' convention) are
  4·L·D·T a token forward, 12·L·D·T in training, shown beside 6·N with their share;
* weights at the weights' dtype, gradients, master copy and optimizer moments at the
  options' bytes per parameter (`decls.state_bytes`, the table full models use); the
  activations are not counted (they need the block's shapes), and memory says so;
* the fewest chips whose usable HBM (`--hbm-usable`) holds that memory, and on N chips an
  even split of it (as FSDP / ZeRO-3 splits every byte);
* at a given MFU (required: a parameter count has no roofline) tokens per second
  chips·peak·MFU / (6·N), a step's time on B·T tokens, and a token budget's days,
  chip-hours and cost.

Whatever needs the configuration (activations, a KV cache, a roofline step time, a
strategy, a plan) refuses, naming the sizes it needs.
"""

from __future__ import annotations

import functools
from typing import Any

import sympy

from ..dtypes import lookup
from ..errors import SpecError
from ..hardware.chips import Chip
from ..hardware.machines import Machine, machine
from ..render.json_report import json_value
from ..render.tex import TexPrinter, tex_number, tex_words
from ..show import beside, human, number, seconds, wrapped
from .catalogue import FIELDS, get_model
from .decls import (
    OPTIMIZERS,
    Options,
    StateBytes,
    budget,
    budget_json,
    budget_rows,
    state_bytes,
    state_json,
    state_text,
    usable_hbm,
    usable_text,
)
from .quant import DEFAULTS

# the sizes a parameter-count model may carry (models.json's names), and the flags that give them
SIZE_FLAGS = {"L": "--layers", "D": "--dim", "F": "--ffn", "N": "--heads", "V": "--vocab", "context": "--context"}
NEEDS_CONFIG = "the model's configuration (D, L, N, K, H, F, V: a models.json entry with sizes, or a program file)"


class Counted:
    """A model known by its parameter count (see the module docstring). Args:
        params: N.
        machine: the chip (None for counts and bytes only).
        options: mode (training only), chips, optimizer, grads, master, MFU, usable HBM.
        sizes: what is known of L, D, F, N (heads), V, context; and B, T for a step's tokens.
        weights: the parameters' dtype (bf16).
        about: what the report calls it (name, source).
    """

    def __init__(self, params: int, machine: Machine | None = None, options: Options | None = None,
                 sizes: dict[str, int] | None = None, weights: str = "bf16", about: dict[str, Any] | None = None):
        self.options = options or Options()
        if self.options.mode != "train":
            raise SpecError(f"a model given by its parameter count has no KV cache or attention shapes: --"
                            f"{self.options.mode} needs {NEEDS_CONFIG}; its forward FLOPs (2·N a token) are in "
                            "the --train report")
        if self.options.strategy:
            raise SpecError(f"--strategy shards a model's tensors: it needs {NEEDS_CONFIG}")
        if self.options.remat != "full":
            raise SpecError(f"--remat chooses the activations kept: they need {NEEDS_CONFIG}")
        if isinstance(params, bool) or not isinstance(params, int) or not 0 < params <= 10**18:
            raise SpecError(f"--params is a whole number of parameters up to 1e18, not {params!r}")
        dtype = lookup(DEFAULTS.get(weights, weights))  # int4 is int4_g128, scales counted (models/quant.py)
        if dtype is None:
            raise SpecError(f"--weights takes a dtype (bf16, fp32, int8, fp8), not {weights!r}")
        self.N = sympy.Integer(params)
        self.machine = machine
        self.sizes = dict(sizes or {})
        for name, value in self.sizes.items():
            if name not in (*FIELDS, "B", "T"):
                raise SpecError(f"a parameter-count model takes the sizes {', '.join((*FIELDS, 'B', 'T'))}, "
                                f"not {name!r}")
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 10**12:
                raise SpecError(f"size {name} is a whole number from 1 to 1e12, not {value!r}")
        self.weights = dtype
        self.about = dict(about or {})

    # ---- counts ------------------------------------------------------------------------

    @property
    def params(self) -> sympy.Expr:
        return self.N

    @property
    def flops_per_token(self) -> sympy.Expr:
        """Forward FLOPs a token: 2·N (a multiply-add per parameter)."""
        return 2 * self.N

    @property
    def flops_train_per_token(self) -> sympy.Expr:
        """Training FLOPs a token by the 6·N rule: forward 2·N, backward 4·N."""
        return 6 * self.N

    @property
    def _context(self) -> int | None:
        return self.sizes.get("T", self.sizes.get("context"))

    @property
    def _attention_width(self) -> int | None:
        """N·H where the heads and their width are known, else D (equal in most models)."""
        if "N" in self.sizes and "H" in self.sizes:
            return self.sizes["N"] * self.sizes["H"]
        return self.sizes.get("D")

    @property
    def attention_flops_train_per_token(self) -> sympy.Expr:
        """The attention scores' training FLOPs a token the 6·N rule leaves out: QKᵀ and AV,
        each 2·D·T a token and layer forward over the full T x T scores (D the attention's
        width, N·H), 3x in training: 12·L·D·T. Needs L, D (or N and H) and T (or the context)."""
        missing = ["--layers"] if "L" not in self.sizes else []
        if self._attention_width is None:
            missing.append("--dim")
        if self._context is None:
            missing.append("--context (or --set T=...)")
        if missing:
            raise SpecError(f"attention's FLOPs need the layers, the width and the sequence: give {', '.join(missing)}")
        return 12 * sympy.Integer(self.sizes["L"]) * self._attention_width * self._context

    @property
    def attention_share(self) -> sympy.Expr:
        """Attention's share of a training step's FLOPs: 12·L·D·T / (6·N + 12·L·D·T)."""
        attention = self.attention_flops_train_per_token
        return attention / (self.flops_train_per_token + attention)

    # ---- memory --------------------------------------------------------------------------

    @functools.cached_property
    def _state(self) -> StateBytes:
        return state_bytes(self.options, self.weights.bytes)

    @property
    def weight_bytes(self) -> sympy.Expr:
        return self.N * self.weights.bytes

    @property
    def grad_bytes(self) -> sympy.Expr:
        return self.N * self._state.grads

    @property
    def optimizer_bytes(self) -> sympy.Expr:
        """The master copy and the dense moments; Adafactor's factored moment (per matrix) is
        left out: a parameter count has no shapes."""
        return self.N * self._state.optimizer_state

    @property
    def memory_bytes(self) -> sympy.Expr:
        """Weights, gradients and optimizer state: the activations are not counted."""
        return self.weight_bytes + self.grad_bytes + self.optimizer_bytes

    @property
    def hbm_per_chip(self) -> sympy.Expr:
        return self.memory_bytes / self.options.chips

    @property
    def activation_bytes(self) -> sympy.Expr:
        raise SpecError(f"the activations a step keeps need {NEEDS_CONFIG}, and B and T: a parameter count has no "
                        "shapes")

    @property
    def kv_bytes_per_token(self) -> sympy.Expr:
        raise SpecError(f"a KV cache's bytes need {NEEDS_CONFIG}: a parameter count has no KV heads")

    def usable(self) -> sympy.Expr:
        """The HBM a chip may fill: its capacity times the usable fraction (`--hbm-usable`)."""
        return usable_hbm(self._chip(), self.options)

    @property
    def hbm_left_per_chip(self) -> sympy.Expr:
        return self.usable() - self.hbm_per_chip

    @property
    def min_chips(self) -> sympy.Expr:
        need = self.memory_bytes / self.usable()
        return sympy.ceiling(need) if need.is_number else need

    # ---- time, at an MFU -------------------------------------------------------------------

    def _chip(self) -> Machine:
        if self.machine is None:
            raise SpecError("memory per chip, the chips a model needs and its time need a chip (--chip)")
        return self.machine

    @property
    def peak(self) -> sympy.Expr:
        """The chip's matrix peak in the weights' dtype: what the MFU is a fraction of."""
        return self._chip().peak(self.weights.rate)

    @property
    def tokens_per_s(self) -> sympy.Expr:
        """chips x peak x MFU / (6·N): the 6·N rule's training FLOPs at the MFU."""
        if self.options.mfu is None:
            raise SpecError("a parameter count has no roofline to time: give --mfu (the fraction of the peak the "
                            "step reaches, 0.4) for tokens/s, a step's time and days")
        return self.options.chips * self.peak * self.options.mfu_exact / self.flops_train_per_token

    @property
    def tokens(self) -> sympy.Expr:
        if "B" not in self.sizes or self._context is None:
            raise SpecError("a step's time needs its tokens: give --set B=...,T=... (or --context and --set B=...)")
        return sympy.Integer(self.sizes["B"]) * self._context

    @property
    def t_step(self) -> sympy.Expr:
        return self.tokens / self.tokens_per_s

    def budget(self, total_tokens: int | float, price: float | None = None) -> dict[str, sympy.Expr]:
        """A token budget's days, hours, chip-hours and (with a price per chip-hour) cost."""
        return budget(self.tokens_per_s, self.options.chips, total_tokens, price)

    # ---- its report ------------------------------------------------------------------------

    def quantities(self) -> dict[str, tuple[sympy.Expr, str, str]]:
        """Each quantity this count gives, by name: its value, unit and the convention it uses."""
        s, found = self._state, {}
        found["params"] = (self.N, "", "as given")
        found["flops_per_token"] = (self.flops_per_token, "FLOPs", "forward: 2·N (a multiply-add per parameter)")
        found["flops_train_per_token"] = (self.flops_train_per_token, "FLOPs",
                                          "6·N: forward 2·N + backward 4·N; attention's T-dependent FLOPs left out")
        try:
            found["attention_flops_train_per_token"] = (
                self.attention_flops_train_per_token, "FLOPs",
                "12·L·D·T: QKᵀ and AV over the full T x T scores, 3x forward; D the attention's width ("
                + ("N·H" if "N" in self.sizes and "H" in self.sizes else "d_model, taken as N·H") + ")")
            found["attention_share"] = (self.attention_share, "", "12·L·D·T / (6·N + 12·L·D·T)")
        except SpecError:
            pass
        width = number(self.weights.bytes)
        found["weight_bytes"] = (self.weight_bytes, "bytes", f"N x {width} bytes ({self.weights.name})")
        grads = self.options.grads or f"the parameters' {self.weights.name}"
        found["grad_bytes"] = (self.grad_bytes, "bytes", f"N x {number(s.grads)} bytes ({grads})")
        factored = " (its factored moment, O(rows + cols) a matrix, left out: a count has no shapes)" \
            if OPTIMIZERS[self.options.optimizer].factored else ""
        found["optimizer_bytes"] = (self.optimizer_bytes, "bytes",
                                    f"N x {number(s.optimizer_state)} bytes: master copy {number(s.master)} + "
                                    f"{self.options.optimizer} moments {number(s.moments)}{factored}")
        found["memory_bytes"] = (self.memory_bytes, "bytes", "weights + gradients + optimizer state; activations "
                                 "not counted (they need B, T and the block's shapes)")
        if self.options.chips > 1:
            found["hbm_per_chip"] = (self.hbm_per_chip, "bytes", f"memory_bytes / {self.options.chips} chips (an "
                                     "even split, as FSDP / ZeRO-3)")
        if self.machine is not None and self.machine.capacity() is not None:
            usable = usable_text(self.options)
            found["hbm_left_per_chip"] = (self.hbm_left_per_chip, "bytes", f"{usable} of HBM less hbm_per_chip")
            found["min_chips"] = (self.min_chips, "", f"ceil(memory_bytes / ({usable} x HBM capacity "
                                                      f"{human(self.machine.capacity(), 'B')}))")
        if self.machine is not None and self.options.mfu is not None:
            rule = f"{self.options.chips} chips x peak {human(self.peak, 'FLOPs/s')} x MFU {self.options.mfu:g} / 6·N"
            found["tokens_per_s"] = (self.tokens_per_s, "tokens/s", rule)
            if "B" in self.sizes and self._context is not None:
                found["t_step"] = (self.t_step, "s", f"{self.tokens} tokens / tokens_per_s")
        return found

    def _missing(self) -> list[tuple[str, str]]:
        """What the report cannot give, and why: said in it, not left out silently."""
        out = []
        if self.machine is None:
            out.append(("min_chips", "needs a chip (--chip)"))
        elif self.options.mfu is None:
            out.append(("t_step", "a parameter count has no roofline: give --mfu for tokens/s, a step's time, days"))
        out.append(("activation_bytes", f"need {NEEDS_CONFIG}, B and T"))
        return out

    def title(self) -> str:
        on = f" on {self.options.chips} x {self.machine.name}" if self.machine is not None else ""
        known = ", ".join(f"{k} = {v}" for k, v in self.sizes.items())
        return f"{self.about.get('name', 'a model')} (a parameter count), train{on}; {known or 'no sizes'}"

    def conventions(self) -> list[str]:
        return ["1 FLOP = one multiply or one add (a multiply-add is 2); GB = 1e9 bytes",
                "a model given by its parameter count N: training FLOPs by the 6·N rule (forward 2·N, backward "
                "4·N a token; attention's quadratic term left out), time only at a given MFU (no roofline)",
                "training state: " + state_text(self.options, self.weights.bytes),
                f"a chip's usable HBM is {usable_text(self.options)} of its capacity; on N chips memory splits "
                "evenly"]

    def rows(self, total_tokens: int | float | None = None, price: float | None = None) -> list[tuple[str, str]]:
        out = []
        for name, (value, unit, note) in self.quantities().items():
            shown = seconds(value) if unit == "s" else beside(value, unit) if value.is_Integer or unit else \
                number(value, 4)
            out.append((name, f"{shown} [{note}]"))
        if total_tokens is not None:
            out += budget_rows(self.budget(total_tokens, price), total_tokens, price, "tokens_per_s")
        out += [(name, f"not computed: {why}") for name, why in self._missing()]
        return out

    def table(self, total_tokens: int | float | None = None, price: float | None = None) -> str:
        lines = [f"{'model':<22} {self.title()}"]
        lines += [f"{name:<22} {text}" for name, text in self.rows(total_tokens, price)]
        return "\n".join([*lines, "", *wrapped("conventions: " + "; ".join(self.conventions()))])

    def __str__(self) -> str:
        return self.table()

    def to_dict(self, total_tokens: int | float | None = None, price: float | None = None) -> dict[str, Any]:
        """A JSON-ready dict: what `symroof model --params N ... --json` prints."""
        out: dict[str, Any] = {**self.about, "mode": "train", "counted": True, "sizes": dict(self.sizes),
                               "chip": self.machine.name if self.machine is not None else None,
                               "chips": self.options.chips}
        notes = {}
        for name, (value, _, note) in self.quantities().items():
            out[name] = json_value(value)
            notes[name] = note
        if total_tokens is not None:
            spent = self.budget(total_tokens, price)
            out["days_to_train"] = json_value(spent["days"])
            out["budget"] = {"tokens": total_tokens, **budget_json(spent, price)}
        out["not_computed"] = dict(self._missing())
        out["training_state"] = state_json(self.options, self.weights.bytes)
        out["notes"] = notes
        out["conventions"] = self.conventions()
        return out

    def _repr_latex_(self) -> str:
        lines = [r"\text{quantity} & \text{value} & \text{convention}"]
        for name, (value, unit, note) in self.quantities().items():
            # a symbolic chip's figures (C, M_hbm) print as formulas in their names
            shown = tex_number(value) if value.is_number else \
                TexPrinter({x: _tex_figure(x.name) for x in value.free_symbols}, words=False).doprint(value)
            lines.append(rf"\text{{{tex_words(name)}}} & {shown}"
                         + (rf"\ \text{{{tex_words(unit)}}}" if unit else "") + rf" & \text{{{tex_words(note)}}}")
        body = lines[0] + " \\\\ \\hline\n" + " \\\\\n".join(lines[1:])
        return f"$$\n\\begin{{array}}{{lll}}\n{body}\n\\end{{array}}\n$$"


def _tex_figure(name: str) -> str:
    """A chip figure's symbol in LaTeX: M_hbm as M with an upright subscript, M_{\\text{hbm}}."""
    base, _, sub = name.partition("_")
    return base + (rf"_{{\text{{{sub}}}}}" if sub else "")


def counted(params: int | float | str, chip: str | Chip | Machine | None = None, *, chips: int = 1,
            mfu: float | None = None, optimizer: str = "adam", grads: str | None = None, master: str | None = None,
            hbm_usable: float = 0.9, sizes: dict[str, int] | None = None, weights: str = "bf16",
            name: str | None = None) -> Counted:
    """A model given by its parameter count (`params`, 70e9 taken as 70000000000 when whole;
    or a models.json entry's name whose entry gives `params`) and what sizes are known
    (`sizes`: L, D, F, N, V, context; B and T for a step), on `chips` chips of `chip` at
    an `mfu`, training with the state the options name (`symroof.model`'s).

    Examples:
        >>> import symroof
        >>> m = symroof.counted(70e9, "v5p", chips=8960, mfu=0.4)
        >>> round(float(m.budget(15e12)["days"]), 2)
        44.32
    """
    options = Options(chips=chips, mfu=mfu, optimizer=optimizer, grads=grads, master=master, headroom=hbm_usable)
    target = chip if chip is None or isinstance(chip, Machine) else machine(chip)
    if isinstance(params, str):
        config = get_model(params)
        if not is_counted(config):
            raise SpecError(f"{config['id']} has its configuration: symroof.model({config['id']!r}) analyses it whole")
        return from_entry(config, target, options, sizes, weights)
    if isinstance(params, float):
        if not params.is_integer():
            raise SpecError(f"--params is a whole number of parameters, not {params!r}")
        params = int(params)
    return Counted(params, target, options, sizes, weights,
                   {"model": None, "name": name or f"{number(params)} parameters"})


def is_counted(config: dict) -> bool:
    """Whether a models.json entry gives its model by parameter count only (`params`)."""
    return "params" in config


def from_entry(config: dict, machine: Machine | None, options: Options, sizes: dict[str, int] | None = None,
               weights: str = "bf16") -> Counted:
    """The parameter-count model of a models.json entry given by `params`: its known sizes,
    and those given (`sizes`) over them."""
    known = dict(config.get("sizes", {}))
    return Counted(config["params"], machine, options, {**known, **(sizes or {})}, weights,
                   {"model": config["id"], "name": config["name"]})
