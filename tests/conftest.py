"""Every LaTeX output the test suite produces is rendered through KaTeX (what docs sites
use), so invalid LaTeX fails the test that produced it."""

import os

import pytest

from katex_renderer import KaTeX

# plans derive their strategy families afresh in every test (tests/models/test_families.py
# tests what the disk keeps, in a directory of its own)
os.environ["SYMROOF_CACHE"] = "off"


_RENDERER: list = []


def _katex() -> KaTeX:
    """The one renderer, started when the first LaTeX needs checking."""
    if not _RENDERER:
        try:
            _RENDERER.append(KaTeX())
        except RuntimeError as error:
            pytest.fail(f"the tests render LaTeX through KaTeX: {error}")
    return _RENDERER[0]


def pytest_sessionfinish(session, exitstatus):
    for renderer in _RENDERER:
        renderer.close()


@pytest.fixture
def katex():
    return _katex()


# Wrap symroof's LaTeX functions when this file is imported, before any test module is,
# so that `from symroof.render.latex import derivation` in a test gets the checked one too.
_MADE: list[str] = []


def _recording(original):
    def checked(*args, **kwargs):
        tex = original(*args, **kwargs)
        _MADE.append(tex)
        return tex
    checked.__wrapped__ = original
    return checked


import symroof.render.latex as _latex  # noqa: E402

for _name in ("derivation", "latex_summary"):
    setattr(_latex, _name, _recording(getattr(_latex, _name)))


@pytest.fixture(autouse=True)
def render_all_latex():
    """Render, through KaTeX, every LaTeX output the test produced."""
    _MADE.clear()
    yield
    made = list(_MADE)
    _MADE.clear()
    for tex in made:
        _katex().check(tex)
