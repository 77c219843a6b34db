"""`MODULE:NAME`, as the command line names user code (a JAX function for from-jax, a
factory for from-torch): a dotted module on the path or a .py file, and the callable in it.
Importing it runs the user's code, as `python -c "import MODULE"` would."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import SymroofError

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")  # a module's name: no relative import (..x)


def load_target(target: str, what: str) -> Callable:
    """The callable `target` names; `what` says what it should be (FUNCTION, FACTORY) in
    the one-line error for a target that names none."""
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr or not (module_name.endswith(".py") or _DOTTED.fullmatch(module_name)):
        raise SymroofError(f"{target!r}: expected MODULE:{what} (my_model:{what.lower()}, or "
                           f"path/to/file.py:{what.lower()})")
    try:
        if module_name.endswith(".py"):
            _readable(module_name)
            spec = importlib.util.spec_from_file_location(Path(module_name).stem, module_name)
            if spec is None or spec.loader is None:
                raise SymroofError(f"cannot read {module_name}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            sys.path.insert(0, ".")
            importlib.invalidate_caches()  # a module written since this process last looked is found
            try:
                module = importlib.import_module(module_name)
            finally:
                sys.path.remove(".")
    except SymroofError:
        raise
    except (ImportError, OSError, SyntaxError) as error:
        raise SymroofError(f"cannot import {module_name}: {error}") from None
    except (Exception, SystemExit) as error:  # the user's code failed as it was imported: theirs to fix
        said = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise SymroofError(f"importing {module_name} raised {type(error).__name__}" + (f": {said}" if said else "")
                           + " (its own code, run as Python imports it)") from None
    found = getattr(module, attr, None)
    if not callable(found):
        raise SymroofError(f"{module_name} has no {what.lower()} {attr!r}")
    return found


MODULE_BYTES = 10_000_000  # a module file larger than this is no module a person wrote


def _readable(path: str) -> None:
    """A module file Python may read: a regular file (a pipe would block the import forever,
    a device never end), of at most MODULE_BYTES."""
    try:
        found = os.stat(path)
    except OSError as error:
        raise SymroofError(f"cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(found.st_mode):
        raise SymroofError(f"cannot read {path}: not a regular file")
    if found.st_size > MODULE_BYTES:
        raise SymroofError(f"{path}: {found.st_size:,} bytes, more than a module may have ({MODULE_BYTES:,})")
