"""Dim sizes as people write them on a command line: 4096, 32_768, 1e6, 2**20, 2^20,
128k, 1M, 4*1024.

The suffixes k, M, G and T are powers of 1024 (k = 1024), as ML sizes are spoken: a
"128k context" is 131072 tokens. Ki, Mi, Gi and Ti say the same explicitly. A decimal
million is 1e6. Nothing is evaluated: the text is matched piece by piece, and the value
must come out a positive integer below 1e18.

Examples:
    >>> [size_value(t) for t in ("4096", "32_768", "1e6", "2**20", "2^10", "128k", "1M", "4*1024", "1.5e3")]
    [4096, 32768, 1000000, 1048576, 1024, 131072, 1048576, 4096, 1500]
"""

from __future__ import annotations

import re
from fractions import Fraction

from ..errors import SpecError

LIMIT = 10**18
_SUFFIX = {"": 1, "k": 2**10, "K": 2**10, "Ki": 2**10, "M": 2**20, "Mi": 2**20,
           "G": 2**30, "Gi": 2**30, "T": 2**40, "Ti": 2**40}
_NUMBER = re.compile(r"(?P<mantissa>[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE](?P<exp>\+?[0-9]{1,3}))?"
                     r"(?P<suffix>Ki|Mi|Gi|Ti|[kKMGT])?")
_POWER = re.compile(r"(?P<base>[0-9]{1,6})\s*(?:\*\*|\^)\s*(?P<exp>[0-9]{1,3})")


def size_value(text: str, what: str = "a size") -> int:
    """The whole number `text` writes (see the module docstring); SpecError otherwise."""
    if isinstance(text, bool):
        raise SpecError(f"{what}: {text!r} is not a size")
    if isinstance(text, int):
        value = Fraction(text)
    else:
        text = str(text).strip()
        factors = [part.strip() for part in text.split("*") if part.strip()] if "**" not in text else None
        value = Fraction(1)
        for part in factors if factors is not None else _factors_with_powers(text, what):
            value *= _factor(part, text, what)
    if value.denominator != 1:
        shown = f"{float(value):g}"
        said = f"{text} is {shown}, " if shown != text else ""
        raise SpecError(f"{what}: {said}a size must be a whole number")
    if not 0 < value < LIMIT:
        raise SpecError(f"{what}: {text} must be a positive integer below 1e18")
    return int(value)


def _factors_with_powers(text: str, what: str) -> list[str]:
    """Split `a*b**c` on the '*' that multiply, keeping each '**' with its power."""
    parts = re.split(r"(?<!\*)\*(?!\*)", text)
    if any(not p.strip() for p in parts):
        raise _bad(text, what)
    return [p.strip() for p in parts]


def _factor(part: str, text: str, what: str) -> Fraction:
    if len(part) > 40:  # no size needs 40 characters, and int() refuses thousands of digits
        raise SpecError(f"{what}: {text[:40]}... must be a positive integer below 1e18")
    power = _POWER.fullmatch(part)
    if power:
        exponent = int(power["exp"])
        if exponent > 64:
            raise SpecError(f"{what}: {text} must be a positive integer below 1e18")
        return Fraction(int(power["base"]) ** exponent)
    number = _NUMBER.fullmatch(part)
    if not number or number["mantissa"].endswith("_"):
        raise _bad(text, what)
    value = Fraction(number["mantissa"].replace("_", ""))
    if number["exp"]:
        value *= Fraction(10) ** int(number["exp"])
    return value * _SUFFIX[number["suffix"] or ""]


def _bad(text: str, what: str) -> SpecError:
    return SpecError(f"{what}: a dim's size must be a positive integer, and {text!r} cannot be read as "
                     "one; write e.g. 4096, 1e6, 2**20, 128k (k = 1024) or 4*1024")
