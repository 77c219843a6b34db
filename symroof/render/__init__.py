"""What people read: the text report, the `--json` object, LaTeX derivations, chip cards
and plots. Renderers read an analysis through its public attributes; they compute nothing
the engine does not.

The plots (`plot_roofline`, `plot_sweep`, in `render.plot`) are loaded when first asked
for: matplotlib takes a third of a second to import, which a command that draws nothing
should not pay.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["plot_roofline", "plot_sweep"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(".plot", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
