"""Element types: names, aliases, bytes per element, and which peak rate a chip runs them at.

Examples:
    >>> lookup("bfloat16").name, lookup("bfloat16").bytes
    ('bf16', 2)
    >>> lookup("int4").bytes
    1/2
    >>> suggest("bf61"), suggest("bfloat"), suggest("int")
    ('bf16', 'bfloat16', 'int8')
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

import sympy


@dataclass(frozen=True, slots=True)
class DType:
    """One element type.

    Attributes:
        name: canonical name, the one symroof prints ("bf16").
        bytes: bytes per element, exact (int4 is 1/2).
        rate: which of a chip's peak rates it runs at ("fp8" for both fp8 formats).
        is_float: float formats win over integer formats of the same width when
            choosing the compute dtype of a mixed contraction.
    """

    name: str
    bytes: sympy.Rational
    rate: str
    is_float: bool

    def __str__(self) -> str:
        return self.name


# Rate keys are the keys of `peak_flops_per_s` in hardware.json.
RATES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")

_TABLE: list[tuple[str, object, str, bool, tuple[str, ...]]] = [
    # name, bytes, rate, is_float, aliases
    ("fp64", 8, "fp64", True, ("float64", "f64", "double")),
    ("fp32", 4, "fp32", True, ("float32", "f32", "float", "single")),
    ("tf32", 4, "tf32", True, ("tensorfloat32",)),
    ("bf16", 2, "bf16", True, ("bfloat16",)),
    ("fp16", 2, "fp16", True, ("float16", "f16", "half")),
    ("fp8", 1, "fp8", True, ("float8", "f8")),
    ("fp8_e4m3", 1, "fp8", True, ("e4m3", "fp8e4m3", "f8e4m3", "float8e4m3", "float8_e4m3", "float8_e4m3fn",
                                  "f8e4m3fn")),
    ("fp8_e5m2", 1, "fp8", True, ("e5m2", "fp8e5m2", "f8e5m2", "float8e5m2", "float8_e5m2")),
    ("int64", 8, "int64", False, ("i64",)),
    ("int32", 4, "int32", False, ("i32",)),
    ("int16", 2, "int16", False, ("i16",)),
    ("int8", 1, "int8", False, ("i8",)),
    # unsigned: random bits and hashes (uint32), bytes (uint8); the rate of the signed width
    ("uint64", 8, "int64", False, ("u64",)),
    ("uint32", 4, "int32", False, ("u32",)),
    ("uint16", 2, "int16", False, ("u16",)),
    ("uint8", 1, "int8", False, ("u8",)),
    ("int4", sympy.Rational(1, 2), "int4", False, ("i4",)),
    ("fp4", sympy.Rational(1, 2), "fp4", True, ("e2m1", "fp4e2m1", "float4_e2m1fn", "f4")),
    ("bool", 1, "int8", False, ("pred",)),  # masks and comparisons' results: a byte each, as XLA stores them
]



@dataclass(frozen=True, slots=True)
class Scheme:
    """A quantized storage format: elements of one dtype with a scale per block of them
    (and a zero point where the format has one). Its `DType` counts the scales into its
    bytes per element, spread evenly over the block (exact where the block divides the
    tensor: models.quant checks).

    Attributes:
        name: the dtype's name ("int4_g128").
        element: the elements' dtype ("int4").
        block: elements one scale covers, (along the input dim, along the output dim):
            (128, 1) is a group of 128 inputs of one output channel; (128, 128) a tile.
        scale: bytes of one block's scale and zero point together.
        says: the layout in words, with who ships it (printed where it changes a number).
        uncounted: what the per-element count leaves out, or "".
    """

    name: str
    element: str
    block: tuple[int, int]
    scale: sympy.Rational
    says: str
    uncounted: str = ""

    @property
    def bytes(self) -> sympy.Rational:
        return _ALIASES[self.element].bytes + self.scale / (self.block[0] * self.block[1])


# One entry a scheme: name, element, block, bytes of a block's scale (+ zero point), aliases, layout.
_SCHEME_TABLE: list[tuple[str, str, tuple[int, int], object, tuple[str, ...], str, str]] = [
    ("int4_g128", "int4", (128, 1), sympy.Rational(5, 2), ("int4-g128",),
     "int4, a group of 128 inputs per fp16 scale and 4-bit zero point (AutoAWQ's and GPTQ's checkpoints: "
     "qweight, qzeros packed 8 to an int32, scales fp16 [in/128, out])", ""),
    ("fp8_b128", "fp8_e4m3", (128, 128), 4, ("fp8-b128", "fp8-block"),
     "fp8 e4m3, one fp32 scale per 128x128 tile (DeepSeek-V3's weight_block_size [128, 128], weight_scale_inv)",
     ""),
    ("mxfp4", "fp4", (32, 1), 1, ("mx-fp4",),
     "fp4 e2m1, a block of 32 per 8-bit e8m0 scale (OCP Microscaling Formats (MX) v1.0, MXFP4)", ""),
    ("nvfp4", "fp4", (16, 1), 1, ("nv-fp4",),
     "fp4 e2m1, a block of 16 per fp8 e4m3 scale, and one fp32 scale per tensor (NVIDIA NVFP4, TensorRT Model "
     "Optimizer)", "one fp32 scale per tensor, 4 bytes a matrix"),
]
SCHEMES: dict[str, Scheme] = {}

DTYPES: dict[str, DType] = {}
_ALIASES: dict[str, DType] = {}
for _name, _bytes, _rate, _is_float, _aliases in _TABLE:
    _dtype = DType(_name, sympy.Rational(_bytes), _rate, _is_float)
    DTYPES[_name] = _dtype
    for _alias in (_name, *_aliases):
        _ALIASES[_alias] = _dtype
for _name, _element, _block, _scale, _aliases, _says, _uncounted in _SCHEME_TABLE:
    _scheme = Scheme(_name, _element, _block, sympy.Rational(_scale), _says, _uncounted)
    SCHEMES[_name] = _scheme
    # a scheme runs at its elements' rate; the scales only add bytes
    _dtype = DType(_name, _scheme.bytes, _ALIASES[_element].rate, _ALIASES[_element].is_float)
    DTYPES[_name] = _dtype
    for _alias in (_name, *_aliases):
        _ALIASES[_alias] = _dtype

# Which of two equally wide dtypes a mixed contraction computes in, so that the answer
# does not depend on the order of the operands: the first in this list wins.
_PREFERENCE = ["fp64", "int64", "uint64", "fp32", "tf32", "int32", "uint32", "bf16", "fp16", "int16", "uint16", "fp8",
               "fp8_e4m3", "fp8_e5m2", "int8", "uint8", "bool", "fp4", "int4",
               "fp8_b128", "nvfp4", "mxfp4", "int4_g128"]  # the schemes, each wider than its elements

_DTYPE_LIKE = re.compile(r"^(?:bf|fp|f|int|i|uint|u|float|bfloat|tf)\d|^(?:BF|FP|INT|UINT|TF)\d")


# int8 with one scale per output channel: the share of a scale a weight carries is 1/(the
# matrix's input width), so the width is in the name (int8_pc4096: 1 + 2/4096 bytes a weight).
# The scale is bf16/fp16, the activations' dtype, as TensorRT-LLM's int8 weight-only keeps it.
_PER_CHANNEL = re.compile(r"int8_pc([1-9][0-9]{0,8})")
PER_CHANNEL_SCALE = sympy.Integer(2)


def lookup(name: str) -> DType | None:
    """The dtype a name or alias stands for, or None. Names with digits match in any case
    (BF16, Float32); the word aliases (half, float, double, single) only in lower case,
    so a tensor named `Half` or `Float` stays a tensor's name.

    Examples:
        >>> lookup("int8_pc4096").bytes
        2049/2048
    """
    if name in _ALIASES:
        return _ALIASES[name]
    if not any(ch.isdigit() for ch in name):
        return None
    channel = _PER_CHANNEL.fullmatch(name.lower())
    if channel:
        return DType(f"int8_pc{channel[1]}", 1 + PER_CHANNEL_SCALE / int(channel[1]), "int8", False)
    return _ALIASES.get(name.lower())


def _rank(d: DType) -> int:
    return _PREFERENCE.index("int8" if _PER_CHANNEL.fullmatch(d.name) else d.name)


def suggest(name: str) -> str | None:
    """The known dtype spelling closest to a misspelt one (the alias itself, as the user
    was writing it: 'bfloat' -> 'bfloat16'), or None."""
    low = name.lower()
    prefixed = [a for a in _ALIASES if a.startswith(low) and any(ch.isdigit() for ch in a)] if len(low) >= 2 else []
    if prefixed:
        return min(prefixed, key=lambda a: (len(a), _PREFERENCE.index(_ALIASES[a].name)))
    close = difflib.get_close_matches(low, list(_ALIASES), n=1, cutoff=0.6)
    return close[0] if close else None


def looks_like_dtype(name: str) -> bool:
    """Whether an unknown name before '[' was probably meant as a dtype (bf61, fp33, int7)
    rather than as a tensor's name (X, W1, F1, Wq): a name with a digit that starts like a
    dtype (in lower case, or an upper-case dtype prefix such as BF or FP) or is close to
    one is a misspelt dtype; anything else names the tensor."""
    if not any(ch.isdigit() for ch in name):
        return False
    return bool(_DTYPE_LIKE.match(name)) or bool(
        difflib.get_close_matches(name, list(_ALIASES), n=1, cutoff=0.75))


def near_dtype(name: str) -> bool:
    """Whether a word before '[' was probably meant as a dtype, so that reading it as a
    tensor's name would cost the wrong thing: a dtype, a misspelt one (`looks_like_dtype`),
    the start of one (`bf`, `fp`, `int`, `bfloat`: letters only, since a name with digits is judged by
    `looks_like_dtype`), or a near miss of three letters or
    more (`flot`, `doubel`). A capitalised word (`Float`, `Half`, `Wq`, `F1`) stays a name, as
    `lookup` keeps it.

    Examples:
        >>> [near_dtype(w) for w in ("bfloat", "int", "fp", "BF", "flot", "X", "Wq", "Float", "F1", "act")]
        [True, True, True, True, True, False, False, False, False, False]
    """
    if lookup(name) is not None or looks_like_dtype(name):
        return True
    if name[:1].isupper() and not any(ch.isupper() for ch in name[1:]):
        return False
    low = name.lower()
    if len(low) >= 2 and low.isalpha() and any(a.startswith(low) for a in _ALIASES if any(ch.isdigit() for ch in a)):
        return True
    return len(low) >= 3 and bool(difflib.get_close_matches(low, list(_ALIASES), n=1, cutoff=0.8))


def compute_dtype(dtypes: Iterable[DType]) -> DType:
    """The dtype a contraction of these inputs computes in: the widest, floats before
    integers of the same width (bf16 x int8 runs at the bf16 rate; int8 x int8 at int8),
    and between two floats of one width a fixed order (bf16 before fp16), whatever the
    order of the operands.

    Examples:
        >>> compute_dtype([lookup("bf16"), lookup("int8")]).name
        'bf16'
        >>> compute_dtype([lookup("int8"), lookup("int8")]).name
        'int8'
    """
    return max(dtypes, key=lambda d: (d.bytes, d.is_float, -_rank(d)))
