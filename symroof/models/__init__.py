"""Whole models: the transformer template and models.json, strategies as shardings of a
model's program, pipelines, remat, and the planner that ranks strategies."""

from .planner import plan
from .report import model

__all__ = ["model", "plan"]
