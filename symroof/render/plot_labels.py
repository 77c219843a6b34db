"""What a plot's words and numbers say: legend names for specs (short, and telling the
specs apart), tick labels in human units, and which axes are logarithmic. `plot` draws;
these helpers only compute text and choose scales.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy
from matplotlib.ticker import Formatter, FuncFormatter, LogLocator, NullFormatter

if TYPE_CHECKING:
    from matplotlib.axis import Axis
    from numpy.typing import ArrayLike, NDArray

    from ..analysis import Analysis

# An axis is logarithmic when its data span this factor or more (two decades).
LOG_SPAN = 100
# The longest legend name: a spec's (or label's) text is elided in the middle past this.
NAME_CHARS = 52
_PREFIXES = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
_NUMBER = re.compile(r"(?<![\w.])[0-9]+(?![\w.])")     # 4096 in bf16[B, 4096], not the 16 of bf16
_TIMES = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps")]


# Legend names ---------------------------------------------------------------------------

def spec_text(a: Analysis) -> str:
    """The spec on one line, statements split by '; '."""
    return "; ".join(line.strip() for line in a.spec.split("\n") if line.strip())


def legend_names(analyses: Sequence[Analysis], labels: Sequence[str] | None,
                 limit: int) -> tuple[list[str], str | None]:
    """Legend names of at most `limit` characters, and a legend title: the labels, else the
    specs, without a mesh line they all share, with the sizes that tell apart one spec at
    several sizes, elided in the middle around the part that tells each from the others.
    One spec at several sizes is the title, and the sizes the names."""
    if labels:
        return [_elide(str(label), limit) for label in labels], None
    lines = [[line.strip() for line in a.spec.split("\n") if line.strip()] for a in analyses]
    heads = {tuple(ls[:1]) for ls in lines}
    if len(heads) == 1 and lines[0][0].startswith("mesh "):
        lines = [ls[1:] for ls in lines]           # the mesh, said in the title
    texts = ["; ".join(ls) for ls in lines]
    suffixes = []
    for a, text in zip(analyses, texts):
        same = [b for b, t in zip(analyses, texts) if t == text]
        differing = [d for d in a.dims if d in a.values and len({str(b.values.get(d)) for b in same}) > 1]
        suffixes.append(f" ({', '.join(f'{d}={a.values[d]}' for d in differing)})" if differing else "")
    if len(analyses) > 1 and len(set(texts)) == 1 and all(suffixes):
        return [_elide(suffix.strip(" ()"), limit) for suffix in suffixes], _elide(texts[0], NAME_CHARS + 8)
    if not any(suffixes) and (len(texts) > 5 or any(len(t) > limit for t in texts)):
        named = _by_numbers(texts, limit)
        if named is not None:
            return named
    names = []
    for text, suffix in zip(texts, suffixes):
        others = [t for t in texts if t != text]
        at = max((_common(text, t) for t in others), default=0)
        names.append(_elide(text, max(limit - len(suffix), 12), at) + suffix)
    return names, None


def _by_numbers(texts: list[str], limit: int) -> tuple[list[str], str] | None:
    """Specs that differ only in their numbers (sizes written in): the spec with a letter
    for each number that varies as the title (numbers that vary together share one), the
    values as the names: 'bf16[B, n] * int8[n, n] -> bf16[B, n]' and 'n=4096'. None when
    they differ in more than numbers."""
    pieces = [_NUMBER.split(t) for t in texts]
    numbers = [_NUMBER.findall(t) for t in texts]
    if len({tuple(p) for p in pieces}) != 1:
        return None
    groups: dict[tuple[str, ...], list[int]] = {}   # the values along the specs -> the positions with them
    for i in range(len(numbers[0])):
        values = tuple(n[i] for n in numbers)
        if len(set(values)) > 1:
            groups.setdefault(values, []).append(i)
    words = set(re.findall(r"\w+", texts[0]))
    letters = [c for c in "nmkpqrstuvw" if c not in words]
    if not groups or len(groups) > len(letters):
        return None
    letter_at = {i: letter for (_, at), letter in zip(groups.items(), letters) for i in at}
    title = pieces[0][0] + "".join(letter_at.get(i, n) + pieces[0][i + 1] for i, n in enumerate(numbers[0]))
    names = [", ".join(f"{letter}={values[j]}" for values, letter in zip(groups, letters))
             for j in range(len(texts))]
    return [_elide(name, limit) for name in names], _elide(title, NAME_CHARS + 8)


def shared_mesh(analyses: Sequence[Analysis]) -> str | None:
    """'mesh X=2' where every analysis is on that one mesh (their names leave it out), for
    the title; else None."""
    meshes = {str(a.mesh) for a in analyses}
    return meshes.pop() if len(meshes) == 1 and analyses[0].mesh is not None else None


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _elide(text: str, limit: int, at: int = 0) -> str:
    """`text` in at most `limit` characters, its middle cut to '…', keeping the character
    at index `at` (where it differs from the other names) in sight: the head and the tail
    when `at` is in the head, else the head and what follows `at` (cut again if long)."""
    if len(text) <= limit:
        return text
    room = limit - 1
    if at + 6 <= room * 3 // 5:                     # the head and the tail
        head = _head(text, room * 3 // 5, at + 6)
        return head + "…" + _tail(text, room - len(head))
    # from the statement, else the word, in which `at` lies
    statement = text.rfind("; ", max(0, at - 24), at + 2)
    word = text.rfind(" ", max(0, at - 10), at)
    begin = statement + 2 if statement >= 0 else word + 1 if word >= 0 else max(0, at - 8)
    rest = text[begin:]
    if len(rest) <= room - 10:
        return _head(text, room - len(rest), 0) + "…" + rest
    head = _head(text, 10, 0)
    return head + "…" + rest[:room - 1 - len(head)].rstrip() + "…"


def _head(text: str, most: int, least: int) -> str:
    """At most `most` characters from the start, cut after a space where one is near."""
    cut = text.rfind(" ", max(least, most * 2 // 3), most + 1)
    return text[:cut if cut > 0 else most].rstrip()


def _tail(text: str, most: int) -> str:
    """At most `most` characters from the end, starting after a space where one is near."""
    tail = text[len(text) - most:]
    space = tail.find(" ")
    return tail[space + 1:] if 0 <= space < most // 3 else tail


# Axes: scales and ticks -----------------------------------------------------------------

def use_log(choice: str, data: ArrayLike) -> bool:
    if choice != "auto":
        return choice == "log"
    values = numpy.asarray(data, dtype=float)
    values = values[numpy.isfinite(values) & (values > 0)]
    return bool(len(values)) and values.max() / values.min() >= LOG_SPAN


def use_log_x(choice: str, xs: NDArray[numpy.float64], knees: Sequence[float]) -> bool:
    """Log when the sizes span two decades or more, unless every knee in range sits past
    the first tenth of a linear axis (the chapter's B = 1 to 512, knees at 136 and 226)."""
    if choice != "auto" or not use_log(choice, xs):
        return choice == "log"
    lo, hi = float(xs.min()), float(xs.max())
    inside = [k for k in knees if lo <= k <= hi]
    return not inside or min(inside) < lo + (hi - lo) / 10


def _formatter(tick: Callable[[float], str]) -> FuncFormatter:
    return FuncFormatter(lambda v, _pos: tick(v))


class LinearTicks(Formatter):
    """Ticks of a linear axis divided by `scale`, all with the decimals the finest needs
    (1.28, 1.30, 1.32; never an exponent or an offset); `compact` writes sizes from 10k up
    as 10k, 1.5M."""

    def __init__(self, scale: float, compact: bool = False) -> None:
        self.scale, self.compact = scale, compact
        self.decimals: int | None = None

    def format_ticks(self, values: Sequence[float]) -> list[str]:
        scaled = [v / self.scale for v in values]
        if self.compact and max((abs(v) for v in scaled), default=0) >= 1e4:
            return [si(v) for v in scaled]
        self.decimals = max((_decimals(v) for v in scaled), default=0)
        try:
            return [self(v) for v in values]
        finally:
            self.decimals = None

    def __call__(self, x: float, pos: int | None = None) -> str:
        v = x / self.scale
        if self.decimals is None:           # one value alone (the cursor's readout)
            return si(v) if self.compact else plain(v)
        return f"{v:.{self.decimals}f}"


def _decimals(v: float) -> int:
    """The decimals that write `v` (a tick value) exactly, at most 6."""
    for d in range(7):
        if abs(round(v, d) - v) <= 1e-9 * max(1.0, abs(v)):
            return d
    return 6


def log_ticks(axis: Axis, tick: Callable[[float], str]) -> None:
    """Log ticks at 1, 2, 5 per decade over three decades or fewer (at each decade over
    more), labelled by `tick`; unlabelled minor ticks between."""
    class Spans(LogLocator):     # decides 1-2-5 or decades from the view when it is drawn
        def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
            few = vmin > 0 and vmax > 0 and abs(math.log10(vmax / vmin)) <= 3.2
            self.set_params(subs=(1.0, 2.0, 5.0) if few else (1.0,))
            return super().tick_values(vmin, vmax)

    axis.set_major_locator(Spans(base=10, numticks=12))
    axis.set_major_formatter(_formatter(tick))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(float(k) for k in range(2, 10)), numticks=12))
    axis.set_minor_formatter(NullFormatter())


def plain(v: float) -> str:
    """A tick number without an exponent: 0, 0.25, 12.5, 200, 1500."""
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    decimals = max(0, 2 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def si_prefix(top: float) -> tuple[float, str]:
    """The SI prefix that writes values up to `top` as numbers from 1 to 999."""
    for scale, prefix in _PREFIXES:
        if abs(top) >= scale:
            return scale, prefix
    return 1.0, ""


def si(v: float, unit: str | None = None) -> str:
    """820 GB/s, 197 TFLOPs/s; without a unit, compact: 10k, 1M, 512."""
    scale, prefix = si_prefix(v)
    if unit is None:
        return f"{plain(v / scale)}{prefix}"
    return f"{plain(v / scale)} {prefix}{unit}"


def size_text(v: float) -> str:
    return f"{v:.1f}" if v < 1e6 else si(v)


def time_unit(top: float) -> tuple[float, str]:
    for scale, unit in _TIMES:
        if top >= scale:
            return scale, unit
    return _TIMES[-1]


def seconds_tick(v: float) -> str:
    if v <= 0:
        return "0"
    scale, unit = time_unit(v * (1 + 1e-9))
    return f"{plain(v / scale)} {unit}"
