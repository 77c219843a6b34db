"""Every LaTeX output the test suite produces is rendered through KaTeX (what docs sites
use), so invalid LaTeX fails the test that produced it."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

KATEX_VERSION = "0.16"
HERE = Path(__file__).parent


class KaTeX:
    """One node process rendering with KaTeX, installed from the npm registry once into
    the user's cache."""

    def __init__(self):
        node, npm = shutil.which("node"), shutil.which("npm")
        if not node or not npm:
            pytest.fail("rendering LaTeX in the tests needs Node.js and npm (Debian: nodejs npm)")
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "symroof" / "katex"
        module = base / "node_modules" / "katex"
        if not module.exists():
            base.mkdir(parents=True, exist_ok=True)
            subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(base),
                            f"katex@{KATEX_VERSION}"], check=True, capture_output=True)
        self.process = subprocess.Popen([node, str(HERE / "katex_render.js"), str(module)], text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def check(self, tex: str) -> None:
        body = tex.strip()
        if body.startswith("$$") and body.endswith("$$"):
            body = body[2:-2]
        self.process.stdin.write(json.dumps(body) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        assert answer == "ok", f"KaTeX cannot render this LaTeX: {answer}\n{tex}"

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=10)
        self.process.stdout.close()


_RENDERER: list = []


def _katex() -> KaTeX:
    """The one renderer, started when the first LaTeX needs checking."""
    if not _RENDERER:
        _RENDERER.append(KaTeX())
    return _RENDERER[0]


def pytest_sessionfinish(session, exitstatus):
    for renderer in _RENDERER:
        renderer.close()


@pytest.fixture
def katex():
    return _katex()


# Wrap symroof's LaTeX functions when this file is imported, before any test module is,
# so that `from symroof.latex import derivation` in a test gets the checked one too.
_MADE: list[str] = []


def _recording(original):
    def checked(*args, **kwargs):
        tex = original(*args, **kwargs)
        _MADE.append(tex)
        return tex
    checked.__wrapped__ = original
    return checked


import symroof.latex as _latex  # noqa: E402

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
