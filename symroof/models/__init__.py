"""Whole models: the transformer template and models.json, strategies as shardings of a
model's program, pipelines, remat, and the planner that ranks strategies. These names are
imported when first used (PEP 562)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .planner import Plan, plan
    from .report import model
    from .whole import Model

_WHERE = {"Plan": "planner", "plan": "planner", "model": "report", "Model": "whole"}
__all__ = ["Model", "Plan", "model", "plan"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value  # imported once
    return value
