"""Command-line fuzzing for symroof: random and mutated specs, flags, meshes, chips and
claims files over every subcommand, and the property every invocation must satisfy.

Shared by `tests/cli/test_fuzz_cli.py` (a small, deterministic run under hypothesis) and
`benchmarks/fuzz_cli.py` (a large run with multiprocessing). Everything here draws from
a `random.Random`-like object `r` (`choice`, `randint`, `random`), so hypothesis drives it
through `st.randoms()` (and shrinks what it finds) and the benchmark through a seeded
`random.Random` per case (so every case is reproducible from its seed).

The property, per call of `symroof.cli.command.main(argv, out=StringIO, err=StringIO)`:

* exit 0: the output is valid (strict JSON for --json, with every expression readable by
  `sympy.parse_expr` in the listed symbols; text non-empty; LaTeX non-empty with balanced
  braces; a plot file written and non-empty), and stderr holds only `symroof: warning:` lines;
* exit 1 only from `check` (a failing claim);
* exit 2: stderr is one `symroof: error:` line, optionally followed by the spec line and a
  caret line; or argparse's usage error (SystemExit 2), one line too, pointing at --help;
* never exit 3, never an exception out of `main`, never a hang.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from katex_renderer import KaTeX

ROOT = Path(__file__).resolve().parent.parent

# ----------------------------------------------------------------------------- vocabulary

CHIPS = ["tpu-v2", "tpu-v3", "tpu-v4p", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu7x", "a100-sxm-80gb",
         "h100-sxm", "h100-pcie", "h200", "b200", "gb200", "mi300x"]
CHIP_NAMES = ["TPU v5e", "v5e", "V5E", "h100", "B200", "tpu v5 lite", "v5litepod", "trillium",
              "ironwood", "tpu v7", "a100", "A100 SXM4 80GB", "H100 SXM", "h100 sxm5", "h200 141gb",
              "hgx b200", "gb200 nvl72", "instinct mi300x", "MI300X", "v4", "tpu v4", "v5p", "v6e",
              "TPU7x", "  v5e  ", "Tpu-V5E", "nvidia h100", "amd mi300x", "google tpu v5e"]
CHIP_JUNK = ["", " ", "v5ee", "h1OO", "tpu-v5", "tpu-v9", "gpu", "cpu", "h100-", "-", "tpu v5e\n",
             "v5e;rm", "ｖ５ｅ", "h100\x00", "a" * 300, "TPU  v5e", "tpu_v5e", "None", "null", "*", ".."]
VARIANTS = ["book-tpus-table", "book-sb0-tpus", "book-sb2-tpus", "vendor", "jax-tpuinfo",
            "book-tpus-q1", "gk-tpuv4", "book-prose", "book-roofline-intro", "book-tpus-footnote",
            "book-gpus-table", "book-v1-problem5", "book-gpus-q2", "vendor-hgx", "gk-b200"]
VARIANT_JUNK = ["", "book", "Book-Tpus-Table", "book-tpus-table ", "nope", "vendor,book-prose", "\u200b"]

NUMBERS = ["1e14", "1.97e14", "2e11", "8.2e11", "4.5e10", "9e11", "1", "1e-3", "3.35e12", "1e20",
           "197000000000000", "2.5E+14", " 5e11 ", "1e308"]
NUMBER_JUNK = ["0", "-1", "-0", "0.0", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "1e-400",
               "abc", "", " ", "1_000", "0x10", "1e", "e5", "1,5", "1.5.5", "١٢٣", "１２３", "10**12",
               "1/2", "1e14e1", "+", "--1", "True", "5e-324", "1e-320", "18446744073709551617",
               "9" * 400, "1M", "128k"]

DTYPES = ["bf16", "fp32", "f32", "float32", "tf32", "bfloat16", "fp16", "f16", "float16", "fp8",
          "fp8_e4m3", "fp8_e5m2", "e4m3", "e5m2", "int32", "int16", "int8", "uint8", "int4", "fp4",
          "e2m1", "fp64"]
DTYPE_NEAR = ["bf17", "bf", "fp8_e4m4", "int3", "uint8x", "BF16", "Bf16", "float8", "fp4_e2m1",
              "fp8e4m3", "bfloat", "f8", "int", "fp", "int64", "uint4", "fp128", "tf16", "e4m3fn",
              "fp8_e4", "int 8", "bf_16", "fp32_", "ｂｆ16", "int8_e4m3"]

NAMES = ["B", "D", "F", "N", "K", "H", "V", "seq", "dModel", "Hd", "T2", "x", "Δ", "ℌ", "E", "I",
         "S", "Q", "O", "beta", "L", "M", "G", "P", "Bé", "ǅ"]
NAME_JUNK = ["Integer", "Max", "oo", "lambda", "if", "None", "True", "zoo", "nan", "pi", "Symbol",
             "d_model", "sum", "print", "x" * 200, "a1", "Ⅻ", "ﬁ", "ͅ"]

AXES = ["X", "Y", "Z", "W"]
AXIS_SIZES = [1, 2, 2, 4, 4, 8, 16, 3, 32, 256]
LINKS = ["", "", "", "@dcn", "@pcie", "@ici", "@foo", "@", "@DCN"]

OPS = ["@", "*", "*", "·", "•", "×", "⋅", "∙", "\\cdot", "\\times", "\\bullet", "\\ast"]
ARROWS = ["->", "->", "->", "→", "⟶", "\\rightarrow", "\\longrightarrow", "\\to"]
TEXT_OPEN = ["\\text{", "\\mathrm{", "\\texttt{", "\\mathtt{"]

SET_VALUES = ["1", "2", "16", "128", "4096", "8192", "65536", "999999999999999999", "1e6", "2**20",
              "128k", "1M", "1G", "4K", "32_768", "2^10", "4*1024", "1.5e3", "1Ki", "2T", "0", "-1", "-4096", "1.5", "abc", "", "1e400", "10**100",
              "2^10", "0x100", "1_024", "99999999999999999999", "1e18", "1e17", "+5", " 64 ", "٤", "１６",
              "nan", "inf", "3.0", "1e-3", "1k5", "k", "M", "2**", "**2", "(2)", "2**64", "1e+6"]

OVERRIDE_FIELDS = ["peak_flops_per_s.bf16", "peak_flops_per_s.int8", "peak_flops_per_s.fp8",
                   "peak_flops_per_s.int32", "peak_flops_per_s.fp32", "hbm_bandwidth_bytes_per_s",
                   "hbm_capacity_bytes", "interconnect.link_bandwidth_one_way_bytes_per_s",
                   "interconnect.link_bandwidth_bidi_bytes_per_s", "interconnect.links_per_chip",
                   "interconnect.wraparound_min_axis_size", "interconnect.hop_latency_s",
                   "interconnect.domain_size", "interconnect.topology", "interconnect.name",
                   "pcie_bandwidth_one_way_bytes_per_s", "dcn.bandwidth_one_way_bytes_per_s_per_chip",
                   "dcn.chips_per_host", "clock_hz", "onchip.vmem_capacity_bytes",
                   "interconnect.chip_bandwidth_one_way_bytes_per_s", "vector_flops_per_s.fp32",
                   "vector_flops_per_s.bf16", "vector_flops_per_s.fp64", "vector_flops_per_s.int8"]
OVERRIDE_JUNK_FIELDS = ["", "peak_flops_per_s", "peak_flops_per_s.bf17", "nope", "interconnect",
                        "interconnect..name", ".bf16", "id", "name", "variants", "aliases", "sources",
                        "peak_flops_per_s.bf16.x", "PEAK_FLOPS_PER_S.BF16", "notes", "vector_flops_per_s",
                        "vector_flops_per_s.bf17", "vector_flops", "vector_flops_per_s.fp32.x"]
OVERRIDE_VALUES = NUMBERS + NUMBER_JUNK + ["null", "None", "torus_3d", "switch", "ring", "16", "4", "0",
                                           "2.5", "true", "[1]", "{}", "ICI"]

JUNK_CHARS = list("[]{}(),;:_=@*-><→#$\\^0123456789 \n\t\r'\"`|&!?~%.") + [
    "\x00", "\u200b", "\ufeff", "\u202e", "é", "ß", "Ω", "𝔅", "🙂", "\u0301", "［", "］", "，", "；",
    "\udcff", "\x7f", "\x0b", "\u2028", "\u00a0", "ℌ", "ﬀ", "Å", "ǆ", "µ", "·", "•", "×", "⋅", "→"]

TOKENS = ["bf16", "int8", "fp8", "[", "]", ",", "B", "D", "F", "N", "@", "*", "*_D", "*_{D,F}", "->", "→",
          ";", "\n", "mesh", "X=2", "Y=4@dcn", "_X", "_{XY}", "{U_X}", "{compute=fp8}", "=4096", "4096",
          "AllGather_X", "ReduceScatter_{X,K}", "AllReduce_Y", "AllToAll_{X,J}", "\\text{", "}", "{",
          "x:", "y:", "•", "\\cdot", "\\rightarrow", "$", "#", "bd,df->bf", "1", "0", ":", "_", "=",
          "+", "-", "/", "−", "(", ")", "gelu(", "max(", "exp", "softmax_T", "softmax", "sum_D", "max_D",
          "mean_{D,F}", "rmsnorm_D", "layernorm_D", "gather", "transpose(", "fused {", "fused", "logsoftmax_T",
          "gelu_erf", "int32[B, T]", "bf16[D]"]


# How much junk goes into a case: 0 for a clean case (every part valid as far as the
# generator knows), 1 for a noisy one. Set per case by gen_case.
_NOISE = [1.0]


def junk(r, p: float) -> bool:
    """True with probability p in a noisy case, never in a clean one."""
    return r.random() < p * _NOISE[0]


_VARIANTS_OF: dict = {}


def variants_of(name: str) -> list:
    """The variants a chip has (none for an unknown name)."""
    if name not in _VARIANTS_OF:
        try:
            from symroof.hardware.chips import get_chip
            _VARIANTS_OF[name] = sorted(get_chip(name).variants)
        except Exception:  # noqa: BLE001
            _VARIANTS_OF[name] = []
    return _VARIANTS_OF[name]


# ----------------------------------------------------------------------------- a case

FIFO = object()  # a file of a case that is a named pipe (a reader that opens it waits for a writer)


@dataclass
class Case:
    """One invocation: argv (with `{tmp}` standing for a fresh temporary folder), stdin bytes
    for a spec of `-`, and files to write into the folder first."""

    argv: list
    stdin: bytes | None = None
    files: dict = field(default_factory=dict)
    kind: str = ""
    # Runs after argv exits 0, in the same folder, its stdout first written to
    # {tmp}/printed.sr (`symroof model NAME --print`, then the printed program passed back).
    followups: tuple = ()

    def concrete(self, tmp: str, argv=None) -> list:
        return [a.replace("{tmp}", tmp) if isinstance(a, str) else a for a in (argv or self.argv)]

    def reproducer(self) -> str:
        lines = [f"argv = {self.argv!r}"]
        for k, then in enumerate(self.followups):
            lines.append(f"then ({'{tmp}/printed.sr holding the output above' if k == 0 else 'and'}): "
                         f"argv = {list(then)!r}")
        if self.stdin is not None:
            lines.append(f"stdin = {self.stdin!r}")
        every = list(self.argv) + [a for then in self.followups for a in then]
        for name, data in self.files.items():
            if not any(isinstance(a, str) and f"{{tmp}}/{name}" in a for a in every):
                continue
            if data is FIFO:
                lines.append(f"file {{tmp}}/{name} = a named pipe (mkfifo)")
                continue
            shown = data if len(data) < 3000 else data[:3000] + b"...(truncated)"
            lines.append(f"file {{tmp}}/{name} = {shown!r}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- specs

class _Spec:
    """A generated spec with what flags may refer to: its dims and mesh axes."""

    def __init__(self):
        self.dims: list[str] = []
        self.axes: dict[str, int | None] = {}  # None: an axis left without a size
        self.mesh_in_spec = False
        self.vector = False          # work for the vector unit (elementwise, reductions, ...)

    def dim(self, name):
        if name not in self.dims and not name.isdigit():
            self.dims.append(name)
        return name


def _pick_names(r, k):
    pool = list(NAMES)
    if junk(r, 0.04):
        pool += NAME_JUNK
    names = []
    while len(names) < k:
        n = r.choice(pool)
        # names are NFKC-folded (ℌ is H): in a clean case, two that fold alike are one dim
        if n not in names and (_NOISE[0] or _fold(n) not in map(_fold, names)):
            names.append(n)
    return names


def _fold(name):
    import unicodedata
    return unicodedata.normalize("NFKC", name)


CLEAN_DTYPES = ["bf16", "bf16", "bfloat16", "int8", "int8", "fp8", "int4"]


def _dtype(r, default="bf16"):
    x = r.random()
    if x < 0.45:
        return default
    if _NOISE[0] == 0:
        return r.choice(CLEAN_DTYPES)
    if x < 0.95:
        return r.choice(DTYPES)
    return r.choice(DTYPE_NEAR)


def _tensor(r, dtype, dims, style=0):
    inner = ", ".join(dims)
    if r.random() < 0.03 and (inner or _NOISE[0]):
        inner += ","                  # a trailing comma is allowed
    if style == 1:                    # \text{int8[B, D]}
        return f"{r.choice(TEXT_OPEN)}{dtype}[{inner}]}}"
    if style == 2:                    # \text{int8}[B, D]
        return f"{r.choice(TEXT_OPEN)}{dtype}}}[{inner}]"
    return f"{dtype}[{inner}]"


def _with_value(r, s: _Spec, name, values: dict):
    """`D` or `D=4096` (the first time the dim appears, now and then)."""
    if name.isdigit() or name in values:
        return name
    if r.random() < 0.12:
        values[name] = r.choice(["4096", "2", "1", "128", "1024", "8"] + (["0", "99999999999999999999"]
                                                                     if junk(r, 0.3) else []))
        return f"{name}={values[name]}"
    return name


def _literal(r, name):
    return r.choice(["4096", "1024", "2", "1", "8", "3"]) if r.random() < 0.1 else name


def _matmul(r, s: _Spec):
    B, D, F = _pick_names(r, 3)
    B, D, F = (_literal(r, B), _literal(r, D), _literal(r, F))
    for n in (B, D, F):
        s.dim(n)
    values = {}
    dt = [_dtype(r) for _ in range(3)]
    op = r.choice(OPS + ["*_" + D, "*_{" + D + "}", "\\cdot_" + D]) if not D.isdigit() else r.choice(OPS)
    style = 0 if r.random() < 0.9 else r.choice([1, 2])
    batch = [r.choice(["H", "G", "P"])] if r.random() < 0.1 else []
    for n in batch:
        s.dim(n)
    left = _tensor(r, dt[0], batch + [_with_value(r, s, B, values), _with_value(r, s, D, values)], style)
    right = _tensor(r, dt[1], batch + [_with_value(r, s, D, values), _with_value(r, s, F, values)], style)
    out = _tensor(r, dt[2], batch + [B, F], style)
    if r.random() < 0.08:
        left, right = f"x: {left}", f"w: {right}"
    text = f"{left} {op} {right} {r.choice(ARROWS)} {out}"
    if r.random() < 0.08:
        text += f" {{compute={_dtype(r, 'fp8')}}}"
    return text


def _chain(r, s: _Spec):
    k = r.randint(2, 4)
    names = _pick_names(r, k + 1)
    for n in names:
        s.dim(n)
    dt = _dtype(r)
    values = {}
    parts = [_tensor(r, _dtype(r, dt), [_with_value(r, s, names[0], values), _with_value(r, s, names[1], values)])]
    for i in range(1, k):
        op = r.choice([f"*_{names[i]}", f"*_{{{names[i]}}}", "@", "*"])
        parts.append(op)
        parts.append(_tensor(r, _dtype(r, dt), [names[i], _with_value(r, s, names[i + 1], values)]))
    return " ".join(parts) + f" {r.choice(ARROWS)} " + _tensor(r, dt, [names[0], names[k]])


def _dot(r, s: _Spec):
    (N,) = _pick_names(r, 1)
    s.dim(N)
    dt = _dtype(r)
    out = r.choice(["[1]", "[]"])
    form = r.randint(0, 3)
    if form == 0:
        return f"{dt}[{N}] *_{N} {dt}[{N}] -> {_dtype(r, dt)}{out}"
    if form == 1:
        return f"x: {dt}[{N}] * y: {dt}[{N}] -> {dt}{out}"
    if form == 2:
        return f"x {r.choice(['•', '·', '*', '@'])} y: {dt}[{N}], {dt}[{N}] {r.choice(ARROWS)} {dt}{out}"
    return f"${_tensor(r, dt, [N], 1)} \\cdot {_tensor(r, dt, [N], 2)} \\rightarrow {dt}{out}$"


def _elementwise(r, s: _Spec):
    names = _pick_names(r, r.randint(1, 3))
    for n in names:
        s.dim(n)
    if r.random() < 0.3:   # a cast: no FLOPs
        return f"{_dtype(r, 'fp8')}[{', '.join(names)}] -> {_dtype(r)}[{', '.join(names)}]"
    s.vector = True        # a product of like shapes runs on the vector unit
    dt = _dtype(r)
    return f"{dt}[{', '.join(names)}] * {dt}[{', '.join(names)}] -> {dt}[{', '.join(names)}]"


def _batched(r, s: _Spec):
    B, D, F = _pick_names(r, 3)
    for n in (B, D, F):
        s.dim(n)
    dt = _dtype(r, "int8")
    return f"{dt}[{B}, {D}] *_{D} {dt}[{B}, {D}, {F}] -> {dt}[{B}, {F}]"


def _latex(r, s: _Spec):
    B, D, F = _pick_names(r, 3)
    for n in (B, D, F):
        s.dim(n)
    op = r.choice(["\\cdot", "\\times", "\\cdot_" + D, "\\ast", "\\bullet"])
    text = f"X[{B}, {D}] {op} Y[{D}, {F}] {r.choice(ARROWS)} Z[{B}, {F}]"
    return f"${text}$" if r.random() < 0.3 else text


def _einsum(r, s: _Spec):
    letters = "bdfhijkmnp"
    n = r.randint(1, 3)
    ops = []
    for _ in range(n):
        ops.append("".join(r.choice(letters) for _ in range(r.randint(1, 3))))
    every = sorted(set("".join(ops)))
    out = "".join(c for c in every if r.random() < 0.5)
    for c in every:
        s.dim(c)
    s.vector = True        # often an elementwise product or a reduction
    return ",".join(ops) + "->" + out


def _mesh_decl(r, s: _Spec):
    k = r.randint(1, 3)
    axes = []
    for name in AXES:
        if len(axes) < k and r.random() < 0.8:
            axes.append(name)
    axes = axes or ["X"]
    if _NOISE[0] == 0:
        axes = axes[:2]
    for a in axes:
        s.axes[a] = r.choice(AXIS_SIZES if junk(r, 0.3) else AXIS_SIZES[:6] if _NOISE[0] else [2, 2, 4])
        if r.random() < 0.15:  # an axis left without a size: a symbol
            s.axes[a] = None
    links = LINKS if junk(r, 0.5) else LINKS[:5]

    def axis(a):
        link = r.choice(links) if r.random() < 0.3 else ""
        if s.axes[a] is None:
            return a + (r.choice(["@ring", "@line", "@dcn", ""]) if r.random() < 0.4 else "")
        return f"{a}={s.axes[a]}{link}"
    return ", ".join(axis(a) for a in axes)


def _sub(r, axes):
    """A subscript over some of the axes: _X, _{XY}, _{X,Y}, _XY."""
    pick = [a for a in axes if r.random() < 0.5] or [r.choice(axes)]
    if junk(r, 0.05):
        pick.append(r.choice(AXES + ["Q"]))       # an axis the mesh may lack
    if len(pick) == 1:
        return "_" + pick[0] if r.random() < 0.7 else "_{" + pick[0] + "}"
    return r.choice(["_{" + "".join(pick) + "}", "_{" + ",".join(pick) + "}", "_" + "".join(pick)])


_BOOK_CASES = [
    "{t}[{B}, {D}_{a}] @ {t}[{D}_{a}, {F}] -> {t}[{B}, {F}]",
    "{t}[{B}, {D}_{a}] @ {t}[{D}_{a}, {F}] -> {t}[{B}, {F}] {{U_{a}}}",
    "{t}[{B}_{a}, {D}] @ {t}[{D}, {F}] -> {t}[{B}_{a}, {F}]",
    "{t}[{B}, {D}_{a}] @ {t}[{D}, {F}] -> {t}[{B}, {F}]",
    "{t}[{B}_{a}, {D}_{b}] *_{D} {t}[{D}_{b}, {F}] -> {t}[{B}_{a}, {F}]",
    "{t}[{B}, {D}_{a}] @ {t}[{D}_{a}, {F}] -> {t}[{B}, {F}_{a}]",
    "{t}[{B}, {D}] @ {t}[{D}, {F}] -> {t}[{B}_{a}, {F}]",
    "{t}[{B}, {D}_{{{a}{b}}}] @ {t}[{D}_{{{a}{b}}}, {F}] -> {t}[{B}, {F}]",
    "{t}[{B}_{a}, {D}] @ {t}[{D}, {F}_{b}] -> {t}[{B}_{a}, {F}_{b}]",
]


def _sharded(r, s: _Spec):
    axes = list(s.axes) or ["X"]
    if _NOISE[0] == 0:
        B, D, F = _pick_names(r, 3)
        for n in (B, D, F):
            s.dim(n)
        a = r.choice(axes)
        others = [x for x in axes if x != a]
        form = r.choice(_BOOK_CASES if others else [c for c in _BOOK_CASES if "{b}" not in c])
        return form.format(t=_dtype(r), B=B, D=D, F=F, a=a, b=others[0] if others else a)
    B, D, F = _pick_names(r, 3)
    for n in (B, D, F):
        s.dim(n)
    sub = {n: (_sub(r, axes) if r.random() < 0.4 else "") for n in (B, D, F)}
    dsub_right = sub[D] if r.random() < 0.8 else (_sub(r, axes) if r.random() < 0.5 else "")
    out_b = sub[B] if r.random() < 0.8 else (_sub(r, axes) if r.random() < 0.5 else "")
    out_f = sub[F] if r.random() < 0.7 else ""
    dt = _dtype(r)
    op = r.choice(["@", "*", f"*_{D}"])
    ann = ""
    if r.random() < 0.25:
        ann = " {U_" + r.choice(axes) + "}"
    if r.random() < 0.05:
        ann = " {U_" + r.choice(axes) + ", compute=" + _dtype(r, "fp8") + "}"
    lit = f"={r.choice(['4096', '8', '6', '1'])}" if r.random() < 0.1 else ""
    return (f"{dt}[{B}{sub[B]}, {D}{sub[D]}{lit}] {op} {dt}[{D}{dsub_right}, {F}{sub[F]}] -> "
            f"{dt}[{B}{out_b}, {F}{out_f}]{ann}")


def _collective(r, s: _Spec):
    axes = list(s.axes) or ["X"]
    a = r.choice(axes)
    I, J = _pick_names(r, 2)
    s.dim(I)
    s.dim(J)
    dt = _dtype(r)
    kind = r.randint(0, 4 if _NOISE[0] else 3)
    if kind == 0:
        return f"AllGather_{a} {dt}[{I}_{a}, {J}] -> {dt}[{I}, {J}]"
    if kind == 1:
        return f"ReduceScatter_{{{a},{J}}} {dt}[{I}, {J}] {{U_{a}}} -> {dt}[{I}, {J}_{a}]"
    if kind == 2:
        other = r.choice([x for x in axes if x != a] or [a]) if _NOISE[0] == 0 else r.choice(axes)
        if other == a and _NOISE[0] == 0:
            return f"AllReduce_{a} {dt}[{I}, {J}] {{U_{a}}} -> {dt}[{I}, {J}]"
        return f"AllReduce_{a} {dt}[{I}_{other}, {J}] {{U_{a}}} -> {dt}[{I}_{other}, {J}]"
    if kind == 3:
        return f"AllToAll_{{{a},{J}}} {dt}[{I}_{a}, {J}] -> {dt}[{I}, {J}_{a}]"
    # a collective whose layouts do not match its kind, or an unknown kind
    return r.choice([f"AllGather_{a} {dt}[{I}, {J}] -> {dt}[{I}_{a}, {J}]",
                     f"Broadcast_{a} {dt}[{I}_{a}, {J}] -> {dt}[{I}, {J}]",
                     f"AllReduce_{a} {dt}[{I}, {J}] -> {dt}[{I}, {J}]",
                     f"AllGather_{{{a},{a}}} {dt}[{I}_{a}, {J}] -> {dt}[{I}, {J}]"])


# ----------------------------------------------------------------------------- ops beyond contractions

UNARY = ["exp", "log", "tanh", "rsqrt", "sqrt", "square", "relu", "abs", "neg", "recip", "sigmoid", "silu",
         "gelu", "gelu", "silu", "exp"]
BINARY_FNS = ["max", "min", "maximum", "minimum", "add", "sub", "mul", "div"]
INFIX_EW = ["+", "+", "+", "-", "/", "−", "÷"]
REDUCTIONS = ["sum", "sum", "max", "min", "mean"]
NORMS = ["rmsnorm", "rmsnorm", "layernorm"]
GATHERS = ["gather", "gather", "take", "embed"]
COPIES = ["copy", "cast", "transpose", "transpose"]
# Documented words with an underscore in them (docs/conventions.md's table): the grammar's NAME has no
# '_', so they lex as a word and a subscript, which the resolver joins again.
UNDERSCORED = ["gelu_erf"]
OP_NEAR = ["gleu", "Gelu", "GELU", "gelu2", "relu6", "Relu", "swish", "tanhh", "expp", "lg", "sqr", "rsqrtt",
           "sigmod", "silu_", "softmx", "Softmax", "softmax2", "logsoftmax", "soft", "rmsnrm", "rms", "norm",
           "layer", "layernorm2", "LayerNorm", "summ", "Sum", "maxx", "mean2", "avg", "prod", "argmax",
           "gatherr", "embedding", "lookup", "transpos", "transposed", "permute", "copyy", "Cast", "add2",
           "plus", "minus", "mx", "maximun", "AllGathr", "Broadcast", "fuse", "Fused", "fusedd", "kernel",
           "mesh", "ℊelu", "ｇｅｌｕ", "ﬁlter", "Integer", "lambda", "oo", "sum\u0301"]
VECTOR_CHIPS = ["tpu-v5p", "v5p", "h100", "h100-sxm", "h100-pcie", "h200", "b200", "gb200", "mi300x",
                "a100-sxm-80gb", "H100 SXM", "TPU v5p"]
VECTOR_FLOPS = ["1.4e13", "1e13", "6.7e13", "2e12", "1e14", "3.35e13", "14000000000000", " 5e12 ", "1",
                "1e-3", "1e20"]
VECTOR_DTYPES = ["bf16", "bf16", "bf16", "fp32", "fp32", "f32", "bfloat16", "fp8", "int8"]


def _vdtype(r, default="bf16"):
    if r.random() < 0.5:
        return default
    if _NOISE[0] == 0 or r.random() < 0.8:
        return r.choice(VECTOR_DTYPES)
    return r.choice(DTYPES + DTYPE_NEAR[:6])


def _layout(r, dims, axes, p=0.45) -> dict:
    """Subscripts for some of the dims, each mesh axis splitting at most one of them."""
    if not axes:
        return {}
    free = list(axes)
    r.shuffle(free)
    out = {}
    for d in dims:
        if not free or d.isdigit() or r.random() >= p:
            continue
        take = [free.pop()]
        if free and r.random() < 0.15:
            take.append(free.pop())
        out[d] = ("_" + take[0] if r.random() < 0.8 else "_{" + take[0] + "}") if len(take) == 1 else \
            r.choice(["_{" + "".join(take) + "}", "_{" + ",".join(take) + "}"])
    if junk(r, 0.08) and dims:                  # an axis the mesh lacks, or one axis twice
        out[r.choice(dims)] = "_" + r.choice(AXES + ["Q"])
    return out


def _t(r, dt, dims, L, *, style=0, name=None):
    text = _tensor(r, dt, [d + L.get(d, "") for d in dims], style)
    return f"{name}: {text}" if name else text


def _over_sub(r, over):
    if len(over) == 1 and r.random() < 0.75:
        return "_" + over[0]
    return "_{" + ",".join(over) + "}"


def _over_op(r, word, over, inputs: str, out: str, call: float) -> str:
    """`word_D x -> y`, or with probability `call` the call form `word_D(x) -> y`."""
    if r.random() < call:
        return f"{word}{_over_sub(r, over)}({inputs}) {r.choice(ARROWS)} {out}"
    return f"{word}{_over_sub(r, over)} {inputs} {r.choice(ARROWS)} {out}"


def _vector_dims(r, s: _Spec, k):
    names = _pick_names(r, k)
    if _NOISE[0] and r.random() < 0.05:
        names[r.randint(0, k - 1)] = r.choice(["4096", "2", "128"])
    for n in names:
        s.dim(n)
    return names


def _v_unary(r, s: _Spec, L_axes):
    dims = _vector_dims(r, s, r.randint(1, 3))
    L = _layout(r, dims, L_axes)
    Lo = L if r.random() < 0.85 else _layout(r, dims, L_axes)
    dt = _vdtype(r)
    fn = r.choice(UNARY) if r.random() < 0.97 else r.choice(UNDERSCORED[:1])
    names = ("x", "y") if r.random() < 0.08 else (None, None)
    return f"{fn}({_t(r, dt, dims, L, name=names[0])}) {r.choice(ARROWS)} {_t(r, _vdtype(r, dt), dims, Lo, name=names[1])}"


def _v_binary(r, s: _Spec, L_axes):
    dims = _vector_dims(r, s, r.randint(1, 3))
    L = _layout(r, dims, L_axes)
    other = list(dims)
    x = r.random()
    if x < 0.25 and len(dims) > 1:                       # broadcast: a suffix of the dims
        other = dims[r.randint(1, len(dims) - 1):]
    elif x < 0.35 and len(dims) > 1:                     # any subset, in order
        other = [d for d in dims if r.random() < 0.6] or dims[-1:]
    elif x < 0.4:                                        # the same dims, in another order (by name)
        other = list(dims)
        r.shuffle(other)
    L2 = L if r.random() < 0.8 else {}                   # a replicated side slices its part for free
    Lo = L if r.random() < 0.85 else _layout(r, dims, L_axes)
    dt = _vdtype(r)
    a, b = _t(r, dt, dims, L), _t(r, _vdtype(r, dt), other, L2)
    if r.random() < 0.5:
        a, b = b, a
    out = _t(r, _vdtype(r, dt), dims, Lo)
    if r.random() < 0.5:
        if r.random() < 0.06:
            a, b, out = f"x: {a}", f"y: {b}", f"z: {out}"
        return f"{a} {r.choice(INFIX_EW)} {b} {r.choice(ARROWS)} {out}"
    return f"{r.choice(BINARY_FNS)}({a}, {b}) {r.choice(ARROWS)} {out}"


def _v_reduce(r, s: _Spec, L_axes):
    dims = _vector_dims(r, s, r.randint(1, 3))
    over = [d for d in dims if r.random() < 0.4 and not d.isdigit()] or [next((d for d in dims if not d.isdigit()),
                                                                            dims[-1])]
    L = _layout(r, dims, L_axes)
    kept = [d for d in dims if d not in over]
    Lo = {d: L[d] for d in kept if d in L} if r.random() < 0.85 else _layout(r, kept, L_axes)
    dt = _vdtype(r)
    word = r.choice(REDUCTIONS)
    x = _t(r, dt, dims, L)
    ann = ""
    split = sorted({a for d in over for a in AXES if d in L and a in L[d]} -
                   {a for d in Lo for a in AXES if a in Lo[d]})
    if split and r.random() < 0.3:
        ann = " {U_" + split[0] + "}"
    out = _t(r, _vdtype(r, r.choice([dt, "fp32"])), kept, Lo) + ann
    return _over_op(r, word, over, x, out, 0.4)


def _v_softmax(r, s: _Spec, L_axes):
    dims = _vector_dims(r, s, r.randint(1, 4))
    named = [d for d in dims if not d.isdigit()] or dims
    over = [named[-1]] if r.random() < 0.85 else [d for d in named if r.random() < 0.5] or named[-1:]
    L = _layout(r, dims, L_axes)
    dt = _vdtype(r)
    word = "softmax" if r.random() < 0.97 else "logsoftmax"
    x, y = _t(r, dt, dims, L), _t(r, _vdtype(r, dt), dims, L if r.random() < 0.9 else _layout(r, dims, L_axes))
    return _over_op(r, word, over, x, y, 0.3)


def _v_norm(r, s: _Spec, L_axes):
    dims = _vector_dims(r, s, r.randint(1, 3))
    named = [d for d in dims if not d.isdigit()] or dims
    over = [named[-1]] if r.random() < 0.85 else [d for d in named if r.random() < 0.5] or named[-1:]
    L = _layout(r, dims, L_axes)
    word = r.choice(NORMS)
    dt = _vdtype(r)
    params = []
    for _ in range(r.randint(0, 2 if word == "layernorm" else 1)):
        pdims = list(over) if r.random() < 0.8 else [d for d in dims if r.random() < 0.6] or list(over)
        params.append(_t(r, _vdtype(r, dt), pdims, L if r.random() < 0.7 else {}))
    ins = ", ".join([_t(r, dt, dims, L)] + params)
    out = _t(r, dt, dims, L)
    return _over_op(r, word, over, ins, out, 0.3)


def _v_gather(r, s: _Spec, L_axes):
    names = _vector_dims(r, s, r.randint(3, 4))
    V, row, idx = names[0], names[1:2] if len(names) == 3 else names[1:3], names[-1:]
    if r.random() < 0.3:
        idx = [idx[0], r.choice([n for n in ("T", "S", "Q") if n not in names])]
        s.dim(idx[1])
    if r.random() < 0.1:
        row = []
    # one layout over table, indices and result alike: an axis splits one dim of the lot
    L = _layout(r, [V] + row + idx, L_axes)
    word = r.choice(GATHERS)
    dt = _vdtype(r)
    table = _t(r, dt, [V] + row, L)
    ids = _t(r, r.choice(["int32", "int32", "int16", "uint8"]) if r.random() < 0.95 else _vdtype(r), idx, L)
    out = _t(r, dt, idx + row, L)
    if r.random() < 0.3:
        return f"{word}({table}, {ids}) {r.choice(ARROWS)} {out}"
    return f"{word} {table}, {ids} {r.choice(ARROWS)} {out}"


def _v_copy(r, s: _Spec, L_axes):
    dims = _vector_dims(r, s, r.randint(1, 3))
    word = r.choice(COPIES)
    out_dims = list(dims)
    if word == "transpose" and len(dims) > 1:
        while out_dims == dims:
            r.shuffle(out_dims)
    L = _layout(r, dims, L_axes)
    Lo = L if r.random() < 0.8 else _layout(r, out_dims, L_axes)
    dt_in = _vdtype(r, r.choice(["fp32", "bf16"]))
    x, y = _t(r, dt_in, dims, L), _t(r, _vdtype(r), out_dims, Lo)
    if word != "transpose" and r.random() < 0.4:
        return f"{word} {x} {r.choice(ARROWS)} {y}"
    return f"{word}({x}) {r.choice(ARROWS)} {y}"


_VECTOR_OPS = [_v_unary] * 3 + [_v_binary] * 3 + [_v_reduce] * 2 + [_v_softmax] * 2 + [_v_norm] * 2 + \
    [_v_gather, _v_copy]


def _vector_bad(r, s: _Spec, axes=()):
    """A statement of the new forms that must be refused (or, now and then, that a near
    miss still reads): wrong arity, words close to real ones, a missing or stray subscript,
    mixed operators, shapes that do not fit, layouts that do not match."""
    B, D, F = _vector_dims(r, s, 3)
    dt = _vdtype(r)
    a = axes[0] if axes else "X"
    b = axes[1] if len(axes) > 1 else "Y"
    t2 = f"{dt}[{B}, {D}]"
    forms = [
        f"{r.choice(UNARY)}({t2}, {t2}) -> {t2}",                           # wrong arity
        f"{r.choice(UNARY)}() -> {t2}",
        f"{r.choice(BINARY_FNS)}({t2}) -> {t2}",
        f"{r.choice(BINARY_FNS)}({t2}, {t2}, {t2}) -> {t2}",
        f"{t2} + {t2} + {t2} -> {t2}",
        f"{t2} {r.choice(INFIX_EW)} {t2} * {t2} -> {t2}",                  # mixed operators
        f"{t2} + {t2} @ {dt}[{D}, {F}] -> {dt}[{B}, {F}]",
        f"{t2} +_{D} {t2} -> {t2}",                                       # a subscript on '+'
        f"rmsnorm_{D} {t2}, {dt}[{D}], {dt}[{D}] -> {t2}",
        f"layernorm_{D} {t2}, {dt}[{D}], {dt}[{D}], {dt}[{D}] -> {t2}",
        f"rmsnorm_{D} {t2}, {dt}[{F}] -> {t2}",                           # a scale with a stray dim
        f"{r.choice(GATHERS)} {t2} -> {t2}",
        f"{r.choice(GATHERS)} {t2}, int32[{B}], int32[{B}] -> {t2}",
        f"gather {dt}[{B}, {D}], int32[{B}] -> {dt}[{B}, {D}]",              # indices with the row dim
        f"gather {dt}[{B}, {D}], int32[{F}] -> {dt}[{D}, {F}]",              # the result's dims out of order
        f"gather {dt}[], int32[{F}] -> {dt}[{F}]",
        f"transpose({t2}, {t2}) -> {t2}",
        f"transpose({t2}) -> {dt}[{B}, {F}]",
        f"{r.choice(REDUCTIONS)}_{D}({t2}, {t2}) -> {dt}[{B}]",
        f"{r.choice(['softmax', 'sum', 'mean', 'rmsnorm', 'layernorm'])} {t2} -> {t2}",   # missing subscript
        f"{r.choice(['softmax', 'sum', 'mean'])}({t2}) -> {t2}",
        f"{r.choice(UNARY + COPIES + GATHERS)}_{D}({t2}) -> {t2}",        # a stray subscript
        f"{r.choice(REDUCTIONS + ['softmax'])}_{F} {t2} -> {dt}[{B}]",     # over a dim it lacks
        f"{r.choice(REDUCTIONS + ['softmax'])}_4096 {t2} -> {dt}[{B}]",
        f"{r.choice(REDUCTIONS + ['softmax'])}_{{{D},{D}}} {t2} -> {dt}[{B}]",
        f"{r.choice(REDUCTIONS)}_{D} {t2} -> {t2}",                         # keeps the summed dim
        f"softmax_{D} {t2} -> {dt}[{B}]",
        f"{r.choice(UNARY)}({t2}) -> {dt}[{B}, {F}]",
        f"{r.choice(UNARY)}({t2}) -> {dt}[{D}, {B}]",
        f"{r.choice(OP_NEAR)}({t2}) -> {t2}",                               # words close to real ones
        f"{r.choice(OP_NEAR)}_{D} {t2} -> {dt}[{B}]",
        f"{r.choice(OP_NEAR)} {t2}, {t2} -> {t2}",
        f"{r.choice(UNDERSCORED)}({t2}) -> {t2}",
        f"{r.choice(UNDERSCORED)}_{D} {t2} -> {t2}",
        f"{r.choice(UNARY)}[{B}]({t2}) -> {t2}",
        f"{r.choice(UNARY)} {t2} -> {t2}",                                  # a call word used as a prefix
        f"{r.choice(UNARY)}({t2} -> {t2}",
        f"{r.choice(UNARY)}(({t2})) -> {t2}",
        f"{r.choice(UNARY)}({r.choice(UNARY)}({t2})) -> {t2}",            # nested calls
        f"max_{D} {t2} {{U_{a}}} -> {dt}[{B}]",
        f"{t2} + {dt}[{B}_{a}, {D}_{a}] -> {t2}",                         # one axis, two dims
        f"{dt}[{B}_{a}, {D}] + {dt}[{B}_{b}, {D}] -> {dt}[{B}, {D}]",       # two different splits
        f"{dt}[{B}_{a}, {D}] + {dt}[{B}, {D}_{a}] -> {dt}[{B}_{a}, {D}]",
        f"max({dt}[{B}_{{{a}{b}}}, {D}], {dt}[{B}_{a}, {D}]) -> {dt}[{B}, {D}]",
        f"gelu({dt}[{B}_{a}, {D}]) -> {dt}[{B}, {D}_{b}]",
        f"softmax_{D} {dt}[{B}_{a}, {D}_{a}] -> {dt}[{B}, {D}]",
        f"gather {dt}[{B}_{a}, {D}], int32[{F}_{a}] -> {dt}[{F}_{a}, {D}]",
        f"rmsnorm_{D} {dt}[{B}, {D}_{a}], {dt}[{D}_{b}] -> {dt}[{B}, {D}_{a}]",
    ]
    return r.choice(forms)


def _fused_body(r, s: _Spec, axes) -> list:
    """Statements one kernel runs: each reads what the one before it wrote."""
    B, D = _vector_dims(r, s, 2)
    L = _layout(r, [B, D], axes) if axes else {}
    dims, dt = [B, D], r.choice(["bf16", "bf16", "fp32"])
    body = []
    if r.random() < 0.5:                       # a contraction first
        (F,) = [n for n in _pick_names(r, 3) if _fold(n) not in map(_fold, dims)][:1] or ["F"]
        s.dim(F)
        LF = {B: L[B]} if B in L else {}
        acc = r.choice(["fp32", "bf16"])
        body.append(f"{_t(r, 'bf16', [B, D], L)} {r.choice(['@', '*', '*_' + D])} "
                    f"{_t(r, 'bf16', [D, F], {D: L[D]} if D in L else {})} -> {_t(r, acc, [B, F], LF)}")
        dims, dt, L = [B, F], acc, LF
    for _ in range(r.randint(1, 3)):
        x = _t(r, dt, dims, L)
        k = r.randint(0, 6)
        out_dt = dt if r.random() < 0.7 else r.choice(["bf16", "fp32"])
        if k == 0:
            body.append(f"{r.choice(UNARY)}({x}) -> {_t(r, out_dt, dims, L)}")
        elif k == 1:
            body.append(f"softmax_{dims[-1]} {x} -> {_t(r, out_dt, dims, L)}")
        elif k == 2:
            p = _t(r, "bf16", dims[-1:], {dims[-1]: L[dims[-1]]} if dims[-1] in L else {})
            body.append(f"{r.choice(NORMS)}_{dims[-1]} {x}, {p} -> {_t(r, out_dt, dims, L)}")
        elif k == 3:
            other = _t(r, dt, dims[-1:] if r.random() < 0.5 else dims, L)
            body.append(f"{x} {r.choice(INFIX_EW)} {other} -> {_t(r, out_dt, dims, L)}")
        elif k == 4:
            body.append(f"{x} -> {_t(r, out_dt, dims, L)}")            # a cast
        elif k == 5 and len(dims) > 1:
            kept = dims[:-1]
            Lk = {d: L[d] for d in kept if d in L}
            body.append(f"{r.choice(REDUCTIONS)}_{dims[-1]} {x} -> {_t(r, out_dt, kept, Lk)}")
            dims, L = kept, Lk
        else:
            body.append(f"max({x}, {_t(r, dt, dims, L)}) -> {_t(r, out_dt, dims, L)}")
        dt = out_dt
    return body


def _fused(r, s: _Spec, axes=()):
    s.vector = True
    body = _fused_body(r, s, list(axes))
    if junk(r, 0.35):                           # what a block must refuse, or a near miss
        k = r.randint(0, 9)
        if k == 0:
            body.insert(r.randint(0, len(body)), "fused { " + "; ".join(_fused_body(r, s, [])) + " }")
        elif k == 1:
            body.insert(r.randint(0, len(body)), "mesh " + (_mesh_decl(r, s) if not axes else "X=2"))
        elif k == 2 and axes:
            body.insert(r.randint(0, len(body)), _collective(r, s))
        elif k == 3:
            return r.choice(["fused { }", "fused {}", "fused {\n}", "fused", "fused {", "fused { ;; }"])
        elif k == 4:
            return f"{r.choice(OP_NEAR + ['fused', 'fused'])} {{ " + "; ".join(body)   # no closing brace
        elif k == 5:
            return f"{r.choice(['fuse', 'Fused', 'fusedd', 'kernel', 'fusion', 'mesh', 'gelu', 'softmax_D'])} {{ " \
                + "; ".join(body) + " }"
        elif k == 6:
            return "fused { " + "; ".join(body) + " } {U_X}"
        elif k == 7:
            return "fused [ " + "; ".join(body) + " ]"
        elif k == 8:
            body.append(r.choice(_VECTOR_OPS)(r, s, list(axes)))    # a step that reads nothing before it
        else:
            return "fused { fused { " + "; ".join(body) + " } }"
    elif r.random() < 0.2:
        body.append(r.choice(_VECTOR_OPS)(r, s, list(axes)))
    form = r.randint(0, 3)
    if form == 0:
        return "fused { " + "; ".join(body) + " }"
    if form == 1:
        return "fused {\n" + "\n".join("  " + b for b in body) + "\n}"
    if form == 2:
        return "fused {" + ";".join(body) + "}"
    return "fused {\n\n  " + ";\n  ".join(body) + ";\n}"


def _vector(r, s: _Spec, axes=()):
    """One statement of the ops beyond contractions (on the mesh's axes where given)."""
    s.vector = True
    if junk(r, 0.25):
        return _vector_bad(r, s, list(axes))
    return r.choice(_VECTOR_OPS)(r, s, list(axes))


def _sharded_vector(r, s: _Spec):
    axes = list(s.axes) or ["X"]
    return _fused(r, s, axes) if r.random() < 0.2 else _vector(r, s, axes)


_PLAIN = [_matmul] * 6 + [_chain] * 2 + [_dot] * 2 + [_elementwise, _batched, _latex, _einsum] + \
    [_vector] * 5 + [_fused] * 2


def gen_spec(r) -> tuple[str, _Spec, str | None]:
    """A structured spec: (text, what it names, a --mesh value or None)."""
    s = _Spec()
    mesh_flag = None
    statements = []
    if r.random() < 0.3:
        decl = _mesh_decl(r, s)
        if r.random() < 0.6:
            statements.append("mesh " + decl)
            s.mesh_in_spec = True
            if r.random() < 0.05:
                mesh_flag = decl               # both: the spec's and the flag's
        else:
            mesh_flag = decl.replace(" ", "")
        for _ in range(r.randint(1, 3)):
            x = r.random()
            statements.append(_collective(r, s) if x < 0.2 else _sharded(r, s) if x < 0.55 else
                              _sharded_vector(r, s) if x < 0.85 else r.choice(_PLAIN)(r, s))
    else:
        for _ in range(1 if r.random() < 0.8 else r.randint(2, 3)):
            statements.append(r.choice(_PLAIN)(r, s))
    sep = r.choice(["\n", "\n", "; ", ";", "\r\n", "\r", "\n\n"])
    text = sep.join(statements)
    x = r.random()
    if x < 0.05:
        text = "# a comment\n" + text + "  # trailing comment"
    elif x < 0.08:
        text = "\ufeff" + text
    elif x < 0.10:
        text = text.replace("[", "［").replace("]", "］")
    elif x < 0.12:
        text = "$" + text + "$"
    elif x < 0.13:
        text = "\n;\n" + text + ";\n"
    return text, s, mesh_flag


# ----------------------------------------------------------------------------- mutations

def _tokens(text):
    return re.findall(r"\\[a-zA-Z]+\{?|\w+|\s+|.", text)


def mutate(r, text: str) -> str:
    """One or more random edits of a spec's text."""
    for _ in range(r.randint(1, 3)):
        op = r.randint(0, 15)
        n = len(text)
        if op == 0 and n:                           # delete a character
            i = r.randint(0, n - 1)
            text = text[:i] + text[i + 1:]
        elif op == 1:                               # insert a character
            i = r.randint(0, n)
            text = text[:i] + r.choice(JUNK_CHARS) + text[i:]
        elif op == 2 and n:                         # duplicate a span
            i = r.randint(0, n - 1)
            j = r.randint(i, min(n, i + 12))
            text = text[:j] + text[i:j] + text[j:]
        elif op == 3 and n:                         # delete a span
            i = r.randint(0, n - 1)
            j = r.randint(i, min(n, i + 8))
            text = text[:i] + text[j:]
        elif op == 4:                               # swap two tokens
            toks = _tokens(text)
            if len(toks) > 1:
                i, j = r.randint(0, len(toks) - 1), r.randint(0, len(toks) - 1)
                toks[i], toks[j] = toks[j], toks[i]
                text = "".join(toks)
        elif op == 5:                               # a dtype near-miss
            for dt in sorted(DTYPES, key=len, reverse=True):
                if dt in text:
                    text = text.replace(dt, r.choice(DTYPE_NEAR + DTYPES), 1)
                    break
        elif op == 6:                               # insert a token
            toks = _tokens(text)
            toks.insert(r.randint(0, len(toks)), r.choice(TOKENS))
            text = "".join(toks)
        elif op == 7:                               # delete a token
            toks = _tokens(text)
            if toks:
                del toks[r.randint(0, len(toks) - 1)]
                text = "".join(toks)
        elif op == 8:                               # deep nesting
            depth = r.choice([5, 50, 200, 1000, 3000])
            opener, closer = r.choice([("\\text{", "}"), ("[", "]"), ("{", "}"), ("_{", "}"),
                                       ("(", ")"), ("\\mathrm{", "}"), ("$", "$")])
            if r.random() < 0.5:
                text = opener * depth + text + closer * depth
            else:
                i = r.randint(0, n)
                text = text[:i] + opener * depth + "bf16[B]" + closer * r.randint(0, depth) + text[i:]
        elif op == 9:                               # a huge or odd literal
            big = r.choice(["0", "00", "99999999999999999999", "1" + "0" * 40, "0004096", "1" * 4000, "٣"])
            text = re.sub(r"\d+", big, text, count=1) if re.search(r"\d", text) else \
                text.replace("B", big, 1)
        elif op == 10:                              # a junk name
            toks = _tokens(text)
            names = [i for i, t in enumerate(toks) if re.fullmatch(r"[A-Za-z]\w*", t)]
            if names:
                toks[r.choice(names)] = r.choice(NAME_JUNK + NAMES)
                text = "".join(toks)
        elif op == 11:                              # repeat the statement
            text = ";".join([text] * r.choice([2, 3, 10, 40]))
        elif op == 12:                              # many dims in one tensor
            extra = ", ".join(f"Q{i}" for i in range(r.choice([8, 30, 65, 70])))
            text = text.replace("]", ", " + extra + "]", 1)
        elif op == 14:                              # an op's word near-missed, or another op's
            words = [w for w in UNARY + BINARY_FNS + REDUCTIONS + NORMS + GATHERS + COPIES + ["softmax", "fused"]
                     if re.search(r"\b" + w + r"(?=[_({ ])", text)]
            if words:
                w = r.choice(words)
                text = re.sub(r"\b" + w + r"(?=[_({ ])", r.choice(OP_NEAR + UNARY + REDUCTIONS + NORMS + UNDERSCORED),
                              text, count=1)
        elif op == 15:                              # a brace or a parenthesis dropped or doubled
            spots = [i for i, c in enumerate(text) if c in "{}()"]
            if spots:
                i = r.choice(spots)
                text = text[:i] + (text[i] * 2 if r.random() < 0.3 else "") + text[i + 1:]
        else:                                       # unicode junk
            i = r.randint(0, n)
            junk = "".join(r.choice(JUNK_CHARS) for _ in range(r.randint(1, 6)))
            text = text[:i] + junk + text[i:]
    return text


def raw_text(r) -> str:
    """Token soup or character soup."""
    if r.random() < 0.6:
        return "".join(r.choice(TOKENS) + r.choice(["", " "]) for _ in range(r.randint(0, 25)))
    return "".join(r.choice(JUNK_CHARS + list("bfintBDFN")) for _ in range(r.randint(0, 40)))


def gen_spec_text(r) -> tuple[str, _Spec, str | None]:
    """A spec, mutated now and then, or raw text."""
    if junk(r, 0.1):
        s = _Spec()
        s.dims = ["B", "D", "F"]
        return raw_text(r), s, None
    text, s, mesh = gen_spec(r)
    if junk(r, 0.45):
        text = mutate(r, text)
    return text, s, mesh


# ----------------------------------------------------------------------------- flags

def _machine_flags(r, s: _Spec | None, *, chip_p=0.75) -> list:
    argv = []
    x = r.random()
    vector = s is not None and s.vector
    if x < chip_p:
        y = r.random()
        name = r.choice(CHIPS) if y < 0.6 else r.choice(CHIP_NAMES) if y < 0.9 or not junk(r, 1) \
            else r.choice(CHIP_JUNK)
        if vector and r.random() < 0.5:             # a chip with a vector-unit figure
            name = r.choice(VECTOR_CHIPS)
        argv += ["--chip", name]
        if r.random() < 0.15:
            known = variants_of(name)
            if known and not junk(r, 0.3):
                argv += ["--variant", r.choice(known)]
            elif junk(r, 1):
                argv += ["--variant", r.choice(VARIANTS) if r.random() < 0.6 else r.choice(VARIANT_JUNK)]
    elif junk(r, 0.05):
        argv += ["--variant", r.choice(VARIANTS)]            # a variant without a chip
    elif _NOISE[0] == 0 and r.random() < 0.8:
        argv += ["--peak-flops", r.choice(NUMBERS), "--hbm-bw", r.choice(NUMBERS)]
        if vector and r.random() < 0.8:
            argv += ["--vector-flops", r.choice(VECTOR_FLOPS)]
    meshed = s is not None and (s.axes or s.mesh_in_spec)
    for flag, p in (("--peak-flops", 0.12), ("--hbm-bw", 0.12), ("--ici-bw", 0.08)):
        if flag == "--ici-bw" and not meshed and _NOISE[0] == 0:
            continue
        if r.random() < p:
            argv += [flag, r.choice(NUMBER_JUNK) if junk(r, 0.4) else r.choice(NUMBERS)]
    if "--vector-flops" not in argv and r.random() < (0.3 if vector else 0.05):
        argv += ["--vector-flops", r.choice(NUMBER_JUNK) if junk(r, 0.4) else r.choice(VECTOR_FLOPS)]
    if r.random() < 0.1 and ("--chip" in argv or _NOISE[0]):
        for _ in range(r.randint(1, 3)):
            if junk(r, 0.7):
                f = r.choice(OVERRIDE_FIELDS) if r.random() < 0.8 else r.choice(OVERRIDE_JUNK_FIELDS)
                v = r.choice(OVERRIDE_VALUES)
                argv += ["--override", r.choice([f"{f}={v}", f"{f}={v}", f"{f}", f"={v}", f"{f}=={v}"])]
            else:
                f = r.choice(OVERRIDE_FIELDS[:13] + OVERRIDE_FIELDS[15:])
                v = r.choice(["16", "4", "1e-6", "2e-6"]) if "size" in f or "links" in f or "latency" in f \
                    or "hosts" in f else r.choice(NUMBERS)
                argv += ["--override", f"{f}={v}"]
    if junk(r, 0.04):
        argv += ["--hardware", _hardware_path(r)]
    return argv


def _dim_ref(r, s: _Spec):
    if s is not None and s.dims and not junk(r, 0.15):
        return r.choice(s.dims)
    return r.choice(NAMES + NAME_JUNK + ["", " ", "1", "B_X", "X"])


def _spec_flags(r, s: _Spec, mesh_flag) -> list:
    argv = []
    if r.random() < 0.1:
        argv += ["--dtype", r.choice(DTYPE_NEAR + ["", " "]) if junk(r, 0.3) else r.choice(DTYPES)]
    if r.random() < 0.35:
        for _ in range(r.randint(1, 2)):
            parts = []
            for _ in range(r.randint(1, 3)):
                d = _dim_ref(r, s)
                if junk(r, 0.4):
                    v = r.choice(SET_VALUES)
                    parts.append(r.choice([f"{d}={v}"] * 8 + [f"{d}", f"={v}", f"{d}=={v}", f"{d} = {v}"]))
                else:
                    parts.append(f"{d}={r.choice(SET_VALUES[:20])}")
            argv += ["--set", ";".join(parts) if junk(r, 0.2) else ",".join(parts)]
    if r.random() < 0.3:
        k = r.randint(1, 3)
        dims = list(dict.fromkeys(_dim_ref(r, s) for _ in range(k)))
        argv += ["--limit", r.choice([",".join(dims), ", ".join(dims), ",".join(dims) + ",", ",", ""])
                 if junk(r, 0.3) else ",".join(dims)]
    if r.random() < 0.45:
        argv += ["--solve", r.choice(["B,D", "", "B D", "oo"]) if junk(r, 0.05) else _dim_ref(r, s)]
    if r.random() < 0.15:
        dims = list(dict.fromkeys(_dim_ref(r, s) for _ in range(r.randint(1, 3))))
        argv += ["--grow", r.choice([",".join(dims), "", ",", " , ".join(dims), ",".join(dims * 2)])
                 if junk(r, 0.3) else ",".join(dims)]
    if mesh_flag is not None:
        argv += ["--mesh", mesh_flag]
    elif junk(r, 0.06):
        argv += ["--mesh", r.choice(["X=2", "X=16,Y=16", "X=8,Z=4@dcn", "X=2,X=4", "X=0", "X=-1", "X",
                                     "=2", "X=2@foo", "X=1e3", "", "X=2;Y=2", "X=99999999999999999999",
                                     "mesh X=2", "X=2, Y=2", "X=4@pcie", "X=2,", "ℌ=2", "Integer=2"])]
    return argv


def _hardware_path(r) -> str:
    return r.choice(["{tmp}/missing.json", "{tmp}", "{tmp}/hw.json", "{tmp}/hw.json", "/dev/null"])


def _hardware_file(r) -> bytes:
    """The shipped hardware.json with one field broken, or junk."""
    x = r.random()
    if x < 0.15:
        return r.choice([b"", b"[]", b"{}", b'{"chips": []}', b"not json", b"\xff\xfe", b'{"chips": [1]}',
                         b'{"schema_version": 1, "chips": null}', b"NaN"])
    data = json.loads((ROOT / "hardware.json").read_text(encoding="utf-8"))
    chips = data["chips"]
    chip = r.choice(chips)
    paths = []

    def walk(obj, path):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, path + [k])
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, path + [i])
        paths.append(path)
    walk(chip, [])
    path = r.choice([p for p in paths if p])
    parent = chip
    for key in path[:-1]:
        parent = parent[key]
    junk = r.choice([None, -1, 0, "x", [], {}, 1e400, True, "1e14", 10**30, float("nan"), 2.5, ""])
    if r.random() < 0.5 and isinstance(parent.get(path[-1]) if isinstance(parent, dict) else None, (int, float)):
        # a figure that passes validation but sits at an edge
        junk = r.choice([1e-30, 1e40, 1, 2, 3, 1e-12, 1e30, 7, 1023])
    if r.random() < 0.2 and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = junk
    if r.random() < 0.1:
        chips.append(dict(chip))           # a duplicate id
    return json.dumps(data, allow_nan=True).encode()


# ----------------------------------------------------------------------------- claims files

_EXPECT_EXPRS = ["2*B*D*F", "B*F*(2*D - 1)", "2*B*D + 2*B*F + 2*D*F", "B", "1/2", "2*N - 1", "N/(2*N + 1)",
                 "B*D*F/(B*D + B*F + D*F)", "Max(B, D)", "sqrt(B)", "oo", "B > 240", "2*B*D*F/1.97e14",
                 "__import__('os')", "B +", "B ** 1000", "10**(10**10)", "x.y", "lambda: 0", "Q", "1e999",
                 "(" * 200 + "B" + ")" * 200, "B" + "*B" * 300, "nan", "zoo", "1/0", "0**-1", "B**0.5",
                 "Min()", "Max(B)", "2**64**2", "-B", "B >= D", "B < D < F", "B == D"]
_EXPECT_KEYS = ["flops", "flops_exact", "bytes", "bytes_read", "bytes_written", "intensity",
                "intensity_exact", "critical_intensity", "t_math", "t_comms", "t_lower", "t_upper",
                "achieved_flops_per_s", "flops_total", "replication", "t_network", "t_network_latency",
                "network_bytes", "network_intensity", "critical_network_intensity", "bound",
                "intensity_limit", "threshold", "nope", "Flops", "transcendentals", "flops_vector", "t_vector",
                "t_vector", "vector_flops"]


def _junk_value(r):
    return r.choice([None, True, False, 0, -1, 1.5, float("nan"), float("inf"), 10**40, "", "x", [], [1, 2],
                     {}, {"a": 1}, "1e14", "-1e-3", [[[]]], "Max", {"var": None}])


def _expected(r, key, s: _Spec):
    dims = s.dims or ["B"]
    if key == "threshold":
        if r.random() < 0.2:
            return r.choice(["none", None, "never", 240])
        t = {"var": r.choice(dims + ["Z", 1, None])}
        for part in ("op", "rule", "exact", "network", "none", "bogus"):
            if r.random() < 0.4:
                t[part] = (r.choice([">", "<", ">=", None, 1]) if part == "op" else
                           r.choice([240.2439, 272.17, "B", 1, 0, "oo", True, None, "x +"]) if part != "none"
                           else r.choice([True, False, "yes"]))
        return t
    if key == "intensity_limit":
        if r.random() < 0.2:
            return _junk_value(r)
        return {"as": r.choice([dims[:2], ",".join(dims[:2]), dims[0], [], [1, None], "B, , D"]),
                "expr": r.choice(_EXPECT_EXPRS + [1, 0.5, None])}
    if key == "bound":
        return r.choice(["compute", "memory", "balanced", "network", "B > 240", 1, None, "x +"])
    x = r.random()
    if x < 0.6:
        return r.choice(_EXPECT_EXPRS)
    if x < 0.85:
        return r.choice([240.2439, 1.97e14, 0, 1, -1, 2.5e-6, 1e300, 10**30])
    return _junk_value(r)


_CHAPTER: list = []


def _chapter_claim(r) -> dict:
    """A claim of the project's chapter file (they pass), now and then with a value nudged."""
    import copy

    import yaml
    if not _CHAPTER:
        _CHAPTER.extend(yaml.safe_load((ROOT / "tests" / "data" / "rooflines_chapter.yaml").read_text("utf-8")))
    claim = copy.deepcopy(r.choice(_CHAPTER))
    if junk(r, 0.5) and isinstance(claim.get("expect"), dict) and claim["expect"]:
        key = r.choice(sorted(claim["expect"]))
        value = claim["expect"][key]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            claim["expect"][key] = value * r.choice([1.01, 2, -1, 0, 1e30])
        else:
            claim["expect"][key] = _expected(r, key, _Spec())
    return claim


def _claim(r) -> dict:
    if r.random() < 0.4:
        return _chapter_claim(r)
    text, s, mesh = gen_spec(r)
    claim: dict = {}
    if r.random() < 0.9:
        claim["id"] = r.choice(["c1", "matmul-critical-batch", "", 5, None, "ü" * 3])
    if r.random() < 0.85:
        claim["spec"] = text if r.random() < 0.85 else mutate(r, text)
    elif r.random() < 0.6:
        claim["given"] = {"flops": r.choice([1e12, 2, "1e12", 0, -1, None, "x"]),
                          "bytes": r.choice([4e9, 0, "4e9", -5, None, [1]])}
        if r.random() < 0.1:
            claim["given"] = _junk_value(r)
        s.dims = []
    if r.random() < 0.75:
        chip = {}
        if r.random() < 0.85:
            chip["name"] = r.choice(CHIPS + CHIP_NAMES[:6] + CHIP_JUNK[:5])
        for k, p in (("peak_flops", 0.2), ("hbm_bw", 0.2), ("ici_bw", 0.1), ("variant", 0.1), ("dtype", 0.1),
                     ("bogus", 0.03)):
            if r.random() < p:
                chip[k] = (r.choice(VARIANTS + VARIANT_JUNK) if k == "variant" else
                           r.choice(DTYPES + DTYPE_NEAR) if k == "dtype" else
                           r.choice([1.97e14, 8.2e11, 4.5e10, 0, -1, "1e14", None, float("nan"), [1], "abc"]))
        claim["chip"] = chip if r.random() < 0.95 else _junk_value(r)
    if mesh and r.random() < 0.9:
        claim["mesh"] = mesh if r.random() < 0.5 else {a: n for a, n in s.axes.items()}
    elif r.random() < 0.03:
        claim["mesh"] = _junk_value(r)
    if r.random() < 0.3:
        claim["set"] = {d: r.choice([4096, 128, 1, 0, -1, 1.5, "4096", None, 10**20]) for d in s.dims[:2]} \
            if r.random() < 0.85 else _junk_value(r)
    if r.random() < 0.95:
        expect = {}
        for _ in range(r.randint(1, 4)):
            key = r.choice(_EXPECT_KEYS)
            expect[key] = _expected(r, key, s)
        claim["expect"] = expect if r.random() < 0.95 else _junk_value(r)
    if r.random() < 0.2:
        claim["tolerance"] = r.choice([0.001, 0, 1e-9, -1, "x", None, float("nan"), float("inf"), [1], "0.01"])
    if r.random() < 0.2:
        claim["book"] = r.choice([240, "B > 240", None, [1, 2], {"a": 1}])
    if r.random() < 0.1:
        claim["quote"] = "B > 1.97e14 / 8.20e11 = 240"
    return claim


def gen_claims_file(r) -> bytes:
    import yaml

    x = r.random()
    if x < 0.06:
        return r.choice([b"", b"[]", b"{}", b"- 1\n- x\n", b"claims: []\n", b"claims: 5\n", b"\xff\xfe\x00",
                         b"- {id: a, spec: 'bf16[B', expect: {flops: 1}}\n", b"key: [unclosed\n",
                         b"- !!python/object:os.system {}\n", b"&a [*a]\n", b"- id: x\n\texpect: 1\n",
                         b"- " * 2000 + b"x\n", b"[" * 5000, b"\x00\x01\x02"])
    claims = [_claim(r) for _ in range(r.randint(1, 3))]
    if r.random() < 0.05:
        claims.append(_junk_value(r))
    data = {"claims": claims} if r.random() < 0.1 else claims
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    if r.random() < 0.1:
        text = mutate(r, text)
    return text.encode("utf-8", "surrogatepass")


# ----------------------------------------------------------------------------- whole cases

SUBCOMMANDS = ("analyze", "analyze-json", "latex", "roofline", "check", "chips", "chip", "plot", "junk")


def gen_analyze(r, json_out=None, latex=False) -> Case:
    text, s, mesh = gen_spec_text(r)
    stdin = None
    spec_arg = text
    if r.random() < 0.03:
        spec_arg = "-"
        stdin = text.encode("utf-8", "surrogatepass") if r.random() < 0.9 else \
            r.choice([b"\xff\xfebf16[B]", b"bf16[B, D] \xe2 @ bf16[D, F] -> bf16[B, F]", b""])
    argv = ["latex" if latex else "analyze", spec_arg] + _machine_flags(r, s) + _spec_flags(r, s, mesh)
    if latex:
        if r.random() < 0.5:
            argv += ["--format", r.choice(["latex", "markdown", "markdown", "html"] if r.random() < 0.97
                                          else ["LaTeX", ""])]
    else:
        if json_out is None:
            json_out = r.random() < 0.5
        if json_out:
            argv.append("--json")
    if r.random() < 0.3:
        head, rest = argv[:2], argv[2:]
        pairs = []
        i = 0
        while i < len(rest):        # shuffle flags, keeping each with its value
            take = 1 if rest[i] == "--json" or i + 1 >= len(rest) else 2
            pairs.append(rest[i:i + take])
            i += take
        r.shuffle(pairs)
        argv = head + [x for p in pairs for x in p]
    kind = "latex" if latex else ("analyze-json" if "--json" in argv else "analyze")
    return Case(argv, stdin=stdin, files=_hardware_files(r, argv), kind=kind)


def gen_ops(r) -> Case:
    """analyze or latex of a spec of the ops beyond contractions (elementwise, unary,
    reductions, softmax, norms, gather, copies, fused blocks), beside a contraction now and
    then, on a mesh now and then; a chip with a vector figure, --vector-flops, or neither."""
    s = _Spec()
    s.vector = True
    mesh_flag = None
    statements = []
    if r.random() < 0.4:
        decl = _mesh_decl(r, s)
        if r.random() < 0.7:
            statements.append("mesh " + decl)
            s.mesh_in_spec = True
        else:
            mesh_flag = decl.replace(" ", "")

        def one():
            return _sharded_vector(r, s) if r.random() < 0.8 else _sharded(r, s)
    else:
        def one():
            return _fused(r, s) if r.random() < 0.2 else _vector(r, s) if r.random() < 0.85 else \
                r.choice(_PLAIN)(r, s)
    for _ in range(1 if r.random() < 0.6 else r.randint(2, 3)):
        statements.append(one())
    text = r.choice(["\n", "\n", "; ", "\r\n"]).join(statements)
    if junk(r, 0.3):
        text = mutate(r, text)
    cmd = r.choice(["analyze", "analyze", "latex"])
    argv = [cmd, text] + _machine_flags(r, s) + _spec_flags(r, s, mesh_flag)
    if cmd == "analyze" and r.random() < 0.6:
        argv.append("--json")
    elif cmd == "latex" and r.random() < 0.3:
        argv += ["--format", r.choice(["latex", "markdown"])]
    return Case(argv, files=_hardware_files(r, argv), kind="ops")


def _hardware_files(r, argv) -> dict:
    return {"hw.json": _hardware_file(r)} if "{tmp}/hw.json" in argv else {}


def _maybe_hardware(r, argv: list, chance: float) -> dict:
    """With this chance, point the command at an edited hardware file (appended to argv)."""
    if r.random() < chance:
        argv += ["--hardware", "{tmp}/hw.json"]
        return {"hw.json": _hardware_file(r)}
    return {}


def gen_roofline(r) -> Case:
    argv = ["roofline"]
    if r.random() < 0.95:
        argv += ["--flops", r.choice(NUMBERS) if r.random() < 0.7 else r.choice(NUMBER_JUNK + SET_VALUES)]
    if r.random() < 0.7:
        argv += ["--bytes", r.choice(NUMBERS + ["0", "4e9"]) if r.random() < 0.7 else
                 r.choice(NUMBER_JUNK + SET_VALUES)]
    if r.random() < 0.3:
        argv += ["--dtype", r.choice(DTYPES + DTYPE_NEAR)]
    argv += _machine_flags(r, None, chip_p=0.7)
    if r.random() < 0.5:
        argv.append("--json")
    return Case(argv, files=_hardware_files(r, argv), kind="roofline")


def gen_chip(r) -> Case:
    y = r.random()
    name = r.choice(CHIPS) if y < 0.5 else r.choice(CHIP_NAMES) if y < 0.8 else r.choice(CHIP_JUNK)
    argv = ["chip", name]
    if r.random() < 0.4:
        argv += ["--variant", r.choice(VARIANTS) if r.random() < 0.8 else r.choice(VARIANT_JUNK)]
    if r.random() < 0.5:
        argv.append("--json")
    return Case(argv, files=_maybe_hardware(r, argv, 0.1), kind="chip")


def gen_chips(r) -> Case:
    argv = ["chips"]
    if r.random() < 0.5:
        argv.append("--json")
    return Case(argv, files=_maybe_hardware(r, argv, 0.4), kind="chips")


def gen_check(r) -> Case:
    files = {"claims.yaml": gen_claims_file(r)}
    path = "{tmp}/claims.yaml" if r.random() < 0.95 else r.choice(["{tmp}/missing.yaml", "{tmp}", "/dev/null"])
    argv = ["check", path]
    if r.random() < 0.5:
        argv.append("--json")
    if r.random() < 0.05:
        argv += ["--hardware", "{tmp}/hw.json"]
        files["hw.json"] = _hardware_file(r)
    return Case(argv, files=files, kind="check")


_PLOT_SPECS = ["{t}[B, {D}] @ {t}[{D}, {F}] -> {t}[B, {F}]", "{t}[B, {D}] * int8[{D}, {F}] -> {t}[B, {F}]",
               "{t}[B] *_B {t}[B] -> {t}[1]", "{t}[B, {D}] *_{D} {t}[{D}, {F}] *_{F} {t}[{F}, {D}] -> {t}[B, {D}]",
               "mesh X=2\n{t}[B, {D}_X] @ {t}[{D}_X, {F}] -> {t}[B, {F}]"]
# vector work: a chip with a vector figure, or --vector-flops, runs them
_PLOT_VECTOR_SPECS = ["gelu({t}[B, {F}]) -> {t}[B, {F}]", "{t}[B, {D}] + {t}[{D}] -> {t}[B, {D}]",
                      "softmax_H {t}[B, H] -> {t}[B, H]", "rmsnorm_H {t}[B, H], {t}[H] -> {t}[B, H]",
                      "sum_H {t}[B, H] -> fp32[B]", "gather {t}[V, {D}], int32[B] -> {t}[B, {D}]",
                      "fused {{ {t}[B, {D}] @ {t}[{D}, {F}] -> fp32[B, {F}]; gelu(fp32[B, {F}]) -> {t}[B, {F}] }}",
                      "mesh X=2\nsoftmax_H {t}[B, H_X] -> {t}[B, H_X]"]


def _clean_plot(r) -> Case:
    kind = r.choice(["roofline", "sweep"])
    specs, sizes, vector = [], {}, False
    for _ in range(r.randint(1, 3)):
        D, F = r.choice(["D", "4096", "1024", "Hd"]), r.choice(["F", "4096", "dModel"])
        if D == F:
            F = "F"
        form = r.choice(_PLOT_SPECS) if r.random() < 0.7 else r.choice(_PLOT_VECTOR_SPECS)
        vector = vector or form in _PLOT_VECTOR_SPECS
        if "*_{D}" in form and (D.isdigit() or F.isdigit()):
            form = _PLOT_SPECS[0]
        specs.append(form.format(t=r.choice(["bf16", "bf16", "int8", "fp8"]), D=D, F=F))
        for d in (D, F) + (("H",) if "H" in form else ()) + (("V",) if "[V," in form else ()):
            if not d.isdigit():
                sizes[d] = r.choice(["1024", "4096", "8192", "16k"])
    if kind == "roofline":
        sizes["B"] = r.choice(["1", "128", "256", "4096"])
    chip = r.choice(["tpu-v5e", "v5e", "tpu-v5p", "h100", "b200", "tpu-v6e"])
    argv = ["plot", kind, *specs, "--chip", chip]
    if vector and chip not in ("tpu-v5p", "h100", "b200"):
        argv += ["--vector-flops", r.choice(VECTOR_FLOPS[:6])]
    if r.random() < 0.2 and any("mesh" in sp for sp in specs):
        argv += ["--ici-bw", r.choice(NUMBERS[:6])]
    argv += ["--set", ",".join(f"{k}={v}" for k, v in sizes.items())]
    if kind == "sweep":
        argv += ["--sweep", f"B={r.choice([1, 2, 16])}:{r.choice([64, 512, 4096, 100000])}"]
        if r.random() < 0.4:
            argv.append("--time")
    if r.random() < 0.4:
        for i in range(len(specs)):
            argv += ["--label", r.choice(["a", "$x$", "μ", "int8 weights", "_"])]
    argv += ["-o", "{tmp}/" + r.choice(["out", "a b", "ü"]) + r.choice([".png", ".svg", ".pdf"])]
    return Case(argv, kind="plot")


def gen_plot(r) -> Case:
    if _NOISE[0] == 0:
        return _clean_plot(r)
    kind = r.choice(["roofline", "sweep"])
    specs, dims, mesh, vector = [], [], None, False
    for _ in range(r.randint(1, 3)):
        text, s, m = gen_spec(r) if r.random() < 0.85 else gen_spec_text(r)
        if s.mesh_in_spec or m:
            mesh = mesh or m
        specs.append(text)
        dims += s.dims
        vector = vector or s.vector
    ext = r.choice([".png", ".svg", ".pdf", ".png", ".svg"] if r.random() < 0.93 else [".jpg", ".txt", "", ".PNG"])
    out = "{tmp}/" + r.choice(["out", "a b", "ü"]) + ext
    if r.random() < 0.03:
        out = "{tmp}/missing-dir/out.png"
    argv = ["plot", kind, *specs]
    s = _Spec()
    s.vector = vector
    argv += _machine_flags(r, s, chip_p=0.85)
    s.dims = list(dict.fromkeys(dims))
    if r.random() < 0.4:
        argv += ["--set", ",".join(f"{_dim_ref(r, s)}={r.choice(SET_VALUES[:8])}" for _ in range(r.randint(1, 3)))]
    if mesh is not None and r.random() < 0.8:
        argv += ["--mesh", mesh.replace(" ", "")]
    if kind == "sweep" or r.random() < 0.1:
        if r.random() < 0.92:
            lo = r.choice([1, 1, 2, 16])
            hi = r.choice([8, 512, 4096, 100000])
            argv += ["--sweep", f"{_dim_ref(r, s)}={lo}:{hi}"]
        else:
            argv += ["--sweep", r.choice(["B=0:10", "B=10:1", "B", "=1:2", "B=1:1e9", "B=1:10000000000", "B=a:b"])]
    if r.random() < 0.3:
        argv.append("--time")
    if r.random() < 0.3:
        n = len(specs) if r.random() < 0.8 else len(specs) + 1
        for i in range(n):
            argv += ["--label", r.choice(["a", "$x$", "", "μ", "$\\frac{", "_"])]
    argv += ["-o", out]
    return Case(argv, files=_hardware_files(r, argv), kind="plot")


EDGE_NUMBERS = ["1e-30", "1e40", "1.0001e-30", "9.99e39", "1", "2.5e-30", "3e39", "1e14", "4.5e10"]
EDGE_OVERRIDES = {
    "interconnect.wraparound_min_axis_size": ["1", "2", "3", "16", "0", "1e9", "2.5"],
    "interconnect.links_per_chip": ["1", "2", "1000", "0", "0.5"],
    "interconnect.hop_latency_s": ["1e-30", "1e-3", "0", "1", "null"],
    "interconnect.domain_size": ["1", "2", "65536", "0"],
    "interconnect.topology": ["switch", "torus_3d", "torus_2d", "mesh", "ring", "fully_connected"],
    "interconnect.link_bandwidth_one_way_bytes_per_s": EDGE_NUMBERS,
    "interconnect.link_bandwidth_bidi_bytes_per_s": EDGE_NUMBERS,
    "interconnect.chip_bandwidth_one_way_bytes_per_s": EDGE_NUMBERS,
    "dcn.bandwidth_one_way_bytes_per_s_per_chip": EDGE_NUMBERS + ["null"],
    "dcn.chips_per_host": ["1", "8", "0", "1000"],
    "pcie_bandwidth_one_way_bytes_per_s": EDGE_NUMBERS + ["null"],
    "peak_flops_per_s.bf16": EDGE_NUMBERS + ["null"],
    "peak_flops_per_s.int8": EDGE_NUMBERS,
    "hbm_bandwidth_bytes_per_s": EDGE_NUMBERS,
    "vector_flops_per_s.fp32": EDGE_NUMBERS + ["null"],
    "vector_flops_per_s.bf16": EDGE_NUMBERS,
    "onchip.vmem_capacity_bytes": ["1", "1024", "1e40", "1e-30", "null"],
    "onchip.l2_capacity_bytes": ["1", "1024", "1e40", "null"],
}
HUGE = ["999999999999999999", "1e17", "2**59", "1G", "1T", "3", "1", "4096", "65536"]


def gen_extreme(r) -> Case:
    """Valid specs on a mesh at the edges of what is allowed: figures at the ends of their
    range, huge sizes, odd link models, and every query at once."""
    s = _Spec()
    decl = ", ".join(f"{a}={r.choice([1, 2, 3, 4, 8, 16, 64, 256, 1024])}{r.choice(['', '', '@dcn', '@pcie'])}"
                     for a in AXES[:r.randint(1, 3)])
    for a in AXES[:decl.count("=")]:
        s.axes[a] = 2
    old = _NOISE[0]
    _NOISE[0] = 0.0
    try:
        statements = [(_sharded(r, s) if r.random() < 0.45 else _sharded_vector(r, s) if r.random() < 0.4
                       else _collective(r, s) if r.random() < 0.3 else r.choice(_PLAIN)(r, s))
                      for _ in range(r.randint(1, 3))]
    finally:
        _NOISE[0] = old
    spec = "mesh " + decl + "\n" + "\n".join(statements)
    cmd = r.choice(["analyze", "analyze", "latex"])
    argv = [cmd, spec, "--chip", r.choice(VECTOR_CHIPS[:9] if s.vector and r.random() < 0.5 else CHIPS)]
    for flag, p in (("--peak-flops", 0.3), ("--hbm-bw", 0.3), ("--ici-bw", 0.3),
                    ("--vector-flops", 0.5 if s.vector else 0.05)):
        if r.random() < p:
            argv += [flag, r.choice(EDGE_NUMBERS)]
    for _ in range(r.randint(0, 3)):
        f = r.choice(sorted(EDGE_OVERRIDES))
        argv += ["--override", f"{f}={r.choice(EDGE_OVERRIDES[f])}"]
    if s.dims and r.random() < 0.7:
        dims = [d for d in s.dims if r.random() < 0.7]
        if dims:
            argv += ["--set", ",".join(f"{d}={r.choice(HUGE)}" for d in dims)]
    if s.dims and r.random() < 0.6:
        argv += ["--solve", r.choice(s.dims)]
    if s.dims and r.random() < 0.4:
        argv += ["--limit", ",".join(dict.fromkeys(r.choice(s.dims) for _ in range(2)))]
    if s.dims and r.random() < 0.3:
        argv += ["--grow", ",".join(dict.fromkeys(r.choice(s.dims) for _ in range(2)))]
    if cmd == "analyze" and r.random() < 0.6:
        argv.append("--json")
    return Case(argv, kind="extreme")


def gen_hardware_edge(r) -> Case:
    """A hardware file whose named chip has one figure at an edge that validation may let
    through, then an analysis on a mesh (or the chip's card) with it."""
    data = json.loads((ROOT / "hardware.json").read_text(encoding="utf-8"))
    chip = r.choice(data["chips"])
    for _ in range(r.randint(1, 3)):
        section = r.choice(["peak_flops_per_s", "interconnect", "dcn", "onchip", None])
        target = chip.get(section) if section else chip
        if not isinstance(target, dict):
            continue
        keys = [k for k, v in target.items() if isinstance(v, (int, float)) or v is None]
        if keys:
            target[r.choice(keys)] = r.choice([1e-30, 1e40, 1, 2, 3, 1e-12, 1e30, 0.5, None, 1023, 0])
    if r.random() < 0.2:
        chip["interconnect"]["topology"] = r.choice(["switch", "torus_3d", "torus_2d", "mesh"])
    files = {"hw.json": json.dumps(data).encode()}
    if r.random() < 0.2:
        return Case(["chip", chip["id"], "--hardware", "{tmp}/hw.json"] + (["--json"] if r.random() < 0.5 else []),
                    files=files, kind="chip")
    case = gen_extreme(r)
    argv = [a for a in case.argv]
    argv[argv.index("--chip") + 1] = chip["id"]
    argv += ["--hardware", "{tmp}/hw.json"]
    return Case(argv, files=files, kind="hardware")


def gen_junk_argv(r) -> Case:
    """Argv that argparse (or the command) must refuse cleanly."""
    pool = ["analyze", "latex", "plot", "check", "chips", "chip", "roofline", "--json", "--chip", "v5e",
            "--set", "B=1", "--solve", "B", "--limit", "-", "--", "-h", "--version", "--mesh", "X=2",
            "bf16[B] -> bf16[B]", "--format", "markdown", "--flops", "1e12", "--grow", "B,D", "sweep",
            "-o", "{tmp}/x.png", "", "--unknown", "--set=B=2", "--chip=", "--no-such"]
    argv = [r.choice(pool) for _ in range(r.randint(0, 6))]
    if r.random() < 0.3 and argv and argv[0] == "plot":
        argv = argv[:1]  # never draw here
    return Case(argv, kind="junk")


# ----------------------------------------------------------------------------- models

_MODELS: list = []


def _models() -> list:
    """The shipped models.json's entries with a configuration (read once); those given by
    `params` alone have no template to shard."""
    if not _MODELS:
        _MODELS.extend(m for m in json.loads((ROOT / "models.json").read_text(encoding="utf-8"))["models"]
                       if "params" not in m)
    return _MODELS


def model_names() -> list:
    """Every id and alias in models.json."""
    return [n for m in _models() for n in [m["id"], *m.get("aliases", ())]]


MODEL_NEAR = ["llama-3-70", "llama3-70", "LLaMA-3 70B", "llama-3-80b", "lama-3-8b", "llama-3.1-70b", "gemma-2b",
              "gemma7b", "mixtral", "mixtral-8x22b", "gpt-3", "gpt3-175b", "gpt-3-175", "llama_2_7b", "llama-2",
              "llama-2-7b.sr", "llama-2-7b.txt", "./llama-2-7b", "mixtral-8x7b/", "gpt-3-175b.json", "Gemma 7B",
              "llama2-7b-chat", "llama-3-8b-instruct", "llama 3 8b", "l", "llama-3-8", "mistral-7b"]
MODEL_JUNK = ["", " ", "-", ".", "/", "/dev/null", "{tmp}", "{tmp}/missing.sr", "{tmp}/missing", "\x00", "ｌｌａｍａ2-7b",
              "llama-2-7b\x00", "a" * 300, "None", "models.json", "*", "symbolic", "v5e", "../models.json", "\u200b",
              "llama-2-7b;rm", "🙂", "{tmp}/hw.json", "\udcff", "llama-2-7b\n", "{", "let D = 4"]
MODEL_CHIPS = CHIPS + ["symbolic", "symbolic", "v5e", "v5p", "h100", "TPU v5e", "B200", " symbolic ", "SYMBOLIC"]
MODEL_CHIP_JUNK = CHIP_JUNK[:12] + ["symbol", "symbolic2", "Symbolic chip", "custom"]
CHIP_COUNTS = ["1", "1", "2", "4", "8", "8", "16", "64", "256", "1024", "3", "5", "7", "9", "12", "96"]
CHIP_COUNT_JUNK = ["0", "-1", "-8", "abc", "1.5", "2**3", "", "99999999999999999999", "1e3", " 8", "0x10", "٨"]
SYMBOLIC_FIELDS = ["peak", "hbm_bw", "hbm_capacity", "vector", "ici_bw", "peak,hbm_bw", "hbm_bw,hbm_capacity",
                   "peak,hbm_bw,vector,hbm_capacity"]
SYMBOLIC_FIELDS_JUNK = ["", "nope", "C", "W_hbm", "peak,,hbm_bw", "PEAK", "peak hbm_bw", "all", ","]
MFUS = ["0.4", "0.5", "0.35", "1", "1.0", "0.01", "1e-3"]
MFU_JUNK = ["0", "-0.4", "1.5", "nan", "inf", "-inf", "abc", "40%", "", "1e-400", "1e-320", "1.0000001"]
OPTIMIZERS = ["adam", "adafactor", "sgd", "adam-bf16", "adam8bit", "sgd-momentum"]
OPTIMIZER_JUNK = ["Adam", "adamw", "", "lion", "ADAM", " adam", "sgd,adam", "None", "adam_bf16"]
REMATS = ["full", "none", "save=x,o,h", "save=x", "save=q,k,v,o", "save=x,a,m", "save=h,g,u"]
REMAT_JUNK = ["Full", "partial", "", "selective", "None", "NONE", "full ", "save=", "save=nope", "save=x,,o",
              "save=x,x", "save= x", "SAVE=x", "save=x;o", "save:x", "save=x,o,", "save=X", "save=ℌ", "save"]
TEMPLATE_TENSORS = ["x", "q", "k", "v", "o", "a", "g", "u", "h", "m"]   # the names the templates give
TRAIN_TOKENS = ["15e12", "1e12", "2T", "1", "15_000_000_000_000", "1e9", "300e9", "2**40", "4096", "128k"]
TRAIN_TOKENS_JUNK = ["0", "-1", "abc", "1e18", "1e19", "nan", "inf", "", "1.5", "15 T", "9" * 40, "1e-3"]
BATCHES = ["1,2,4,8", "1,2,4,8,16,32,64,128,256", "1", "256", "1,8,64,256", "3,1,2", "1,1,1", " 1, 2",
           "32", "1,1024", "4,16,64"]
BATCHES_JUNK = ["", ",", "0", "-1", "0,1", "a", "1.5", "1e3", "1,,2", "1,2,...,256", ",".join(map(str, range(1, 65))),
                ",".join(map(str, range(1, 66))), "99999999999999999999", "1;2", "٣", "1 2", "10**3"]
MODEL_SET_VALUES = ["1", "2", "4", "8", "32", "128", "512", "2048", "4096", "8192", "32k", "128k", "1M", "3", "7"]


def _model_dims(config, mode) -> list:
    """The dims a named model's program has (the template's), roughly."""
    dims = ["B", "S", "D", "F", "K", "H", "L", "V", "G", "N", "tokens"] + ([] if mode == "decode" else ["T"])
    if config.get("moe"):
        dims += ["E", "A", "C", "M", "R"]
    if config.get("positions") == "learned":
        dims.append("Tmax")
    return dims


def _mode_flags(r) -> list:
    x = r.random()
    flags = [] if x < 0.25 else [r.choice(["--train", "--prefill", "--decode"])]
    if junk(r, 0.03):
        flags.append(r.choice(["--train", "--prefill", "--decode"]))   # two modes: argparse refuses
    return flags


def _mode_of(argv) -> str:
    return next((a[2:] for a in reversed(argv) if a in ("--train", "--prefill", "--decode")), "train")


STRATEGIES = ["tp=8", "tp=2", "dp=4", "dp=2,tp=4", "tp=1", "dp=8,tp=8", "tensor=4", "data=2,tensor=2", "tp=16",
              "fsdp=8", "fsdp=4,tp=2", "dp=2,fsdp=2,tp=2", "fsdp=16", "pp=4", "dp=2,pp=2", "pp=2,tp=4", "sp=2",
              "sp=4,tp=2", "dp=2,sp=2", "pipeline=2", "context=2", "pp=8,sp=2"]
STRATEGIES_JUNK = ["fsdp=0", "pp=3", "pp=0", "sp=0", "ep=8", "tp", "tp=", "tp=0", "tp=-2", "tp=1e9", "tp=8,tp=8",
                   "xx=2", "tp=Y", "dp=2;tp=4", "", "pp=1000"]
MICROBATCHES = ["1", "2", "4", "8", "16", "3", "0", "-1", "x", "1e9"]
SCHEDULES = ["gpipe", "1f1b", "interleaved", "interleaved:4", "interleaved:1", "zigzag", ""]


def _model_set(r, dims, known: dict, mode: str) -> list:
    """--set values: the batch and sequence, now and then another dim (its own value, or one
    that contradicts a relation), or junk."""
    parts = []
    seq = "S" if mode == "decode" or "T" not in dims else "T"
    if r.random() < 0.7:
        parts.append(f"B={r.choice(MODEL_SET_VALUES[:9])}")
    if r.random() < 0.5:
        parts.append(f"{seq}={r.choice(MODEL_SET_VALUES)}")
    if r.random() < 0.1:
        parts.append(f"{'T' if seq == 'S' else 'S'}={r.choice(MODEL_SET_VALUES)}")
    if r.random() < 0.2 and dims:                    # other dims: a let's own value, or one that contradicts it
        for d in r.sample(dims, min(len(dims), r.choice([1, 1, 2, 3]))):
            parts.append(f"{d}={known[d] if d in known and r.random() < 0.5 else r.choice(MODEL_SET_VALUES)}")
    if junk(r, 0.3):
        d = r.choice(dims + ["B", "T", "S", "X", "", " B", "B_X", "ℌ"]) if dims else "B"
        v = r.choice(SET_VALUES)
        parts.append(r.choice([f"{d}={v}"] * 6 + [f"{d}", f"={v}", f"{d}=={v}", f"{d} = {v}", ""]))
    if not parts:
        return []
    if r.random() < 0.2 and len(parts) > 1:          # given as several --set flags
        return [x for p in parts for x in ("--set", p)]
    return ["--set", r.choice([",", ",", ", "] if not junk(r, 0.2) else [";", ",,", " "]).join(parts)]


def _model_flags(r, dims, known: dict, mode: str, *, chip_p=0.6, tensors=(), mesh=False, named=True) -> list:
    """The flags of `symroof model` other than the mode, --print and --json; `tensors`: the
    names the program gives tensors (for --remat save=...); `mesh`: the program has one."""
    argv = []
    if tensors and r.random() < 0.2:
        argv += ["--remat", "save=" + ",".join(r.sample(list(tensors), r.randint(1, len(tensors))))]
    if r.random() < 0.3:
        # the chip options analyze takes: a chip (or bare figures), its variant, figures
        # replaced, --override, --hardware; a model's norms and softmax are vector work
        s = _Spec()
        s.vector, s.mesh_in_spec = True, mesh
        argv += _machine_flags(r, s, chip_p=max(chip_p, 0.85))
    elif r.random() < chip_p:
        # most TPUs list no vector-unit figure, which a model's norms and softmax need
        argv += ["--chip", r.choice(MODEL_CHIP_JUNK) if junk(r, 0.1) else
                 r.choice(MODEL_CHIPS) if r.random() < 0.4 else r.choice(VECTOR_CHIPS + ["symbolic"])]
        if argv[-1] in CHIPS[:6] and r.random() < 0.5:
            argv += ["--vector-flops", r.choice(VECTOR_FLOPS)]
    if "--chip" in argv and r.random() < 0.08:
        argv += ["--symbolic", r.choice(SYMBOLIC_FIELDS_JUNK) if junk(r, 0.3) else r.choice(SYMBOLIC_FIELDS)]
    if r.random() < (0.05 if mesh and _NOISE[0] else 0 if mesh else 0.4):
        argv += ["--chips", r.choice(CHIP_COUNT_JUNK) if junk(r, 0.15) else r.choice(CHIP_COUNTS)]
    argv += _model_set(r, dims, known, mode) if r.random() < 0.75 else []
    for flag, p, good, bad in (("--mfu", 0.2, MFUS, MFU_JUNK), ("--optimizer", 0.15, OPTIMIZERS, OPTIMIZER_JUNK),
                               ("--remat", 0.15, REMATS[:2] if tensors else REMATS, REMAT_JUNK),
                               ("--train-tokens", 0.12, TRAIN_TOKENS, TRAIN_TOKENS_JUNK)):
        if flag == "--train-tokens" and mode != "train" and not junk(r, 0.3):
            continue
        if r.random() < p:
            argv += [flag, r.choice(bad) if junk(r, 0.2) else r.choice(good)]
    template = named or junk(r, 0.05)  # --weights, --kv and --strategy rewrite a named model's template
    for flag in ("--weights", "--kv"):
        if template and r.random() < 0.2:
            argv += [flag, r.choice(DTYPE_NEAR + ["", " ", "int8 ", "Half", "half"]) if junk(r, 0.25) else
                     r.choice(["int8", "fp8", "bf16", "int8", "fp8_e4m3", "fp16", "int4", "fp32", "e5m2"])]
    if template and r.random() < 0.15:  # parallelism strategies: sizes, or axes of a mesh given beside them
        if r.random() < 0.6:
            argv += ["--strategy", r.choice(STRATEGIES_JUNK) if junk(r, 0.25) else r.choice(STRATEGIES)]
            if "pp=" in argv[-1] or "pipeline=" in argv[-1] or junk(r, 0.05):  # a pipeline's microbatches, schedule
                if r.random() < 0.5:
                    argv += ["--microbatches", r.choice(MICROBATCHES)]
                if r.random() < 0.4:
                    argv += ["--schedule", r.choice(SCHEDULES)]
        else:
            argv += ["--strategy", r.choice(["dp=X,tp=Y", "tp=Y", "dp=X", "tp=X,dp=Y", "tp=Z", "fsdp=XY", "fsdp=X,tp=Y"]),
                     "--mesh", r.choice(["X=2,Y=4", "X=4,Y=8", "Y=8", "X=1,Y=2", "X=2", "Y=0", "X=2,Y=4@dcn"])]
    if r.random() < 0.12:
        argv += ["--batches", r.choice(BATCHES_JUNK) if junk(r, 0.3) else r.choice(BATCHES)]
        if r.random() < 0.5:
            ext = r.choice([".png", ".svg", ".pdf"]) if not junk(r, 0.1) else r.choice([".jpg", "", ".PNG", ".txt"])
            argv += [r.choice(["-o", "--output"]), "{tmp}/" + r.choice(["batches", "a b", "ü"]) + ext]
    elif junk(r, 0.03):
        argv += ["-o", "{tmp}/x.png"]                   # -o without --batches
    x = r.random()
    if x < 0.45:
        argv.append("--json")
    elif x < 0.52:
        argv.append("--latex")
    return argv


def _shuffle_flags(r, argv: list, head: int = 2) -> list:
    """The flags after the first `head` arguments in another order, each kept with its value."""
    rest, pairs, i = argv[head:], [], 0
    while i < len(rest):
        alone = ("--json", "--latex", "--print", "--train", "--prefill", "--decode")
        take = 2 if rest[i].startswith("-") and rest[i] not in alone and i + 1 < len(rest) else 1
        pairs.append(rest[i:i + take])
        i += take
    r.shuffle(pairs)
    return argv[:head] + [x for p in pairs for x in p]


def gen_model(r) -> Case:
    """`symroof model NAME`: a model of models.json by id or alias (in another case, with
    spaces), a near miss or junk, in a mode, on a chip or none, with sizes and options."""
    x = r.random()
    files = {}
    if x < 0.8 or not junk(r, 1):
        name = r.choice(model_names())
        if r.random() < 0.1:
            name = r.choice([name.upper(), name.title(), f"  {name} ", f"{name}\t"])
    elif x < 0.92:
        name = r.choice(MODEL_NEAR)
    else:
        name = r.choice(MODEL_JUNK)
    config = next((m for m in _models() if name.strip().lower() in [m["id"], *m.get("aliases", ())]), _models()[0])
    mode_flags = _mode_flags(r)
    mode = _mode_of(mode_flags)
    argv = ["model", name] + mode_flags
    if r.random() < 0.06:
        argv.append("--print")
        for flag in ("--weights", "--kv"):
            if r.random() < 0.3:
                argv += [flag, r.choice(DTYPE_NEAR) if junk(r, 0.3) else r.choice(["int8", "fp8", "bf16"])]
    else:
        argv += _model_flags(r, _model_dims(config, mode), dict(config["sizes"]), mode)
    if name == "{tmp}/hw.json" or "{tmp}/hw.json" in argv:
        files["hw.json"] = _hardware_file(r)
    if junk(r, 0.05):
        argv += ["--models", "{tmp}/models.json"]
        files["models.json"] = _models_file(r)
        if r.random() < 0.5:
            argv[1] = r.choice(model_names())
    if r.random() < 0.3:
        argv = _shuffle_flags(r, argv)
    return Case(argv, files=files, kind="model")


def _models_file(r) -> bytes:
    """The shipped models.json with one field broken, or junk."""
    if r.random() < 0.12:
        return r.choice([b"", b"[]", b"{}", b'{"models": []}', b'{"models": {}}', b"not json", b"\xff\xfe",
                         b'{"models": [1]}', b'{"models": [null]}', b"NaN", b'{"models": [{}]}', b"[" * 5000])
    data = json.loads((ROOT / "models.json").read_text(encoding="utf-8"))
    model = r.choice(data["models"])
    for _ in range(r.randint(1, 2)):
        # an edit of what an earlier edit broke is skipped
        with contextlib.suppress(KeyError, TypeError, AttributeError, IndexError, ValueError):
            _edit_model(r, data, model)
    return json.dumps(data, allow_nan=True, indent=1).encode()    # a line a field: shrink drops lines


def _edit_model(r, data: dict, model: dict) -> None:
    """One edit of a models.json entry (or of the file's top level)."""
    k = r.randint(0, 11)
    bad = r.choice([None, 0, -1, 1.5, "x", "", True, [], {}, [1], {"a": 1}, 10**30, float("nan")])
    if k == 0:
        model.pop(r.choice(["id", "name", "sizes", "params_published", "sources", "mlp", "norm", "aliases"]), None)
    elif k == 1:
        model["sizes"][r.choice(list(model["sizes"]))] = bad
    elif k == 2:
        model["sizes"].pop(r.choice(list(model["sizes"])))
    elif k == 3:
        model["sources"] = bad if r.random() < 0.6 else {"sizes": model["sources"]["sizes"]}
    elif k == 4:
        model["aliases"] = r.choice([bad, [1, None], "llama", [["x"]], [""], [model["id"]]])
    elif k == 5:
        model[r.choice(["mlp", "norm", "positions"])] = r.choice([bad, "relu", "rms", "learned", "rope", "GELU"])
    elif k == 6:
        model["moe"] = r.choice([bad, {"experts": 0, "active": 1}, {"experts": 8}, {"active": 2},
                                 {"experts": 3, "active": 5}, {"experts": 8, "active": 0},
                                 {"experts": "8", "active": 2}, {"experts": 8, "active": 2.5}])
    elif k == 7:
        model["sizes"]["K"] = r.choice([3, 5, 7, 1, 0, model["sizes"]["N"] + 1])
    elif k == 8:
        model[r.choice(["tied_embeddings", "bias"])] = bad
    elif k == 9:
        model["id"] = r.choice([bad, data["models"][0]["id"], "LLaMA", " x ", "a" * 300])
    elif k == 10:
        model["name"] = r.choice([bad, "{", "\x00", "a\nb", "$x$"])
    else:
        data[r.choice(["models", "about"])] = bad


# ---- program files with structure

_STRUCT_NAMES = ["W", "Wq", "Wk", "Wv", "Wo", "W1", "W2", "Wg", "Wu", "Wd", "Emb", "Wout", "Kc", "Vc", "Wn", "Ω",
                 "Wé", "bias", "gamma"]
BAD_LETS = ["4*", "(D", "D)", "D/0", "4.5*D", "D**2", "D^2", "-D", "0", "3/2", "D - D", "2 - 3", "", " ",
            "4 * * D", "()", "D D", "4D", "D,", "sqrt(D)", "1e3", "0x10", "D/(D - D)", "D % 2", "ℌ*2", "4*-D",
            "--4", "(" * 300 + "D" + ")" * 300, "9" * 4000, "D/(2 - 2)", "max(D, F)", "D = 4", "𝔇", "D_X"]
BAD_REPEATS = ["repeat {", "repeat L", "repeat L { bf16[B] -> bf16[B] }", "repeat L {{", "repeat ( {", "repeat L* {",
               "repeat 1e3 {", "repeat 0 {", "repeat -2 {", "repeat L/0 {", "repeat L L {", "repeat ∞ {",
               "repeat L { }", "repeat{", "repeat: L {", "repeat L {  # comment", "repeat (L) {", "repeat L-L {",
               "repeat 1/2 {", "repeat L/2 {", "repeat 99999999999999999999 {", "Repeat L {", "repeat\tL {"]
BAD_PARTS = ["part {", "part 1 {", "part a b {", "part attention", "part attention { x }", "part _x {", "part ü {",
             "part attention {{", "part: attention {", "part a_b {", "part rest {", "part attention{", "Part mlp {",
             "part 🙂 {", "part attention } {"]
BAD_DECLS = ["param W bf16[D]", "param : bf16[D]", "param W: bf16[D", "param W: bf16[D F]", "param W: bf16[D, 4.5]",
             "param W: bf16[D],", "param W: bf16[], ", "param W: bf16[D_X]", "param 1W: bf16[D]", "cache: bf16[B, S]",
             "param W: bf16[D], W: bf16[D]", "embedding E: [V, D]", "param W: bf16", "param W: bf16[D]] ",
             "param W: bf16[D], , V: bf16[D]", "cache K: bf16[B]", "param W: bf16[0]", "param W: bf16[D, D]",
             "param W: bf16[99999999999999999999]", "param W: bf16[-1]", "param W:: bf16[D]", "param W: bf16 [D]",
             "param W: bf16[(D)]", "param W: bf16[2*D]", "param W: bf16[ℌ]", "param W: bf16[D]{U_X}"]


class _Prog:
    """A program being built: its lines, the dims its statements use, the sizes its lets fix."""

    def __init__(self, r):
        self.r = r
        self.lines: list[str] = []
        self.dims: list[str] = []
        self.known: dict[str, str] = {}       # dim -> the value a let gives it (a number)
        self.names: list[str] = []            # declared tensor names
        self.decode = r.random() < 0.3
        self.seq = [] if self.decode else ["T"]
        self.indent = r.choice(["  ", "  ", "    ", "\t", ""])
        self.tensors: list[str] = []          # names given to tensors (x: bf16[...]), for remat save=
        # on a mesh now and then: the batch split over X (data parallel), the MLP's F over Y
        # (its down projection's partial sums reduced by an AllReduce)
        self.mesh, self.layout = None, {}
        if r.random() < 0.15:
            self.mesh = r.choice(["X=2", "X=4", "X=2, Y=4", "X=8, Y=2", "X=2@dcn, Y=4", "X=2, Y=2"])
            self.layout = {"B": "_X"} if r.random() < 0.8 else {}
            if "Y" in self.mesh and r.random() < 0.6:
                self.layout["F"] = "_Y"

    def dim(self, *names):
        for n in names:
            if n not in self.dims:
                self.dims.append(n)

    def t(self, dt, *dims) -> str:
        self.dim(*dims)
        return f"{dt}[{', '.join(d + self.layout.get(d, '') for d in dims)}]"

    def out(self, t: str) -> str:
        """A statement's output, named now and then (the names remat save=... keeps)."""
        free = [n for n in TEMPLATE_TENSORS + ["y", "z", "ŷ"] if n not in self.tensors]
        if free and self.r.random() < 0.3:
            self.tensors.append(self.r.choice(free))
            return f"{self.tensors[-1]}: {t}"
        return t

    def x(self, dt="bf16") -> str:
        return self.t(dt, "B", *self.seq, "D")

    def decl(self, word, dims, depth, dt=None) -> str:
        r = self.r
        name = r.choice(_STRUCT_NAMES)
        while name in self.names:
            name = name + str(len(self.names))
        self.names.append(name)
        dt = dt or (r.choice(["bf16", "bf16", "int8", "fp8", "fp32", "bfloat16", "f32", "int4"]) if r.random() < 0.3
                    else "bf16")
        return self.indent * depth + f"{word} {name}: {self.t(dt, *dims)}"


def _lets(p: _Prog) -> None:
    """let lines: numbers and relations with + - * / and parentheses, in dims the program uses."""
    r = p.r
    parts = []
    H = r.choice(["64", "128", "128", "(64 + 64)", "2*64", "256/2"])
    N = r.choice(["K*G", "32", "(K)*G", "8*4", "K*G + 0*K"])
    D = r.choice(["N*H", "N*H", "4096", "(N*H)", "2*(N*H)/2", "N*H - H + H", "1024*4"])
    F = r.choice(["4*D", "(8*D)/2", "2*(D + D)", "D*4 - D + D", "14336", "(D + D)*2", "D*(3 + 1)", "4*(D)"])
    chosen = {"H": H, "D": D, "F": F, "N": N, "K": r.choice(["8", "4", "1", "32"]), "G": r.choice(["4", "1", "8"]),
              "L": r.choice(["2", "4", "32", "80", "L0*2"]), "V": r.choice(["32000", "128256", "50257", "V0"])}
    for name, value in chosen.items():
        if r.random() < 0.75:
            parts.append((name, value))
    r.shuffle(parts)
    if r.random() < 0.6:
        parts.append(("tokens", "B" if p.decode else r.choice(["B*T", "B*T", "T*B", "(B)*(T)"])))
    if not p.decode and r.random() < 0.5:
        parts.append(("S", "T"))
    per_line = r.choice([1, 2, 3, 99])
    for i in range(0, len(parts), per_line):
        p.lines.append("let " + ", ".join(f"{n} = {v}" for n, v in parts[i:i + per_line]))
    for n, v in parts:
        if re.fullmatch(r"\d+", v):
            p.known[n] = v


def _attention(p: _Prog, depth: int) -> list:
    r = p.r
    ind = p.indent * depth
    x = p.x()
    out = []
    if r.random() < 0.6:
        out.append(p.decl("param", ["D", "N", "H"], depth) + (", " + p.decl("param", ["D", "N", "H"], 0).split(" ", 1)[1]
                                                              if r.random() < 0.4 else ""))
    q = p.t("bf16", "B", *p.seq, "N", "H")
    out.append(ind + f"{x} *_D {p.t('bf16', 'D', 'N', 'H')} -> {p.out(q)}")
    if p.decode or r.random() < 0.3:
        if r.random() < 0.7:
            out.append(p.decl("cache", ["B", "S", "N", "H"], depth))
    kv = p.t("bf16", "B", "S", "N", "H")
    scores = p.t("fp32", "B", "N", *p.seq, "S")
    probs = p.t("bf16", "B", "N", *p.seq, "S")
    body = [f"{q} *_H {kv} -> {scores}", f"softmax_S {scores} -> {probs}", f"{probs} *_S {kv} -> {q}"]
    if r.random() < 0.7:
        if r.random() < 0.5:
            out.append(ind + "fused {   # the scores stay on chip")
            out += [ind + p.indent + b for b in body]
            out.append(ind + "}")
        else:
            out.append(ind + "fused { " + "; ".join(body) + " }")
    else:
        out += [ind + b for b in body]
    out.append(ind + f"{q} *_{{N,H}} {p.t('bf16', 'N', 'H', 'D')} -> {p.out(x)}")
    out.append(ind + f"{x} + {x} -> {x}   # residual")
    return out


def _mlp(p: _Prog, depth: int) -> list:
    r = p.r
    ind = p.indent * depth
    x = p.x()
    h = p.t("bf16", "B", *p.seq, "F")
    out = []
    if r.random() < 0.5:
        out.append(p.decl(r.choice(["param", "param", "embedding"]), ["D"], depth))
        out.append(ind + f"{r.choice(['rmsnorm_D', 'layernorm_D'])} {x}, {p.t('bf16', 'D')} -> {x}")
    if r.random() < 0.6:
        out.append(p.decl("param", ["D", "F"], depth))
        out.append(p.decl("param", ["F", "D"], depth))
    if r.random() < 0.3:
        out.append(ind + "fused {")
        out.append(ind + p.indent + f"{x} *_D {p.t('bf16', 'D', 'F')} -> {h}")
        out.append(ind + p.indent + f"{r.choice(['gelu', 'silu', 'relu'])}({h}) -> {p.out(h)}")
        out.append(ind + "}")
    else:
        out.append(ind + f"{x} *_D {p.t('bf16', 'D', 'F')} -> {p.out(h)}")
        out.append(ind + f"{r.choice(['gelu', 'silu', 'relu', 'gelu_erf'])}({h}) -> {p.out(h)}")
    if "F" in p.layout:                       # F split over Y: partial sums, then their AllReduce
        axis = p.layout["F"][1:]
        out.append(ind + f"{h} *_F {p.t('bf16', 'F', 'D')} -> {x} {{U_{axis}}}")
        out.append(ind + f"AllReduce_{axis} {x} {{U_{axis}}} -> {p.out(x)}")
    else:
        out.append(ind + f"{h} *_F {p.t('bf16', 'F', 'D')} -> {p.out(x)}")
    return out


def _experts(p: _Prog, depth: int) -> list:
    """A nested repeat: the experts' MLPs inside the layer's."""
    r = p.r
    ind = p.indent * depth
    count = r.choice(["E", "8", "2", "(E)", "E/2", "2*E"])
    if count.startswith(("E", "(", "2*")):
        p.dim("E")
    inner = _mlp(p, depth + 1)
    return [ind + f"repeat {count} {{"] + inner + [ind + "}"]


def _block(p: _Prog, depth: int) -> list:
    """A repeated block's body: attention and an MLP, each in a part now and then, an
    expert block (a repeat within the repeat) now and then."""
    r = p.r
    out = []
    for name, make in (("attention", _attention), ("mlp", _experts if r.random() < 0.2 else _mlp)):
        if r.random() < 0.15:
            continue
        if r.random() < 0.6:
            out.append(p.indent * depth + f"part {r.choice([name, name, 'a', 'Mlp2', 'ß'])} {{")
            out += make(p, depth + 1)
            out.append(p.indent * depth + "}")
        else:
            out += make(p, depth)
    return out or [p.indent * depth + f"{p.x()} + {p.x()} -> {p.x()}"]


def _program_lines(p: _Prog) -> list:
    r = p.r
    if p.mesh:
        p.lines.append("mesh " + p.mesh)
    _lets(p)
    if r.random() < 0.3:
        p.lines.append("")
    if r.random() < 0.8:
        p.lines.append(p.decl("embedding", ["V", "D"], 0, "bf16"))
    p.lines.append(f"gather {p.t('bf16', 'V', 'D')}, {p.t('int32', 'B', *p.seq)} -> {p.x()}")
    p.dim("B", *p.seq)
    count = r.choice(["L", "L", "L", "2", "4", "(L)", "L/2", "2*L", "L + 1", "(L - 1)*2", "1"])
    if "L" in count:
        p.dim("L")
    nested = r.random() < 0.1
    p.lines.append(f"repeat {count} {{" + (r.choice(["", "  # the layers"]) if r.random() < 0.2 else ""))
    if nested:
        p.lines.append(p.indent + "repeat 2 {")
        p.lines += _block(p, 2)
        p.lines.append(p.indent + "}")
    else:
        p.lines += _block(p, 1)
    p.lines.append("}")
    if r.random() < 0.7:
        p.lines.append(p.decl("param", ["D"], 0))
        p.lines.append(f"rmsnorm_D {p.x()}, {p.t('bf16', 'D')} -> {p.x()}")
    if r.random() < 0.7:
        p.lines.append(p.decl("embedding", ["D", "V"], 0))
        p.lines.append(f"{p.x()} *_D {p.t('bf16', 'D', 'V')} -> {p.t('bf16', 'B', *p.seq, 'V')}")
    return p.lines


def _break_program(r, p: _Prog, lines: list) -> list:
    """One structural edit that must be refused, or a near miss a reader may take."""
    lines = list(lines)
    k = r.randint(0, 15)
    closers = [i for i, ln in enumerate(lines) if ln.strip() == "}"]
    fused = [i for i, ln in enumerate(lines) if ln.strip().startswith("fused {") and ln.strip().endswith("{")
             or ln.strip() == "fused {   # the scores stay on chip"]
    lets = [i for i, ln in enumerate(lines) if ln.startswith("let ")]
    decls = [i for i, ln in enumerate(lines) if ln.strip().split(" ", 1)[0] in ("param", "embedding", "cache")]
    if k == 0 and closers:                            # an unclosed block
        del lines[r.choice(closers)]
    elif k == 1:                                      # a '}' too many
        lines.insert(r.randint(0, len(lines)), r.choice(["}", "  }", "}}", "} }"]))
    elif k == 2 and fused:                            # a repeat (or a part) inside a fused block
        i = r.choice(fused)
        lines.insert(i + 1, r.choice(["repeat 2 {", "part inner {", "repeat L {"]))
        lines.insert(i + 3, "}")
    elif k == 3 and lets:                             # a bad let expression
        i = r.choice(lets)
        name = r.choice(["F", "D", "tokens", "L", "X"])
        lines[i] = lines[i] + f", {name} = {r.choice(BAD_LETS)}" if r.random() < 0.5 else f"let {name} = {r.choice(BAD_LETS)}"
    elif k == 4:                                      # a cycle
        lines.insert(0, r.choice(["let P = Q + 1, Q = 2*P", "let D = F/4, F = 4*D", "let A1 = A1", "let X = Y, Y = Z, Z = X",
                                  "let tokens = tokens*2", "let F = 4*D\nlet D = F - 3*D"]))
    elif k == 5 and lets:                             # defined twice
        name = r.choice(["D", "F", "tokens", "H"])
        lines.insert(r.choice(lets) + 1, f"let {name} = {r.choice(['4096', 'N*H', 'B*T', '8'])}")
    elif k == 6 and decls:                            # declared twice
        i = r.choice(decls)
        lines.insert(i + r.randint(0, 3), lines[i])
    elif k == 7 and decls:                            # an unknown dtype
        i = r.choice(decls)
        lines[i] = re.sub(r":\s*\w+\[", ": " + r.choice(DTYPE_NEAR + ["bf61", "float", "", "int"]) + "[", lines[i], count=1)
    elif k == 8:                                      # a broken declaration
        lines.insert(r.randint(0, len(lines)), r.choice(BAD_DECLS))
    elif k == 9:                                      # a broken repeat line
        i = r.randint(0, len(lines))
        lines.insert(i, r.choice(BAD_REPEATS))
        if r.random() < 0.5:
            lines.insert(r.randint(i + 1, len(lines)), "}")
    elif k == 10:                                     # a broken part line
        i = r.randint(0, len(lines))
        lines.insert(i, r.choice(BAD_PARTS))
        if r.random() < 0.5:
            lines.insert(r.randint(i + 1, len(lines)), "}")
    elif k == 11:                                     # let lines out of the ordinary
        lines.insert(r.randint(0, len(lines)), r.choice(["let", "let ,", "let D = 4096,", "let = 3", "let F 4",
                                                         "let 4F = D", "let D = 4096 # width", "let D=4096,F=4*D",
                                                         "let tokens = B*T*0", "let B = 0", "let ℌ = 2", "let B = 4", "let T = 128",
                                                         "let S = 2*T", "let tokens = B*S", "let L = 0",
                                                         "let D = 4096; let F = 4", "let D_X = 2", "letD = 4"]))
    elif k == 12:                                     # a statement broken
        stmts = [i for i, ln in enumerate(lines) if "->" in ln]
        if stmts:
            i = r.choice(stmts)
            lines[i] = mutate(r, lines[i])
    elif k == 13:                                     # the block's lines on one line
        lines = [" ".join(lines)] if r.random() < 0.3 else [ln.strip() for ln in lines]
    elif k == 14:                                     # a mesh, or a statement outside the grammar
        lines.insert(r.randint(0, len(lines)), r.choice(["mesh X=2", "AllReduce_X bf16[B, D] -> bf16[B, D]",
                                                         "bf16[B, D_X] -> bf16[B, D_X]", "$", "{", "{U_X}"]))
    else:                                             # a repeat's or part's '{' on the next line
        opens = [i for i, ln in enumerate(lines) if ln.rstrip().endswith("{") and ln.strip().split(" ")[0] in
                 ("repeat", "part")]
        if opens:
            i = r.choice(opens)
            lines[i] = lines[i].rstrip()[:-1].rstrip()
            lines.insert(i + 1, "{")
    return lines


def gen_program(r) -> tuple[str, _Prog]:
    """A program with structure, valid in a clean case; broken or mutated in a noisy one."""
    p = _Prog(r)
    lines = _program_lines(p)
    if r.random() < 0.1:
        lines.insert(r.randint(0, len(lines)), "# " + r.choice(["a comment", "repeat L {", "}", "let D = 0"]))
    if junk(r, 0.6):
        for _ in range(r.randint(1, 2)):
            lines = _break_program(r, p, lines)
    text = "\n".join(lines) + r.choice(["\n", "\n", "", "\n\n"])
    x = r.random()
    if x < 0.05:
        text = text.replace("\n", "\r\n")
    elif x < 0.08:
        text = "\ufeff" + text
    elif x < 0.1:
        text = text.replace("[", "［").replace("]", "］")
    if junk(r, 0.15):
        text = mutate(r, text)
    return text, p


def gen_plan(r) -> Case:
    """`symroof plan MODEL`: a model, a chip, chips and a batch (good, or junk), a mode."""
    name = r.choice(model_names()) if not junk(r, 0.1) else r.choice(MODEL_NEAR + MODEL_JUNK)
    argv = ["plan", name] + _mode_flags(r)
    if not junk(r, 0.05):
        argv += ["--chip", r.choice(["tpu-v5p", "h100", "tpu-v5e", "b200", "gb200"]) if not junk(r, 0.1)
                 else r.choice(CHIP_JUNK)]
    argv += ["--chips", r.choice(["1", "2", "8", "16", "64"]) if not junk(r, 0.15)
             else r.choice(["0", "-4", "1e9", "x", "3", "100000", ""])]
    argv += ["--batch", r.choice(["8", "64", "64k", "128k", "512k"]) if not junk(r, 0.15)
             else r.choice(["0", "1000", "-1", "abc", "1e30", ""])]
    if r.random() < 0.3:
        argv += ["--context", r.choice(["1024", "2048", "4096"]) if not junk(r, 0.2) else r.choice(["0", "7", "x"])]
    if r.random() < 0.2:
        argv += ["--top", r.choice(["1", "3", "100"]) if not junk(r, 0.2) else r.choice(["0", "-1", "x", "1e9"])]
    if r.random() < 0.1:
        argv += ["--slice", r.choice(["2x2x2", "4x4x4", "2x2x1", "4x8x8"]) if not junk(r, 0.2)
                 else r.choice(["0x2x2", "2x2", "axbxc", "99999x2x2", ""])]
    if r.random() < 0.1:
        argv += ["--remat", r.choice(["full", "none", "save=x,o,h"]) if not junk(r, 0.2) else r.choice(["half", "save="])]
    if r.random() < 0.05:
        argv += ["--symbolic"] + (["--optimize"] if r.random() < 0.5 else [])
    x = r.random()
    if x < 0.35:
        argv.append("--json")
    elif x < 0.5:
        argv.append("--latex")
    if r.random() < 0.03:
        argv += [r.choice(["--json", "--latex"])]
    return Case(argv, kind="plan")


def gen_model_file(r) -> Case:
    """`symroof model FILE`: a program file with structure (lets, repeat blocks, nested
    ones, parts, declarations, fused blocks), valid or broken, with the model's flags."""
    text, p = gen_program(r)
    data = text.encode("utf-8", "surrogatepass")
    if junk(r, 0.04):
        data = r.choice([b"", b"\xff\xfe" + data, data[: len(data) // 2] + b"\xe9" + data[len(data) // 2:],
                         b"\x00" * 10, data + b"\x80"])
    name = r.choice(["prog.sr", "prog.sr", "prog.sr", "prog.txt", "prog", "my model.sr", "ü.sr"])
    path = "{tmp}/" + name
    if junk(r, 0.04):
        path = r.choice(["{tmp}/missing.sr", "{tmp}", "{tmp}/", "prog.sr", "{tmp}/prog.sr/x.sr", "/dev/null"])
    mode_flags = _mode_flags(r)
    if p.decode and r.random() < 0.7 and not any(f == "--decode" for f in mode_flags):
        mode_flags = ["--decode"]
    argv = ["model", path] + mode_flags
    if r.random() < 0.04:
        argv.append("--print")
    else:
        argv += _model_flags(r, p.dims, p.known, _mode_of(mode_flags), named=False, tensors=p.tensors,
                             chip_p=0.85 if p.mesh else 0.6, mesh=bool(p.mesh))
    if r.random() < 0.3:
        argv = _shuffle_flags(r, argv)
    return Case(argv, files={name: data, **_hardware_files(r, argv)}, kind="model-file")


ROUNDTRIP_KEYS = ("params", "params_embedding", "params_per_block", "tokens", "flops", "flops_per_token",
                  "flops_train", "weight_bytes", "grad_bytes", "optimizer_bytes", "activation_bytes", "kv_bytes",
                  "kv_bytes_per_token", "memory_bytes", "hbm_per_chip", "t_step")


def gen_model_print(r) -> Case:
    """`symroof model NAME --print`, the printed program passed back as a FILE: its --json
    must give what the model's own --json gives (params first of all) at the same sizes."""
    name = r.choice(model_names())
    mode_flags = [r.choice(["--train", "--prefill", "--decode"])] if r.random() < 0.8 else []
    mode = _mode_of(mode_flags)
    stored = []
    for flag in ("--weights", "--kv"):
        if r.random() < 0.3:
            stored += [flag, r.choice(["int8", "fp8", "bf16", "fp8_e4m3", "fp16"])]
    sizes = f"B={r.choice(['1', '4', '32'])},{'S' if mode == 'decode' else 'T'}={r.choice(['128', '2048', '4096'])}"
    common = mode_flags + ["--set", sizes, "--json"]
    if r.random() < 0.5:
        common += ["--chip", r.choice(["h100", "a100-sxm-80gb", "b200", "symbolic", "mi300x"])]
        if r.random() < 0.3:
            common += ["--chips", r.choice(["2", "8", "64"])]
    printed = ["model", "{tmp}/printed.sr"] + common
    named = ["model", name] + stored + common
    return Case(["model", name, "--print"] + mode_flags + stored, kind="model-print", followups=(printed, named))


# ----------------------------------------------------------------------------- from-jax

# modules a user points from-jax at: functions it costs, and modules that fail on import,
# functions that fail when traced, and what is not a function at all
_JAX_MODULES = {
    "matmul": ("import jax.numpy as jnp\n\ndef f(x, w):\n    return x @ w\n", "x=bf16[B, D]; w=bf16[D, F]", "w"),
    "mlp": ("import jax\n\ndef f(x, w1, w2):\n    return jax.nn.gelu(x @ w1) @ w2\n",
            "x=bf16[B, D]; w1=bf16[D, F]; w2=bf16[F, D]", "w1,w2"),
    "softmax": ("import jax\n\ndef f(x):\n    return jax.nn.softmax(x, axis=-1)\n", "x=fp32[B, T]", ""),
    "norm": ("import jax\nimport jax.numpy as jnp\n\ndef f(x, g):\n"
             "    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g\n",
             "x=fp32[B, D]; g=fp32[D]", "g"),
    "scan": ("import jax\nimport jax.numpy as jnp\n\ndef f(x, w):\n    def body(c, _):\n"
             "        return jnp.tanh(c @ w), None\n    return jax.lax.scan(body, x, None, length=4)[0]\n",
             "x=fp32[B, D]; w=fp32[D, D2]", "w"),
    "gather": ("import jax.numpy as jnp\n\ndef f(table, ids):\n    return table[ids]\n",
               "table=bf16[V, D]; ids=int32[B, T]", "table"),
    "sort": ("import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sort(x, axis=-1) * 2\n", "x=fp32[B, T]", ""),
    "raises": ("raise ValueError('boom')\n", "x=bf16[B, D]", ""),
    "runtime": ("raise RuntimeError('no device')\n", "x=bf16[B, D]", ""),
    "syntax": ("def f(:\n    pass\n", "x=bf16[B, D]", ""),
    "exits": ("import sys\nsys.exit(3)\n", "x=bf16[B, D]", ""),
    "traced_error": ("def f(x):\n    raise ValueError('bad input')\n", "x=bf16[B, D]", ""),
    "not_array": ("def f(x):\n    return 'text'\n", "x=bf16[B, D]", ""),
    "not_function": ("f = 3\n", "x=bf16[B, D]", ""),
    "shape_error": ("import jax.numpy as jnp\n\ndef f(x, w):\n    return x @ w.T\n", "x=bf16[B, D]; w=bf16[D, F]", ""),
}


def gen_from_jax(r) -> Case:
    """`symroof from-jax FILE:FUNCTION`: a module of the kinds above, shapes as written or
    mutated, weights, sizes, a chip, the XLA check, -o; or a target that is not one."""
    kind = r.choice(list(_JAX_MODULES))
    source, shapes, params = _JAX_MODULES[kind]
    files = {"m.py": source.encode()}
    target = "{tmp}/m.py:f"
    if junk(r, 0.12):
        target = r.choice(["..x:f", "{tmp}/m.py", "{tmp}/m.py:", ":f", "{tmp}/missing.py:f", "{tmp}/m.py:g",
                           "/dev/zero:f", "{tmp}:f", "{tmp}/m.py:f:g", "os:getcwd", "json:loads", "m:f",
                           "{tmp}/fifo.py:f", "\u202e.py:f", "{tmp}/m.txt:f"])
        if target == "{tmp}/fifo.py:f":
            files["fifo.py"] = FIFO
    if junk(r, 0.2):
        shapes = mutate(r, shapes) if r.random() < 0.7 else r.choice(
            ["", ";", "x=", "x=bf16[B, D]; x=bf16[B, D]", "x=bf16[B, D", "y=bf16[B, D]", "x=bf17[B, D]",
             "x=bf16[B, 0]", "x=bf16[B, -1]", "x=bf16[" + ", ".join(f"D{k}" for k in range(80)) + "]",
             "x=bf16[B, " + "9" * 5000 + "]"])
    argv = ["from-jax", target, "--shapes", shapes]
    if params and r.random() < 0.7:
        argv += ["--params", params if not junk(r, 0.15) else r.choice(["nope", "w,w", "", "x,w"])]
    dims = sorted(set(re.findall(r"\b([A-Z][A-Z0-9]*)\b", shapes)) - {"bf16", "fp32", "int32"})
    if dims and r.random() < 0.6:
        sizes = [f"{d}={r.choice([8, 16, 64, 128, 512])}" for d in dims]
        if junk(r, 0.15):
            sizes = [r.choice(["B=0", "B=-1", "Q=4", "B=x", "B=1e40", "B=" + "9" * 30])]
        argv += ["--set", ",".join(sizes)]
        if r.random() < 0.08 and not junk(r, 0.0):
            argv.append("--xla")
    if r.random() < 0.5:
        argv += ["--chip", r.choice(["h100", "tpu-v5e", "v5p", "a100"]) if not junk(r, 0.1) else r.choice(CHIP_JUNK)]
    if r.random() < 0.1:
        argv += ["--max", r.choice(["T=64", "B=8", "T=0", "T=x", "Q=3"])]
    if r.random() < 0.3:
        argv.append("--json")
    if r.random() < 0.15:
        argv += ["-o", r.choice(["{tmp}/out.sr", "{tmp}/out.sr", "{tmp}/nodir/out.sr", "/dev/full"])]
    return Case(argv, files=files, kind="from-jax")


# ----------------------------------------------------------------------------- data files

# what a file option may be pointed at besides a file: devices, a folder, a FIFO (which
# blocks a reader forever), a file past every size limit
_SPECIAL_PATHS = ["/dev/zero", "/dev/urandom", "/dev/null", "/dev/full", "{tmp}", "{tmp}/fifo", "{tmp}/big",
                  "{tmp}/missing", "/etc/passwd"]


def gen_data_file(r) -> Case:
    """A data file given to the command that reads it: hardware.json (--hardware), models.json
    (--models), a claims file (check), a program file (model), or a special path in its place."""
    which = r.choice(["hardware", "models", "claims", "program"])
    files: dict = {}
    if which == "hardware":
        files["data"] = _hardware_file(r)
        argv = r.choice([["chips", "--hardware", "{tmp}/data"], ["chip", "h100", "--hardware", "{tmp}/data"],
                         ["analyze", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "--chip", "h100", "--hardware",
                          "{tmp}/data"]])
    elif which == "models":
        files["data"] = _models_file(r)
        argv = r.choice([["models", "--models", "{tmp}/data"],
                         ["model", r.choice(model_names()), "--models", "{tmp}/data"],
                         ["plan", r.choice(model_names()), "--chip", "h100", "--chips", "8", "--batch", "64k",
                          "--models", "{tmp}/data"]])
    elif which == "claims":
        files["data"] = gen_claims_file(r)
        argv = ["check", "{tmp}/data"]
    else:
        text, _ = gen_program(r)
        files["data"] = text.encode("utf-8", "surrogatepass")
        argv = ["model", "{tmp}/data"]
    if r.random() < 0.25:  # the file swapped for a path that is not one
        special = r.choice(_SPECIAL_PATHS)
        argv = [special if a == "{tmp}/data" else a for a in argv]
        if special == "{tmp}/fifo":
            files["fifo"] = FIFO
        elif special == "{tmp}/big":
            files["big"] = b"[" + b"0," * (6 * 2**20) + b"0]"
    return Case(argv, files=files, kind="data")


def gen_case(r, weights=None) -> Case:
    """Any case; `weights` maps subcommand kinds to relative weights."""
    weights = weights or DEFAULT_WEIGHTS
    _NOISE[0] = 0.0 if r.random() < 0.45 else 1.0
    kinds, ws = zip(*weights.items())
    x = r.random() * sum(ws)
    for kind, w in zip(kinds, ws):
        x -= w
        if x < 0:
            break
    return GENERATORS[kind](r)


GENERATORS = {
    "analyze": lambda r: gen_analyze(r, json_out=False),
    "analyze-json": lambda r: gen_analyze(r, json_out=True),
    "latex": lambda r: gen_analyze(r, latex=True),
    "roofline": gen_roofline,
    "check": gen_check,
    "chips": gen_chips,
    "chip": gen_chip,
    "plot": gen_plot,
    "junk": gen_junk_argv,
    "extreme": gen_extreme,
    "hardware": gen_hardware_edge,
    "ops": gen_ops,
    "model": gen_model,
    "model-file": gen_model_file,
    "model-print": gen_model_print,
    "plan": gen_plan,
    "from-jax": gen_from_jax,
    "data": gen_data_file,
}
DEFAULT_WEIGHTS = {"analyze": 22, "analyze-json": 27, "latex": 14, "roofline": 8, "check": 11,
                   "chips": 1.5, "chip": 5, "plot": 1, "junk": 3, "extreme": 8,
                   "hardware": 3, "ops": 14, "model": 6, "model-file": 6, "model-print": 1, "plan": 1,
                   "from-jax": 2, "data": 3}


# ----------------------------------------------------------------------------- running

class Hang(BaseException):
    """Raised by the alarm: a BaseException, so `main`'s `except Exception` lets it through."""


@dataclass
class Result:
    code: object                  # int, or None where an exception escaped main
    out: str
    err: str
    sys_out: str                  # what went to sys.stdout / sys.stderr (argparse, stray prints)
    sys_err: str
    exception: BaseException | None = None
    tb: str = ""
    seconds: float = 0.0
    files: dict = field(default_factory=dict)   # output file name -> size, for plots
    steps: list = field(default_factory=list)   # the Results of the case's followups


def _on_alarm(signum, frame):
    raise Hang()


def run_case(case: Case, tmp: str, deadline: float = 30.0) -> Result:
    """Run one case in-process under an alarm (main thread only); write its files first."""
    from symroof.cli.command import main
    import sys

    for name, data in case.files.items():
        if data is FIFO:
            os.mkfifo(Path(tmp, name))
        else:
            Path(tmp, name).write_bytes(data)
    argv = case.concrete(tmp)
    out, err, sys_out, sys_err = io.StringIO(), io.StringIO(), io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(case.stdin or b""), encoding="utf-8")
    old_stdin = sys.stdin
    old_handler = None
    use_alarm = deadline and hasattr(signal, "SIGALRM")
    code, exc, tb = None, None, ""
    start = time.perf_counter()
    try:
        sys.stdin = stdin
        if use_alarm:
            old_handler = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, deadline)
        with contextlib.redirect_stdout(sys_out), contextlib.redirect_stderr(sys_err):
            try:
                code = main(argv, out=out, err=err)
            except SystemExit as e:
                code = ("SystemExit", e.code)
    except BaseException as e:  # noqa: BLE001 - the point is to see everything
        exc = e
        tb = traceback.format_exc()
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler or signal.SIG_DFL)
        sys.stdin = old_stdin
    seconds = time.perf_counter() - start
    files = {}
    if case.kind == "plot" or "-o" in argv or "--output" in argv:
        for p in Path(tmp).rglob("*"):
            if p.is_file() and p.name not in case.files:
                files[str(p.relative_to(tmp))] = p.stat().st_size
    res = Result(code, out.getvalue(), err.getvalue(), sys_out.getvalue(), sys_err.getvalue(),
                 exc, tb, seconds, files)
    if case.followups and code == 0 and exc is None:
        Path(tmp, "printed.sr").write_text(res.out, encoding="utf-8")
        for then in case.followups:
            res.steps.append(run_case(Case(list(then), kind=case.kind), tmp, deadline))
    return res


# ----------------------------------------------------------------------------- the property

_CARET = re.compile(r"^[ ^]*\^[ ^]*$")
_WORDS = {"compute", "memory", "network", "balanced", "never", "always", "oo", "-oo"}
# keys whose string values are expressions (sympy.parse_expr must read them back)
EXPR_KEYS = {"flops", "flops_exact", "bytes", "bytes_read", "bytes_written", "intensity", "intensity_exact",
             "t_math", "t_comms", "t_lower", "t_upper", "achieved_flops_per_s", "bound", "flops_total",
             "replication", "t_network", "t_network_latency", "network_bytes", "network_intensity",
             "critical_network_intensity", "critical_intensity", "intensity_limit", "rule", "exact",
             "condition", "t", "t_bandwidth", "t_latency", "past_latency", "latency_floor",
             "peak_flops_per_s", "hbm_bandwidth_bytes_per_s", "transcendentals", "flops_vector", "t_vector"}


def _strict_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def _strict_json(text: str):
    return json.loads(text, parse_constant=_strict_constant)


def _check_expressions(obj, symbols: dict, where="") -> str | None:
    """Every expression string in the object (by key) reads back through parse_expr."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    if isinstance(obj, dict):
        if isinstance(obj.get("symbols"), dict):
            symbols = {**symbols, **{n: sympy.Symbol(n, positive=True, integer=True) for n in obj["symbols"]}}
        for k, v in obj.items():
            if isinstance(v, float) and not math.isfinite(v):
                return f"{where}.{k} is {v}"
            if k in EXPR_KEYS and isinstance(v, str) and v not in _WORDS:
                try:
                    e = parse_expr(v, local_dict=dict(symbols))
                except Exception as error:  # noqa: BLE001
                    return f"{where}.{k} = {v!r} does not read back: {type(error).__name__}: {error}"
                free = {str(x) for x in getattr(e, "free_symbols", ())}
                if not free <= set(symbols):
                    return f"{where}.{k} = {v!r} has names not in symbols: {sorted(free - set(symbols))}"
            elif isinstance(v, (dict, list)):
                bad = _check_expressions(v, symbols, f"{where}.{k}")
                if bad:
                    return bad
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            bad = _check_expressions(v, symbols, f"{where}[{i}]")
            if bad:
                return bad
    return None


# what a model's --json holds as text, not as an expression
_MODEL_TEXT_KEYS = {"model", "name", "mode", "chip", "conventions", "kind", "tensor", "pass", "axes", "source",
                    "schedule", "notes", "not_computed",  # these two: a parameter-count model's words
                    "storage",  # the weights' and KV cache's formats and their scales (models/quant.py)
                    "strategy_notes",  # each kind's words on how it runs (Megatron sequence parallelism)
                    "convention", "defaulted",  # gradient accumulation's words; the sizes a model defaulted
                    "memory"}  # latency_bound's words on memory (no latency figure)
_MODEL_FUNCTIONS = {"Max", "Min", "ceiling", "floor", "sqrt", "Abs", "log", "exp", "Piecewise", "oo", "Rational",
                    "Integer", "Float"}


def _model_expressions(obj, where="") -> str | None:
    """Every string in a model's --json that is not text reads back through parse_expr
    (each name a dim, or a function of sympy's), to an expression with no nan or zoo."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _MODEL_TEXT_KEYS and (isinstance(v, str) or v is None or k in ("conventions", "notes",
                                                                                     "not_computed", "storage",
                                                                                     "strategy_notes")):
                continue
            bad = _model_expressions(v, f"{where}.{k}")
            if bad:
                return bad
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            bad = _model_expressions(v, f"{where}[{i}]")
            if bad:
                return bad
    elif isinstance(obj, float) and not math.isfinite(obj):
        return f"{where} is {obj}"
    elif isinstance(obj, str) and obj not in _WORDS:
        names = set(re.findall(r"[^\W\d]\w*", obj)) - _MODEL_FUNCTIONS
        local = {n: sympy.Symbol(n, positive=True) for n in names}
        try:
            e = parse_expr(obj, local_dict=local)
        except Exception as error:  # noqa: BLE001
            return f"{where} = {obj[:200]!r} does not read back: {type(error).__name__}: {str(error)[:100]}"
        if not isinstance(e, sympy.Expr):
            return f"{where} = {obj[:200]!r} reads back as a {type(e).__name__}, not an expression"
        if e.has(sympy.nan, sympy.zoo):
            return f"{where} = {obj[:200]!r} holds nan or zoo"
    return None


# a model's quantities that are never negative, nor nan (JSON null): counts, bytes, times, rates
MODEL_NONNEGATIVE = ("params", "params_embedding", "params_per_block", "tokens", "flops", "flops_per_token",
                     "flops_train", "flops_train_per_token", "weight_bytes", "grad_bytes", "optimizer_bytes",
                     "activation_bytes", "kv_bytes", "kv_bytes_per_token", "memory_bytes", "hbm_per_chip",
                     "min_chips", "t_step", "tokens_per_s", "tokens_per_s_per_chip", "days_to_train",
                     "memory_per_chip", "t_step_exposed", "t_comm_exposed")


def _model_signs(data: dict, where="") -> str | None:
    """A quantity that must be >= 0 given as null (nan), a negative number, or an
    expression negative for every positive value of its symbols."""
    for key in MODEL_NONNEGATIVE:
        v = data.get(key, 0)
        if v is None or isinstance(v, (int, float)) and v < 0 or isinstance(v, str) and _negative(v):
            return f"{key} negative or nan in --json: {where}{key} is {v!r} (a count, size, time or rate is >= 0)"
    return None


def _negative(text: str) -> bool:
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    if text in _WORDS:
        return text == "-oo"
    names = set(re.findall(r"[^\W\d]\w*", text)) - _MODEL_FUNCTIONS
    try:
        e = parse_expr(text, local_dict={n: sympy.Symbol(n, positive=True) for n in names})
    except Exception:  # noqa: BLE001 - _model_expressions reports what does not read back
        return False
    return isinstance(e, sympy.Expr) and e.is_negative is True


def _judge_model(case: Case, res: Result) -> str | None:
    """A model's output: with --print a program (text), with --json one strict JSON object
    whose expressions read back and whose counts, sizes, times and rates are numbers >= 0,
    else a table with no nan or zoo and no such figure negative; with --batches and -o, the
    plot written."""
    argv = case.argv
    if "--print" in argv or "--latex" in argv:  # a program; LaTeX (judged as LaTeX)
        return None
    if "--json" in argv:
        try:
            data = _strict_json(res.out)
        except ValueError as error:
            return f"--json output is not strict JSON: {error}"
        if not isinstance(data, dict):
            return f"model --json is a {type(data).__name__}, not an object"
        bad = _model_expressions(data)
        if bad:
            return f"--json expression: {bad}"
        bad = _model_signs(data)
        if bad:
            return bad
        rows = data.get("batches")
        if "--batches" in argv and not isinstance(rows, list):
            return "model --batches --json without a list of batches"
        for row in rows or ():
            bad = _model_signs(row, f"batches[B={row.get('B')}].") if isinstance(row, dict) else \
                f"a batch row in --json that is not an object: {row!r}"
            if bad:
                return bad
    else:
        body = res.out.split("\n", 1)[-1]            # the first line echoes the name and the sizes
        if re.search(r"\b(nan|zoo)\b", body):
            return "model output shows nan/zoo"
        for line in body.splitlines():
            name, _, value = line.partition(" ")
            if name in MODEL_NONNEGATIVE and re.match(r"-\s*[0-9]", value.strip()):
                return f"{name} negative in the table: {line.strip()[:120]!r} (a count, size, time or rate is >= 0)"
    for flag in ("-o", "--output"):
        if flag in argv[:-1] and "--batches" in argv:
            name = argv[argv.index(flag) + 1].replace("{tmp}/", "", 1)
            if res.files.get(name, 0) <= 0:
                return f"model --batches -o exit 0 but {name!r} not written (wrote {res.files})"
    return None


def _balanced(tex: str) -> bool:
    t = tex.replace("\\\\", "").replace("\\{", "").replace("\\}", "")
    depth = 0
    for c in t:
        depth += (c == "{") - (c == "}")
        if depth < 0:
            return False
    return depth == 0 and t.count("\\left") == t.count("\\right") and \
        t.count("\\begin{") == t.count("\\end{")


def judge(case: Case, res: Result, katex: KaTeX | None = None) -> str | None:
    """None if the invocation satisfies the property, else what is wrong (one line first).
    With `katex`, LaTeX output must also render through KaTeX (strict), as docs sites do.
    A case with followups: each of them too, and what they print must agree."""
    problem = _judge_one(case, res, katex)
    if problem is not None or not case.followups or not res.steps:
        return problem
    for k, (then, step) in enumerate(zip(case.followups, res.steps)):
        problem = _judge_one(Case(list(then), kind=case.kind), step, katex)
        if problem is not None:
            return f"--print round trip, run {k + 1} ({' '.join(then[:2])}): {problem}"
    return _same_model(case, res.steps)


def _same_model(case: Case, steps: list) -> str | None:
    """The printed program (steps[0]) and the named model (steps[1]) give the same figures."""
    (printed, named) = steps[:2]
    if printed.code != named.code:
        first = (printed.err or named.err).strip().splitlines()[:1]
        return (f"--print round trip: the printed program exits {printed.code}, the model itself "
                f"{named.code}: {first[0][:200] if first else ''}")
    if printed.code != 0:
        return None
    a, b = _strict_json(printed.out), _strict_json(named.out)
    if "params" not in a or "params" not in b:
        return f"--print round trip: no params in --json ({sorted(a)[:8]} / {sorted(b)[:8]})"
    for key in ROUNDTRIP_KEYS:
        if key not in a and key not in b:
            continue
        x, y = a.get(key), b.get(key)
        if x == y or (isinstance(x, float) and isinstance(y, (int, float)) and math.isclose(x, y, rel_tol=1e-9)):
            continue
        return f"--print round trip: {key} differs: the printed program gives {x!r}, the model {y!r}"
    return None


def _judge_one(case: Case, res: Result, katex: KaTeX | None = None) -> str | None:
    argv = case.argv
    cmd = argv[0] if argv else ""
    if isinstance(res.exception, Hang):
        return f"hang: no answer within the deadline ({res.seconds:.1f} s)"
    if res.exception is not None:
        return f"exception escaped main: {type(res.exception).__name__}: {str(res.exception)[:200]}"
    if isinstance(res.code, tuple):                  # SystemExit from argparse (or --help/--version)
        code = res.code[1]
        if code in (0, None):
            return None
        lines = res.sys_err.rstrip("\n").split("\n")
        if code == 2 and len(lines) == 1 and re.match(r"symroof[\w -]*: error: .*--help lists the flags\)$", lines[0]):
            return None
        return f"SystemExit({code!r}) without an argparse usage error: {res.sys_err[:200]!r}"
    code = res.code
    if res.sys_err.strip() or res.sys_out.strip():
        return f"wrote to sys.stdout/sys.stderr directly: {(res.sys_err or res.sys_out)[:200]!r}"
    if code == 3:
        return f"exit 3: {res.err.strip()[:300]}"
    if code == 2:
        lines = res.err.rstrip("\n").split("\n")
        if not lines[0].startswith("symroof: error:"):
            return f"exit 2 without 'symroof: error:' first: {res.err[:200]!r}"
        if len(lines) == 1:
            pass
        elif len(lines) == 3 and _CARET.match(lines[2]):
            pass
        elif len(lines) == 3 and re.fullmatch(r"[\s^]*\^[\s^]*", lines[2]):
            return f"caret line with whitespace other than spaces: {lines[2]!r} under {lines[1]!r}"
        else:
            return f"exit 2 with an error of {len(lines)} lines (want 1, or 3 with a caret line): {res.err[:300]!r}"
        if res.out.strip():
            return f"exit 2 but wrote to stdout: {res.out[:200]!r}"
        if "Traceback" in res.err:
            return "a traceback on stderr"
        return None
    if code == 1:
        if cmd != "check":
            return f"exit 1 from {cmd!r} (only check may exit 1)"
    elif code != 0:
        return f"exit code {code!r}"
    for line in res.err.splitlines():
        if not line.startswith("symroof: warning:"):
            return f"exit {code} with stderr that is not a warning: {line[:200]!r}"
    text = res.out
    if not text.strip():
        return f"exit {code} with empty output"
    if "--json" in argv[1:] and cmd in ("analyze", "roofline", "check", "chips", "chip", "plan", "from-jax",
                                        "models"):
        try:
            data = _strict_json(text)
        except ValueError as error:
            return f"--json output is not strict JSON: {error}"
        if cmd in ("analyze", "roofline"):
            bad = _check_expressions(data, {})
            if bad:
                return f"--json expression: {bad}"
        elif cmd == "check":
            if not isinstance(data, list):
                return "check --json is not a list"
    if cmd == "latex" or (cmd in ("model", "plan") and "--latex" in argv):
        if not _balanced(text):
            return "latex output with unbalanced braces (or \\left/\\right, \\begin/\\end)"
        if re.search(r"\b(nan|zoo)\b", text) and not re.search(r"nan|zoo", " ".join(map(str, argv))):
            return "latex output with nan/zoo"
        if katex is not None:
            complaint = katex.problem(text)
            if complaint:
                return f"KaTeX cannot render the output: {complaint}"
    if cmd == "plot":
        wrote = {k: v for k, v in res.files.items() if v > 0}
        if not wrote:
            return f"plot exit 0 but no non-empty file written: {res.files}"
    if cmd == "model":
        bad = _judge_model(case, res)
        if bad:
            return bad
    said = " ".join(a for a in argv if isinstance(a, str))
    if cmd in ("analyze", "roofline") and "--json" not in argv and re.search(r"\b(nan|zoo)\b", text) \
            and not re.search(r"\b(nan|zoo)\b", said):
        return "text output shows nan/zoo"
    return None


def failure_key(case: Case, res: Result, problem: str) -> str:
    """What makes two failures the same bug: the exception type and the innermost symroof
    frame when there is a traceback, else the kind of problem."""
    tb = res.tb
    etype = type(res.exception).__name__ if res.exception is not None else ""
    if not tb and res.code == 3:
        m = re.match(r"symroof: internal error: (\w+)", res.err)
        etype = m[1] if m else "?"
    if tb and not etype:
        last = [line for line in tb.strip().splitlines() if line and not line.startswith(" ")]
        m = re.match(r"([\w.]+)", last[-1]) if last else None
        etype = m[1].rsplit(".", 1)[-1] if m else "?"
    if tb:
        frames = re.findall(r'File "([^"]*symroof[/\\][^"]+)", line (\d+), in (\S+)', tb)
        if frames:
            f, line, fn = frames[-1]
            return f"{etype} at {Path(f).name}:{fn}"
    head = problem.split(":")[0]
    if head.startswith("caret line"):
        return head
    if head.startswith("KaTeX"):
        why = problem.split("KaTeX parse error:")[-1].split(" at position")[0]
        why = why.replace("LaTeX-incompatible input and strict mode is set to 'error': ", "")
        return "KaTeX: " + re.sub(r'"[^"]*"|\([0-9]+\)|\s+', lambda m: " " if m[0].isspace() else "…",
                                  why).strip()[:100]
    if head.startswith("exit 3"):
        return f"exit 3 {etype}"
    return f"{case.argv[0] if case.argv else ''}: {re.sub(r'[0-9]+', 'N', head)[:80]}"


def debug_traceback(case: Case, tmp: str, deadline: float = 30.0) -> str:
    """Run a case again with SYMROOF_DEBUG=1 to get the traceback of an internal error."""
    old = os.environ.get("SYMROOF_DEBUG")
    os.environ["SYMROOF_DEBUG"] = "1"
    try:
        res = run_case(case, tmp, deadline)
    finally:
        if old is None:
            os.environ.pop("SYMROOF_DEBUG", None)
        else:
            os.environ["SYMROOF_DEBUG"] = old
    return res.tb


def check_case_property(case: Case, tmp: str, deadline: float = 30.0,
                        katex: KaTeX | None = None) -> tuple[str | None, Result]:
    res = run_case(case, tmp, deadline)
    return judge(case, res, katex), res


# ----------------------------------------------------------------------------- shrinking

def _writes_outside(case: Case) -> bool:
    """An output file (-o) named anywhere but in the case's folder: a candidate the
    shrinker made by dropping the path after -o, which would write into the current folder."""
    argv = [a for a in case.argv if isinstance(a, str)]
    return any(a in ("-o", "--output") and (i + 1 >= len(argv) or "{tmp}" not in argv[i + 1])
               for i, a in enumerate(argv)) or any(a.startswith(("-o", "--output=")) and len(a) > 2 and
                                                   "{tmp}" not in a and a != "--output" for a in argv)


def shrink(case: Case, tmp_factory, key_of, budget_s: float = 20.0) -> Case:
    """Greedy: drop flags, then characters of the spec and of claims files, while the
    failure keeps its key. `tmp_factory()` gives a fresh folder; `key_of(case) -> key|None`."""
    target = key_of(case)
    start = time.perf_counter()

    def same(c):
        if time.perf_counter() - start > budget_s or _writes_outside(c):
            return False
        return key_of(c) == target

    best = case
    # 1. drop flags (with their values)
    changed = True
    while changed:
        changed = False
        for i in range(1, len(best.argv)):
            for width in (2, 1):
                if i + width > len(best.argv):
                    continue
                argv = best.argv[:i] + best.argv[i + width:]
                c = dataclasses.replace(best, argv=argv)
                if same(c):
                    best, changed = c, True
                    break
            if changed:
                break
    # 2. shrink the longest argument that is not a flag (the spec), by chunks, then by chars
    for idx in sorted(range(1, len(best.argv)), key=lambda i: -len(best.argv[i])):
        s = best.argv[idx]
        if s.startswith("-") or len(s) < 2 or "{tmp}" in s:   # a path: never one outside {tmp}
            continue
        chunk = max(1, len(s) // 2)
        while chunk >= 1:
            i = 0
            while i < len(s):
                t = s[:i] + s[i + chunk:]
                argv = list(best.argv)
                argv[idx] = t
                c = dataclasses.replace(best, argv=argv)
                if t and same(c):
                    best, s = c, t
                else:
                    i += chunk
            chunk //= 2
        break
    # 3. claims / stdin content, by lines
    for name, data in [(n, d) for n, d in best.files.items() if d is not FIFO]:
        lines = data.split(b"\n")
        i = 0
        while i < len(lines) and len(lines) > 1:
            trial = lines[:i] + lines[i + 1:]
            files = {**best.files, name: b"\n".join(trial)}
            c = dataclasses.replace(best, files=files)
            if same(c):
                best, lines = c, trial
            else:
                i += 1
    # 4. the files' bytes (a program's long line), by chunks
    for name in [n for n, data in best.files.items() if data is not FIFO]:
        data = best.files[name]
        chunk = max(1, len(data) // 2)
        while chunk >= 1 and len(data) > 1:
            i = 0
            while i < len(data):
                trial = data[:i] + data[i + chunk:]
                c = dataclasses.replace(best, files={**best.files, name: trial})
                if trial and same(c):
                    best, data = c, trial
                else:
                    i += chunk
            chunk //= 2
    return best
