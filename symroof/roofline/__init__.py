"""The engine's arithmetic: counts of each step (cost), the counts at sizes, times on a
machine's units and links, bounds, limits, thresholds, and the declared quantities."""
