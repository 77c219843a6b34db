"""A program's text in chunks that parse on their own, and statements moved along the text.

A text read again and again with small changes (a program a user edits and passes back;
programs with many repeated lines) parses each distinct chunk once: `syntax.read` reuses
it, moved to where the chunk sits. The planner no longer reads text at all (templates and
strategies pass `lang.source` objects), so this serves the text front end. A chunk is a
line, or the lines of a `fused { ... }` block (the only statement that spans lines):
statements never span chunks, so a chunk parses as it would inside the whole text.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def chunks(text: str) -> list[tuple[int, str]]:
    """The text as (offset, chunk) pairs, a chunk ending at a newline outside braces."""
    out, start, depth, comment = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == "\n":
            comment = False
            if depth == 0:
                out.append((start, text[start:i]))
                start = i + 1
        elif comment:
            continue
        elif ch == "#":
            comment = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
    out.append((start, text[start:]))
    return out


def moved(written: Any, by: int, text: str) -> Any:
    """A statement as written (written.py's W* dataclasses) with every span `by` further
    on, in `text` (the whole text, which a WStatement keeps): a new object (by 0 too), the
    one given left as it is: it is cached."""
    if isinstance(written, list):
        return [moved(w, by, text) for w in written]
    cls = type(written)
    plan = _PLANS.get(cls) or _PLANS.setdefault(cls, _plan(cls))
    copied = dict(written.__dict__)
    for name, kind in plan:
        value = copied[name]
        if value is None:
            continue
        if kind == "text":
            copied[name] = text
        elif kind == "span":
            copied[name] = (value[0] + by, value[1] + by)
        elif kind == "subscript":  # [(name, span)]
            copied[name] = [(n, (s + by, e + by)) for n, (s, e) in value]
        else:
            copied[name] = moved(value, by, text)
    new = object.__new__(cls)
    new.__dict__.update(copied)
    return new


# a W* class -> what each of its fields holds that moves: a span, a subscript's spans, the
# whole text, or statements as written (one, or a list), by the fields' names and types
_PLANS: dict[type, list[tuple[str, str]]] = {}


def _plan(cls: type) -> list[tuple[str, str]]:
    plan = []
    for f in fields(cls):
        declared = str(f.type)
        if f.name == "span" or f.name.endswith("_span"):
            plan.append((f.name, "span"))
        elif f.name == "subscript":
            plan.append((f.name, "subscript"))
        elif f.name == "text":
            plan.append((f.name, "text"))
        elif declared.startswith(("W", "list[W")):
            plan.append((f.name, "written"))
    return plan
