"""The `symroof` command: one module per subcommand family; `command.main` dispatches."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The command line (`command.main`), imported here: a Ctrl-C while it loads (sympy
    takes a third of a second) is one line and exit code 130, as it is while it runs."""
    try:
        from .command import main as run
        return run(argv, out, err)
    except KeyboardInterrupt:
        print("symroof: interrupted", file=err or sys.stderr)
        return 130
