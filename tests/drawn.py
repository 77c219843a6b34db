"""What a drawn plot must hold, checked on its artists (tests/render/test_plots_drawn.py):

* ticks: at least two labelled on each axis, in plain numbers or units (no mathtext
  exponent such as `6×10⁰`), none overlapping another;
* every text inside the figure, and every label of a point or line inside the axes' frame;
* no text over another: point labels, the legend, the title and the axes' labels;
* a legend that explains every marker and line style drawn: each marker shape, hollow and
  filled points, solid, dashed and dotted lines (a shape and a fill may be explained by
  different entries: "triangles: matmul", "hollow: where the roof puts it").
"""

from __future__ import annotations

from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.text import Annotation


def _inside(box, frame, slack: float = 0.5) -> bool:
    return box.x0 >= frame.x0 - slack and box.x1 <= frame.x1 + slack and box.y0 >= frame.y0 - slack \
        and box.y1 <= frame.y1 + slack


def _styles(artist) -> set[tuple]:
    """What a reader tells apart by shape in one artist: a line's style (dashed, dotted, ...),
    a marker's shape (its path's vertex count) and whether it is hollow."""
    out: set[tuple] = set()
    if isinstance(artist, Line2D):
        ls = artist.get_linestyle()
        if ls not in ("None", "", " ") and len(artist.get_xdata()) > 1:
            out.add(("line", ls))
        marker = artist.get_marker()
        if marker not in (None, "", "None", " "):
            hollow = artist.get_fillstyle() == "none" or str(artist.get_markerfacecolor()).lower() == "none"
            out |= {("shape", len(MarkerStyle(marker).get_path().vertices)), ("fill", hollow)}
    elif isinstance(artist, PathCollection) and len(artist.get_offsets()):
        faces = artist.get_facecolors()
        hollow = not len(faces) or all(f[3] == 0 for f in faces)
        out |= {("shape", len(artist.get_paths()[0].vertices)), ("fill", hollow)}
    return out


def check_drawn(ax) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    figure = ax.figure.figure
    canvas = FigureCanvasAgg(figure)  # drawn as `save` draws it (the figure's own dpi, 150)
    canvas.draw()
    renderer = canvas.get_renderer()
    page, frame = figure.bbox, ax.get_window_extent(renderer)
    legend = ax.get_legend()
    assert legend is not None, "a plot without a legend"

    for axis in (ax.xaxis, ax.yaxis):
        labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
        for t in labels:
            assert "$" not in t.get_text() and "10^" not in t.get_text(), f"an exponent tick: {t.get_text()!r}"
        shown = [t for t in labels if _inside(t.get_window_extent(renderer), page)]
        assert len(shown) >= 2, f"fewer than two labelled ticks: {[t.get_text() for t in labels]}"
        boxes = [t.get_window_extent(renderer) for t in shown]
        for i, box in enumerate(boxes):
            assert not any(box.overlaps(other) for other in boxes[i + 1:]), "tick labels overlap"

    notes = [t for t in ax.texts if t.get_visible() and t.get_text()]
    points = [t for t in notes if isinstance(t, Annotation)]
    for note in points:
        assert _inside(note.get_window_extent(renderer), frame), f"{note.get_text()!r} leaves the frame"
    named = [ax.title, ax.xaxis.label, ax.yaxis.label, legend]
    boxes = [(t.get_text() if hasattr(t, "get_text") else "legend", t.get_window_extent(renderer))
             for t in [*notes, *named] if t.get_visible() and (not hasattr(t, "get_text") or t.get_text())]
    for text, box in boxes:
        assert _inside(box, page), f"{text!r} leaves the figure"
    for i, (text, box) in enumerate(boxes):
        for other, second in boxes[i + 1:]:
            assert not box.overlaps(second), f"{text!r} overlaps {other!r}"

    drawn = set().union(*(_styles(a) for a in [*ax.get_lines(), *ax.collections] if a.get_visible()))
    explained = set().union(*(_styles(h) for h in legend.legend_handles))
    missing = drawn - explained
    assert not missing, f"drawn but not in the legend: {sorted(missing)}"
