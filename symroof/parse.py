"""`parse`: spec text -> `Program`. Syntax in `syntax.py`, meaning in `resolve.py`."""

from __future__ import annotations

from .ir import Program
from .resolve import resolve
from .syntax import read


def parse(text: str, dtype: str = "bf16") -> Program:
    """Parse a spec into its IR.

    Args:
        text: one or more statements (newlines or ';' between them).
        dtype: the dtype of tensors written without one (`X[B, D]`, einsum strings).

    Raises:
        SpecError: with the position of the first problem.

    Examples:
        >>> program = parse("bf16[B, D] @ bf16[D, F] -> bf16[B, F]")
        >>> [str(step) for step in program.statements[0].steps]
        ['bf16[B, D] *_D bf16[D, F] -> bf16[B, F]']
        >>> print(parse("bd,df->bf", dtype="int8"))
        int8[b, d] * int8[d, f] -> int8[b, f]
    """
    return resolve(read(text), text, dtype)
