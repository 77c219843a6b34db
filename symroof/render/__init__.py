"""What people read: the text report, the `--json` object, LaTeX derivations, chip cards
and plots. Renderers read an analysis through its public attributes; they compute nothing
the engine does not."""

from .plot import plot_roofline, plot_sweep

__all__ = ["plot_roofline", "plot_sweep"]
