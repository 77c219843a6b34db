"""Sharding: layouts on a mesh, a statement lowered to what each chip does, and the
collectives (with their cheapest routes) that change one layout into another."""

from .layout import Layout, Local, Plan, ShardingError
from .lowering import check_layout, lower

__all__ = ["Layout", "Local", "Plan", "ShardingError", "check_layout", "lower"]
