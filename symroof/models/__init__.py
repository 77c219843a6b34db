"""Whole models: the transformer template and models.json, strategies as shardings of a
model's program, pipelines, remat, and the planner that ranks strategies. These names are
imported when first used (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import lazy

if TYPE_CHECKING:
    from .planner import Plan, plan
    from .report import model
    from .whole import Model

_WHERE = {"Plan": "planner", "plan": "planner", "model": "report", "Model": "whole"}
__all__ = ["Model", "Plan", "model", "plan"]

__getattr__ = lazy.names(__name__, _WHERE)
