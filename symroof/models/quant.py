"""Quantized weights and KV caches: which storage format a `--weights`/`--kv` name means,
whether its blocks divide the model's matrices, and the sentence the report prints about it.

A scheme (dtypes.SCHEMES: one entry each) is a dtype whose bytes per element count its
scales, spread over the block a scale covers: int4_g128 is 1/2 + (2 + 1/2)/128 bytes a
weight. That spread is exact where every block is whole, so a model whose matrices a
block does not divide is refused rather than counted short.

A plain name maps to the scheme a user of it ships (`int4` is AWQ's and GPTQ's int4_g128,
`fp4` the OCP standard's mxfp4): a 4-bit model counted without its scales would read about
4% fewer bytes than any int4 checkpoint holds. `int8` weights have a scale per output
channel, whose share of a weight depends on the matrix's input width: the template writes
each matrix's dtype with its width (int8_pc4096, int8_pc14336). `fp8` stays its elements,
with its one fp32 scale per matrix said in the output and not counted (4 bytes a matrix),
as is a KV cache's per-layer scale (8 bytes a layer, nothing per token).

Examples:
    >>> storage("weights", "int4", {"D": 4096, "F": 14336, "N": 32, "K": 8, "H": 128})[0]
    'int4_g128'
    >>> storage("kv", "fp8", {"D": 4096, "F": 14336, "N": 32, "K": 8, "H": 128})[0]
    'fp8'
"""

from __future__ import annotations

from .. import dtypes
from ..errors import SpecError

# what a plain name means, for weights and for a KV cache alike (and for a model known by
# its parameter count, whose matrices' widths are unknown)
DEFAULTS = {"int4": "int4_g128", "fp4": "mxfp4"}
# int8 weights: a scale per output channel, its share set by each matrix's input width
# (dtypes.lookup's int8_pc<width>): "int8_pc" stands for the family until `matrix_dtype`
PER_CHANNEL = "int8_pc"
_WEIGHTS = {**DEFAULTS, "int8": PER_CHANNEL, "int8-pc": PER_CHANNEL, PER_CHANNEL: PER_CHANNEL}
# each weight matrix the template writes, by its dims: the dims its contraction sums (its inputs)
INPUTS = {("D", "K", "G", "H"): ("D",), ("D", "K", "H"): ("D",), ("K", "G", "H", "D"): ("K", "G", "H"),
          ("D", "F"): ("D",), ("F", "D"): ("F",), ("E", "D", "F"): ("D",), ("E", "F", "D"): ("F",),
          ("Et", "D", "F"): ("D",), ("Et", "F", "D"): ("F",),  # decode's experts touched (templates.py)
          # MLA's (models/mla.py): the query's and the latent's down- and up-projections, the
          # output, the shared and the routed experts
          ("D", "Cq"): ("D",), ("Cq", "N", "Hq"): ("Cq",), ("D", "N", "Hq"): ("D",), ("D", "Ckv"): ("D",),
          ("D", "Hr"): ("D",), ("Ckv", "N", "Hn"): ("Ckv",), ("Ckv", "N", "Hv"): ("Ckv",),
          ("N", "Hv", "D"): ("N", "Hv"), ("D", "Fs"): ("D",), ("Fs", "D"): ("Fs",),
          ("E", "D", "Fe"): ("D",), ("E", "Fe", "D"): ("Fe",), ("Et", "D", "Fe"): ("D",), ("Et", "Fe", "D"): ("Fe",)}

# The scales a plain 8-bit name does not count, with where each is shipped so.
_WEIGHTS_UNCOUNTED = {
    "fp8": "one fp32 scale per matrix (vLLM's --quantization fp8), 4 bytes a matrix, not counted; "
           "fp8_b128 counts DeepSeek-V3's per-tile scales",
}
_PER_CHANNEL_SAYS = (f"int8, one {dtypes.PER_CHANNEL_SCALE}-byte bf16 scale per output channel (TensorRT-LLM's "
                     "int8 weight-only, W8A16): 1 + 2/width bytes a weight, the width (the matrix's inputs) "
                     "written in its dtype (int8_pc4096), scales counted (a matrix whose inputs tp splits keeps "
                     "all its outputs' scales on each chip: counted as its share, 2 x outputs x (1 - 1/tp) bytes "
                     "under)")
_KV_UNCOUNTED = ("one fp32 scale per layer's K and per layer's V (vLLM's k_scale and v_scale, TensorRT-LLM's "
                 "kv_cache_scaling_factor), 8 bytes a layer, not per token: not counted")
_LAYERS_ONLY = ("the layers' matrices only: the embedding, the LM head, norms, biases and the router stay bf16, "
                "as the cited checkpoints keep them; dequantized and multiplied at the bf16 rate (weight-only: "
                "the activations stay bf16)")


def storage(what: str, name: str, sizes: dict) -> tuple[str, str | None]:
    """The dtype a template stores its weights (`what` = "weights") or KV cache ("kv") in
    for a user's `name`, and the sentence saying its layout and scales (None for bf16).
    A scheme's blocks must divide what they tile (`sizes`: a models.json entry's): the
    weights' input widths D, F and N*H (and output widths for a tile), a KV cache's head
    dim H."""
    # a plain name by any of its spellings (INT4, i4): the dtype's own name picks the scheme,
    # so none reads as bare 4-bit without the scales int4 counts
    plain = dtypes.lookup(name) if isinstance(name, str) else None
    if plain is not None and plain.name in {*DEFAULTS, *_WEIGHTS}:
        name = plain.name
    found = dtypes.lookup(DEFAULTS.get(name, _WEIGHTS.get(name, name) if what == "weights" else name))
    if found is None and not (what == "weights" and _WEIGHTS.get(name) == PER_CHANNEL):
        hint = dtypes.suggest(name)
        raise SpecError(f"unknown {what} dtype '{name}'" + (f"; did you mean '{hint}'?" if hint else "")
                        + f" (schemes: {', '.join(dtypes.SCHEMES)}, int8-pc)")
    if found is not None and found.name.startswith(PER_CHANNEL):  # int8_pc4096: one width for every matrix
        raise SpecError(f"--{what} {name}: name int8 (or int8-pc) for per-channel int8 weights: the template "
                        "writes each matrix's own input width")
    if found is None or (what == "weights" and found.name == "int8"):  # None: int8-pc, the family's name
        return PER_CHANNEL, f"--weights {name}: {_PER_CHANNEL_SAYS}; {_LAYERS_ONLY}"
    if found.name == "bf16":
        return found.name, None
    scheme = dtypes.SCHEMES.get(found.name)
    flag = "--" + what
    if scheme is None:
        kind = "fp8" if found.rate == "fp8" else found.name
        if what == "kv":
            left = f"; {_KV_UNCOUNTED}" if found.rate in ("fp8", "int8") else ""
            return found.name, f"{flag} {found.name}: {_bytes(found.bytes)} an element{left}"
        left = _WEIGHTS_UNCOUNTED.get(kind, "no scales" if found.bytes < 2 else "")
        return found.name, f"{flag} {found.name}: {_bytes(found.bytes)} a weight" + (f", {left}" if left else "") \
            + f"; {_LAYERS_ONLY}"
    _check_blocks(what, scheme, sizes)
    per = "weight" if what == "weights" else "element, blocks along the head dim H"
    said = f"{flag} {scheme.name}: {scheme.says}: {_bytes(scheme.bytes)} a{'n' if per[0] == 'e' else ''} {per}, " \
           "scales counted"
    if scheme.uncounted:
        said += f" (not counted: {scheme.uncounted})"
    return found.name, said + (f"; {_LAYERS_ONLY}" if what == "weights" else "")


def _check_blocks(what: str, scheme: dtypes.Scheme, sizes: dict) -> None:
    rows, cols = scheme.block
    if what == "kv":
        if cols != 1:
            rows_only = ", ".join(s for s, v in dtypes.SCHEMES.items() if v.block[1] == 1)
            raise SpecError(f"--kv {scheme.name} tiles weight matrices ({rows}x{cols}); a KV cache takes a "
                            f"scheme of blocks along one head: {rows_only}")
        widths = {"H": sizes["H"]}
    else:
        widths = {"D": sizes["D"], "F": sizes["F"], "N*H": sizes["N"] * sizes["H"]}
        if cols != 1:
            widths["K*H"] = sizes["K"] * sizes["H"]
    for width, value in widths.items():
        if value % rows or (cols != 1 and value % cols):
            block = rows if cols == 1 else f"{rows}x{cols}"
            raise SpecError(f"--{what} {scheme.name}: its blocks of {block} do not divide {width} = {value}, "
                            "so its scales are not a whole number a block (not counted short: refused)")


def _bytes(n: object) -> str:
    return "1 byte" if n == 1 else f"{n} bytes"


def matrix_dtype(dtype: str, names: tuple[str, ...], sizes: dict) -> str:
    """The dtype a weight matrix of these dims is stored in: `dtype`, or for the
    per-channel family, int8_pc with the matrix's input width (G = N/K)."""
    if dtype != PER_CHANNEL:
        return dtype
    if names not in INPUTS:
        raise SpecError(f"--weights int8: a weight of dims {', '.join(names)} has no input width known "
                        "(models/quant.py INPUTS) for its per-channel scales")
    width = 1
    for dim in INPUTS[names]:
        width *= sizes["N"] // sizes["K"] if dim == "G" else sizes[dim]
    return f"{PER_CHANNEL}{width}"
