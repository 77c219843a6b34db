"""The `symroof` command: one module per subcommand family; `command.main` dispatches."""

from .command import build_parser, main

__all__ = ["build_parser", "main"]
