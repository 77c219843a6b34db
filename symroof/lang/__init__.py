"""The spec language: text in, IR out.

`syntax` reads the text into statements as written (with positions), `resolve` gives each
name its meaning, `structure` reads the lines around statements (`let`, `repeat`, `param`,
`embedding`, `cache`, `backward`), and `parse` is the front door. Nothing past this package
reads spec text.
"""

from .parsing import parse, parse_mesh
from .structure import Structured, read_structured

__all__ = ["Structured", "parse", "parse_mesh", "read_structured"]
