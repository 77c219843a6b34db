"""Whether a step or a request reaches past the model's context (its maximum positions):
one rule and one warning for `symroof model --decode/--prefill/--train` (the S or T
given) and `--serve` (the last generated token's context). A step past it is costed as
written (the template does not know the positions stop); the output says so loudly."""

from __future__ import annotations


def past(reach: int | None, limit: int | None) -> bool:
    """Whether a context of `reach` tokens is past `limit` (None: not known, so not said).

    Examples:
        >>> past(8192, 8192), past(8193, 8192), past(10**6, None)
        (False, True, False)
    """
    return limit is not None and reach is not None and reach > limit


def warning(name: str, reach: int, limit: int, what: str) -> str:
    """The WARNING row's text: `what` (a context, say "the step's S") is `reach` tokens,
    past `name`'s `limit`."""
    return (f"WARNING: {what} = {reach} tokens, past {name}'s context of {limit} tokens, which it was not "
            "built for: the figures are what the steps would cost, no more")


def reach(mode: str, sizes: dict) -> tuple[int | None, str]:
    """The context a model's step reaches at `sizes`, and the dim it is read from: decode's
    S (the cache's tokens), prefill's and training's T (the sequence)."""
    dim = "S" if mode == "decode" else "T"
    value = sizes.get(dim)
    return (value if isinstance(value, int) else None), dim
