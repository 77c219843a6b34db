"""KaTeX in one node process (tests/katex_render.js), for the test suite and the fuzzer.

The katex module is installed from the npm registry, once, into the user's cache
(~/.cache/symroof/katex). Kept free of pytest so that benchmarks/fuzz_cli.py can use it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

KATEX_VERSION = "0.16"
HERE = Path(__file__).parent


def katex_module() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "symroof" / "katex"
    return base / "node_modules" / "katex"


class KaTeX:
    """`problem(tex)` is None where KaTeX (strict) renders `tex`, else its complaint;
    `check(tex)` asserts that it renders. With `install`, a missing katex module is
    installed with npm; without, it is an error."""

    def __init__(self, install: bool = True):
        node, npm = shutil.which("node"), shutil.which("npm")
        module = katex_module()
        if not node or (install and not npm):
            raise RuntimeError("rendering LaTeX needs Node.js and npm (Debian: nodejs npm)")
        if not install and not module.exists():
            raise RuntimeError(f"KaTeX is not installed in {module.parent.parent} (run the test suite once)")
        module.parent.parent.mkdir(parents=True, exist_ok=True)
        # one install at a time, and none read half made: the suite's workers (pytest-xdist) may
        # each find it missing
        with open(module.parent.parent / ".install-lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not module.exists():
                subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                                str(module.parent.parent), f"katex@{KATEX_VERSION}"], check=True, capture_output=True)
        self.process = subprocess.Popen([node, str(HERE / "katex_render.js"), str(module)], text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def problem(self, tex: str) -> str | None:
        body = tex.strip()
        if body.startswith("$$") and body.endswith("$$"):
            body = body[2:-2]
        self.process.stdin.write(json.dumps(body) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        return None if answer == "ok" else answer

    def check(self, tex: str) -> None:
        answer = self.problem(tex)
        assert answer is None, f"KaTeX cannot render this LaTeX: {answer}\n{tex}"

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=10)
        self.process.stdout.close()
