"""Every command the README and the docs site show is run, and prints what the page shows.

A fenced block's lines that start with `$ ` are commands; the lines after each, up to the next
command or the block's end, are what it prints (stdout and stderr together). `...` stands for
any text, as in doctest (a line of its own for lines left out). A page's commands run in order
in one temporary directory (the repository's `tests/` reachable from it), so a file one writes
(`-o my.json`) is there for the next. The seconds a plan took are the one figure that differs
from run to run, and are compared as `<time>`. Python examples (`>>>`) run as doctests. The site
itself is built with warnings as errors.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKER = doctest.OutputChecker()
UNTIMED = re.compile(r"(strategies in )[0-9.]+ (m?s)")


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str
    shown: str


def commands(page: Path) -> list[Command]:
    """The `$ ` commands of a page's fenced blocks, each with the output the page shows."""
    found: list[Command] = []
    lines = page.read_text(encoding="utf-8").split("\n")
    fenced, i = False, 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and line.startswith("$ "):
            start, text = i, line[2:]
            while text.endswith("\\") and i < len(lines):  # continued on the next line
                text, i = text[:-1].rstrip() + " " + lines[i].strip(), i + 1
            shown = []
            while i < len(lines) and not lines[i].startswith(("$ ", "```")):
                shown.append(lines[i])
                i += 1
            found.append(Command(page.name, start, text, "\n".join(shown)))
    return found


def run(command: str) -> tuple[int, str]:
    """One command, in this process: its exit code and what it prints, stdout and stderr together."""
    from symroof.cli.command import main

    argv = shlex.split(command, comments=True)
    assert argv[0] == "symroof", command
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(argv[1:], out=out, err=out)
        except SystemExit as exit:  # argparse's usage errors and --help
            code = int(exit.code or 0)
    return code, out.getvalue()


def exits(command: Command) -> set[int]:
    """The exit codes a command may give: 2 where the page shows its error, 1 where the machine's
    own timing may flag a figure (validate), else 0."""
    if command.shown.lstrip().startswith("symroof: error"):
        return {2}
    return {0, 1} if command.text.split()[1] == "validate" else {0}


def agrees(shown: str, printed: str) -> bool:
    want, got = UNTIMED.sub(r"\1<time> \2", shown).rstrip("\n"), UNTIMED.sub(r"\1<time> \2", printed).rstrip("\n")
    if not want.strip():
        return True  # a command shown without its output: its exit code is checked
    return CHECKER.check_output(want + "\n", got + "\n", doctest.ELLIPSIS)


def page_ids() -> list[str]:
    return [page.name for page in PAGES]


@pytest.mark.parametrize("page", PAGES, ids=page_ids())
def test_every_command_on_the_page_prints_what_it_shows(page: Path, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYMROOF_CACHE", "off")
    failures = []
    for command in commands(page):
        code, printed = run(command.text)
        if code not in exits(command) or not agrees(command.shown, printed):
            failures.append(f"{command.page}:{command.line}: $ {command.text} (exit {code})\n"
                            f"--- shown\n{command.shown}\n--- printed\n{printed}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("page", PAGES, ids=page_ids())
def test_the_pages_python_examples_run(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    test = doctest.DocTestParser().get_doctest(text, {}, page.name, str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0


def test_commands_are_found_as_written() -> None:
    """The reader of pages finds each command, its continuation lines and its output."""
    page = ROOT / "docs" / "outputs.md"
    found = commands(page)
    sweep = next(c for c in found if c.text.startswith("symroof plot sweep"))
    assert sweep.text.count('"') == 4 and sweep.text.endswith("-o problem3.png")
    assert sum(len(commands(p)) for p in PAGES) >= 40
    assert not agrees("a\n...\nz", "a\nb\ny") and agrees("a\n...\nz", "a\nb\nz")


def test_every_command_in_a_block_is_run() -> None:
    """A block of lines that start `symroof ` without the `$ ` is a synopsis: one of its lines has
    a placeholder (`SPEC`, `[--chip CHIP]`, `...`) outside quotes. Any other such line is a command
    that would go unrun."""
    placeholder = re.compile(r"\[-|\b[A-Z]{3,}\b|\.\.\.")
    for page in PAGES:
        blocks = re.findall(r"^```[^\n]*\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)
        for block in blocks:
            bare = [line.strip() for line in block.split("\n") if line.lstrip().startswith("symroof ")]
            unquoted = [re.sub(r"\"[^\"]*\"", '""', line) for line in bare]
            assert not bare or any(placeholder.search(line) for line in unquoted), \
                f"{page.name}: write it as `$ {bare[0]}`"


def test_every_command_and_flag_is_documented() -> None:
    """Each subcommand has a synopsis in the CLI page, and each of its flags is named in the docs."""
    import argparse

    from symroof.cli.command import build_parser
    parser = build_parser(None)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    docs = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert len(commands) >= 14
    for name, sub in commands.items():
        assert f"symroof {name} " in cli, f"no synopsis of symroof {name} in docs/cli.md"
        for action in sub._actions:
            flags = [f for f in action.option_strings if f not in ("-h", "--help")]
            assert not flags or any(re.search(re.escape(f) + r"(?![\w-])", docs) for f in flags), \
                f"symroof {name} {'/'.join(flags)} is in no page of the docs"


def test_the_planners_table_of_kinds_is_the_kinds_declarations() -> None:
    """Each kind of parallelism has its row in docs/parallelism.md, with the axis letters its
    declaration gives (kinds.KINDS)."""
    from symroof.models import kinds
    page = (ROOT / "docs" / "parallelism.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| (`[^|]*) \| ([A-Z] \([A-Z]\)) \|", page, re.M)}
    for kind in kinds.KINDS:
        row = next((axes for names, axes in rows.items() if f"`{kind.name}`" in names), None)
        assert row == f"{kind.axis} ({kind.outer})", kind.name


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in ci.splitlines() if line.startswith("python3 -m venv"))
    assert f"```\n{command}\n```" in readme
    assert "pytest" in command


def test_the_docs_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-4000:]
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "symroof" in index
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    from symroof.analysis import analyze
    assert analyze.__doc__ and analyze.__doc__.strip().split("\n")[0] in api  # generated from the docstrings
    for name in ("analysis.Analysis", "models.planner.plan", "from_jax.importer.from_jax", "hardware.chips.get_chip"):
        assert f'id="symroof.{name}"' in api, name
    shutil.rmtree(tmp_path / "site")
