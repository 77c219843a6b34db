"""Find the files symroof ships beside its code: the grammar, hardware.json and models.json.

In a wheel they sit in `symroof/_data/` (force-included at build time); in a
checkout or an editable install they sit at the top of the repository.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_PLACES = {
    "symroof.lark": ("_data/symroof.lark", "../grammar/symroof.lark"),
    "hardware.json": ("_data/hardware.json", "../hardware.json"),
    "models.json": ("_data/models.json", "../models.json"),
}


def resource_path(name: str) -> Path:
    """Path of a shipped file (`symroof.lark`, `hardware.json` or `models.json`), installed or in a checkout.

    Examples:
        >>> resource_path("symroof.lark").name
        'symroof.lark'
    """
    for relative in _PLACES[name]:
        path = _PACKAGE / relative
        if path.is_file():
            return path.resolve()
    raise FileNotFoundError(f"symroof is installed without its {name}; reinstall the package")
