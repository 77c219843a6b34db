"""Throughput against latency for a model's decode (or prefill) step over a range of
batches: each batch's tokens/s per chip against its time per step (for decode, the
latency of one token), as a table and a plot."""

from __future__ import annotations

import os
from collections.abc import Iterable

from matplotlib.figure import Figure

from ..render.plot import save
from .whole import Model


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


def plot(rows: list[dict], title: str, path: str | os.PathLike[str]) -> None:
    """Tokens/s per chip against the step time in ms, each point labelled with its batch;
    batches that do not fit in HBM drawn hollow."""
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    for row in rows:
        x, y = float(row["t_step"]) * 1e3, float(row["tokens_per_s_per_chip"])
        ax.plot([x], [y], "o", color="C0", fillstyle="full" if row["fits"] is not False else "none")
        ax.annotate(f"B={row['B']}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.plot([float(r["t_step"]) * 1e3 for r in rows], [float(r["tokens_per_s_per_chip"]) for r in rows],
            "-", color="C0", alpha=0.4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time per step (ms): a token's latency in decode")
    ax.set_ylabel("tokens/s per chip")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save(ax, path)
