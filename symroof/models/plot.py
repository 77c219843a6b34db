"""Throughput against latency for a model's decode (or prefill) step over a range of
batches: each batch's tokens/s per chip against its time per step (for decode, the
latency of one token), as a table and a plot."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..render.plot import arrange, figure, offsets, save
from ..render.plot_labels import log_ticks, plain, seconds_tick
from .whole import Model

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def sweep(model: Model, batches: Iterable[int]) -> list[dict]:
    """One row per batch: B, the step time, tokens/s in all and per chip, and whether it
    fits in the chips' usable HBM (None without a capacity figure)."""
    rows = []
    for b in batches:
        at = Model(model.structured, model.machine, {**model.sizes, "B": int(b)}, model.options)
        left = at.hbm_left_per_chip
        rows.append({"B": int(b), "t_step": at.t_step, "tokens_per_s": at.tokens_per_s,
                     "tokens_per_s_per_chip": at.tokens_per_s / model.options.chips,
                     "fits": bool(left >= 0) if left.is_number else None})
    return rows


def plot(rows: list[dict], title: str, path: str | os.PathLike[str], step: str = "decode") -> None:
    """`draw`, saved to `path` (png, svg, pdf)."""
    save(draw(rows, title, step), path)


def draw(rows: list[dict], title: str, step: str = "decode") -> Axes:
    """Tokens/s per chip against the step time, log-log, each point labelled with its batch
    inside the frame and clear of the others; batches that do not fit in HBM drawn hollow,
    and the legend says which is which."""
    ax = figure((7, 4.5))
    xs = [float(r["t_step"]) for r in rows]
    ys = [float(r["tokens_per_s_per_chip"]) for r in rows]
    line, = ax.plot(xs, ys, "-", color="C0", alpha=0.4, label="the batches in order")
    for fits, style, said in ((True, "full", "fits in HBM"), (False, "none", "does not fit in HBM (hollow)")):
        mine = [k for k, r in enumerate(rows) if (r["fits"] is not False) == fits]
        if mine:
            ax.plot([xs[k] for k in mine], [ys[k] for k in mine], "o", color="C0", fillstyle=style, ls="",
                    label=said)
    notes = []
    for x, y, row in zip(xs, ys, rows):
        note = ax.annotate(f"B={row['B']}", (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
        notes.append((note, [offsets(5, 4, step=10, count=4), offsets(5, -12, count=4),
                             offsets(-5, 4, "right", step=10, count=4), offsets(-5, -12, "right", count=4)]))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.margins(0.12)                     # room inside the frame for the labels
    log_ticks(ax.xaxis, seconds_tick)
    log_ticks(ax.yaxis, plain)
    ax.set_xlabel("time per step" + (": a token's latency in decode" if step == "decode" else ""))
    ax.set_ylabel("tokens/s per chip")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    arrange(ax, ("lower right", "upper left", "center right"), [line], notes, fontsize=7)
    return ax
