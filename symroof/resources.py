"""Find the files symroof ships beside its code: the grammar, hardware.json and models.json;
what reading a data file as JSON refuses that `json` would take (`unique_keys`); and the
words an error about a data file's value uses (`describe`, `did_you_mean`).

In a wheel they sit in `symroof/_data/` (force-included at build time); in a
checkout or an editable install they sit at the top of the repository.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

_PACKAGE = Path(__file__).resolve().parent
_PLACES = {
    "symroof.lark": ("_data/symroof.lark", "../grammar/symroof.lark"),
    "hardware.json": ("_data/hardware.json", "../hardware.json"),
    "models.json": ("_data/models.json", "../models.json"),
}


def user_cache(name: str) -> Path | None:
    """A file in the user's own cache directory (`$XDG_CACHE_HOME/symroof`, else
    `~/.cache/symroof`), the directory made where missing: what symroof keeps between runs
    (the built parser, strategy families' formulas). None where the directory is not the
    user's own or cannot be written: never a shared one, since what is kept there is read
    back."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(base) / "symroof"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK) or (hasattr(os, "getuid") and folder.stat().st_uid != os.getuid()):
            return None
    except OSError:
        return None
    return folder / name


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


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose every key is given once (`json.loads`'s object_pairs_hook): a data
    file's key given twice would have its first value silently dropped.

    Examples:
        >>> import json
        >>> json.loads('{"a": 1, "a": 2}', object_pairs_hook=unique_keys)
        Traceback (most recent call last):
        ...
        ValueError: duplicate key 'a' in one JSON object
    """
    keys = [key for key, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise ValueError(f"duplicate key {key!r} in one JSON object")
    return dict(pairs)


def describe(value: object, longest: int | None = None) -> str:
    """A JSON value in an error's words ("null", "the number 3", "a string ('x')", "a
    list"); a string cut to its first `longest` characters where given.

    Examples:
        >>> describe(None), describe(True), describe(2.5), describe("abcdef", 3), describe([1])
        ('null', 'true', 'the number 2.5', "a string ('abc')", 'a list')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"a string ({value[:longest]!r})"
    containers: dict[type, str] = {list: "a list", dict: "an object"}
    return containers.get(type(value), type(value).__name__)


def whole(value: object, limit: int) -> bool:
    """Whether a value read from a data file is a whole number from 1 to `limit` (JSON's
    true and false are not numbers, though Python counts them as ints)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= limit


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """"; did you mean 'x'?" for the closest of `choices` to a misspelt word, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """An input file's bytes, or None where it has more than `limit` (never more is read:
    a file is input, bounded in size). Only a regular file is read: a FIFO would block,
    /dev/zero never end (OSError, "not a regular file"). OSError and ValueError (a path
    with a NUL) pass to the caller, whose error names the file's kind."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO opened without waiting for a writer
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        raw = handle.read(limit + 1)
    return None if len(raw) > limit else raw


def write_atomically(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write a file whole or not at all: into a temporary file beside it, then renamed over
    it (a failure, or a Ctrl-C, leaves the old file, or none); through a symbolic link, the
    file it names. A device or a pipe (`-o /dev/stdout`) is written as it is, not replaced.
    OSError passes to the caller, whose error names the file."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    target = Path(os.path.realpath(path))  # through a link, to the file it names (the link stays)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    if mode is not None and not stat.S_ISREG(mode):
        # a device or a pipe (/dev/stdout, /dev/null): written as it is, never replaced by a file;
        # opened without waiting (a pipe nobody reads is an error, not a hang), then written whole
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        return
    fd, draft = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the draft 0600: the file gets the mode it had, or a new file's (0666 less the umask)
        os.chmod(draft, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        os.replace(draft, target)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(draft)


def _umask() -> int:
    """The process's umask (read by setting it, and setting it back at once)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


def read_input(path: str | os.PathLike[str], limit: int, what: str, error: type[Exception]) -> bytes:
    """An input file's bytes, at most `limit` of them (`read_bounded`), else one `error`
    that names the file as `what` (a models file, a claims file): a file that cannot be
    read, is not a regular file, or has more."""
    try:
        raw = read_bounded(path, limit)
    except (OSError, ValueError) as err:
        raise error(f"cannot read {what} {path}: {getattr(err, 'strerror', None) or err}") from None
    if raw is None:
        raise error(f"{what} {path}: more than {limit:,} bytes, more than a {what} may have")
    return raw


def read_text_bounded(path: str | os.PathLike[str], limit: int, what: str, error: type[Exception]) -> str:
    """`read_input`'s bytes as UTF-8 text, else one `error` saying where it is not."""
    raw = read_input(path, limit, what, error)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{what} {path} is not UTF-8 text (byte {err.start + 1} is {raw[err.start]:#04x})") from None


def load_json(raw: bytes) -> object:
    """A data file's JSON, read strictly: UTF-8, every key of an object given once
    (`unique_keys`), no NaN or Infinity (a figure is finite). Each problem is a ValueError
    whose message, one line, the caller's error prefixes with the file."""
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys, parse_constant=_no_constant)
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 text (byte {err.start + 1})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _no_constant(text: str) -> NoReturn:
    raise ValueError(f"{text} is not a number symroof reads (a figure is finite)")
