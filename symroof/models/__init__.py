"""Whole models: the transformer template and models.json, strategies as shardings of a
model's program, pipelines, remat, and the planner that ranks strategies."""

from .planner import Plan, plan
from .report import model
from .whole import Model

__all__ = ["Model", "Plan", "model", "plan"]
