"""PyTorch itself, imported when a module is imported or checked, never by the core."""

from __future__ import annotations

from typing import Any

from ..errors import SymroofError


def load_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise SymroofError("importing a PyTorch module needs PyTorch, which is not installed here: "
                           "pip install 'symroof[torch]' (in a clone: pip install -e '.[torch]')") from None
    return torch
