"""Input that is hostile or absurd (issue 32): each refused with one line and exit code 2, no
traceback, in a fresh process within 10 s and 1 GB, where each once crashed (exit 3), hung
or ran out of memory."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from symroof.cli import command
from symroof.cli import main as cli_main

BOUND_S = 10
BOUND_BYTES = 2**30
MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"


def _run(*argv: str) -> tuple[int, str, str, int]:
    """Exit code, stdout, stderr and the most memory (bytes) of `symroof ARGV` in a process of
    its own, killed past BOUND_S (exit code -9)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "symroof", *argv], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, text=True)
        killer = threading.Timer(BOUND_S, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), usage.ru_maxrss * 1024


def _refused(argv: tuple[str, ...], said: str) -> str:
    code, out, err, _ = _run(*argv)
    assert code == 2, (code, err[-300:])  # -9: killed past the bound
    assert out == "" and "Traceback" not in err and err.startswith("symroof: error: ")
    assert said in err.splitlines()[0], err
    return err


def _program(tmp_path: Path, text: str, name: str = "p.sr") -> str:
    path = tmp_path / name
    path.write_text(text + f"\n{MATMUL}\n")
    return str(path)


def _squares(first: str, lines: int = 40) -> str:
    return "\n".join([f"let X0 = {first}", *(f"let X{i} = X{i - 1}*X{i - 1}" for i in range(1, lines + 1))])


@pytest.mark.parametrize(("text", "said"), [
    ("let L = " + "9" * 5000, "a number of 5,000 digits in a size expression (at most 18)"),
    ("let L = " + "(" * 5000 + "1" + ")" * 5000, "a size expression nested more than 100 deep"),
    ("let L = " + "-" * 5000 + "1", "a size expression nested more than 100 deep"),
    # 2**(2**40) by squaring, and B**(2**40): each refused where it passes 4096 bits
    (_squares("2"), "X12 comes to a number past 4096 bits"),
    (_squares("B"), "X13 raises a size to the power 8192"),
    # a product of sums squared over and over: refused before it is multiplied out
    (_squares("(B + C)*(D + E)"), "would expand to more than 4,096 terms"),
])
def test_a_let_too_large_to_be_a_size_is_refused_before_it_is_worked_out(tmp_path, text, said):
    _refused(("model", _program(tmp_path, text)), said)


def test_a_let_expanded_within_its_bounds_still_reads():
    from symroof.lang.relations import expression, resolve_relations
    from symroof.symbols import dim_symbol
    # (B + 1)**12 has 13 terms, not 2**12: the bound counts a power's monomials
    found = resolve_relations([("X", expression("(B + 1)*(B + 1)")), ("Y", expression("X*X*X*X*X*X"))])
    assert len(found[dim_symbol("Y")].args) == 13


def test_input_files_must_be_regular_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a FIFO with no writer: opening it to read once waited forever
    for argv in (("model", str(fifo)), ("check", str(fifo)), ("chips", "--hardware", str(fifo))):
        _refused(argv, "not a regular file")
    if Path("/dev/zero").exists():  # endless: once read until memory ran out
        for argv in (("model", "/dev/zero"), ("check", "/dev/zero"), ("chips", "--hardware", "/dev/zero"),
                     ("model", "llama-3-8b", "--models", "/dev/zero")):
            _refused(argv, "/dev/zero")
    _refused(("model", str(tmp_path)), "cannot read program file")  # a directory


def test_a_file_too_large_is_refused_unread(tmp_path):
    big = tmp_path / "big.json"
    with big.open("w") as f:
        f.write('{"chips": [' + " " * 6_000_000 + "]}")
    _refused(("chips", "--hardware", str(big)), "more than 5,000,000 bytes")


def test_a_data_file_nested_deep_is_refused(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    _refused(("chips", "--hardware", str(deep)), "nested too deeply")


def test_yaml_aliases_are_refused(tmp_path):
    # nine lines, a billion items once its aliases are followed
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"{b}: &{b} [{', '.join(['*' + a] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi")]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\nclaims: *i\n")
    _refused(("check", str(bomb)), "an alias (*a)")


def test_a_claims_file_of_too_many_claims_is_refused(tmp_path):
    from symroof.claims.models import MAX_CLAIMS
    many = tmp_path / "many.yaml"
    many.write_text("".join(f"- {{id: c{i}, spec: 'x', chip: h100, expect: {{flops: 1}}}}\n"
                            for i in range(MAX_CLAIMS + 1)))
    _refused(("check", str(many)), f"more than the {MAX_CLAIMS:,} a claims file may have")


def test_any_file_that_is_not_a_program_is_not_echoed(tmp_path):
    # pointed at a file that is not a program, symroof says where it fails, but prints none of it
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    err = _refused(("model", str(secret)), "does not read as a symroof program")
    assert "root" not in err.replace(str(tmp_path), "") and len(err.splitlines()) == 1
    # a program file (.sr) shows its line and a caret, as a spec does
    shown = _refused(("model", _program(tmp_path, "let L = 2 +")), "")
    assert "let L = 2 +" in shown


def test_control_characters_are_printed_as_codes(tmp_path):
    # a right-to-left override in a name would reverse the rest of the line as printed: a
    # hardware file's names and sources are printed as they are, so a file holding one is
    # refused (a models file's fields are checked one by one: test_data_trust.py)
    shipped = json.loads((Path(__file__).resolve().parents[2] / "hardware.json").read_text())
    shipped["chips"][1]["name"] = "TPU \u202ev3"
    (tmp_path / "hw.json").write_text(json.dumps(shipped))
    err = _refused(("chips", "--hardware", str(tmp_path / "hw.json")), "chips.1.name: holds a control or format")
    # and what a user types is echoed with each such character as its code
    err = _refused(("analyze", MATMUL, "--chip", "h100\u202ex\x1b[31m"), "unknown chip")
    assert "\u202e" not in err and "\x1b" not in err and "\\u202e" in err and ("\\x1b" in err or "\\u001b" in err)


def test_repeats_are_bounded():
    _refused(("calibrate", "--quick", "--repeats", "9" * 23), "give a whole number of runs from 2")


def test_a_label_matplotlib_cannot_draw_is_refused(tmp_path):
    out = tmp_path / "r.png"
    _refused(("plot", "roofline", MATMUL, "--chip", "v5e", "--set", "B=256,D=4096,F=4096", "--label", "$x^$",
              "-o", str(out)), "label '$x^$'")
    assert not out.exists()


def test_bounded_in_memory_too(tmp_path):
    # the squares once took 2 GB in 30 s before they were killed
    _, _, _, peak = _run("model", _program(tmp_path, _squares("2")))
    assert 0 < peak < BOUND_BYTES


# ---- Ctrl-C -----------------------------------------------------------------------------

def test_ctrl_c_is_one_line_and_exit_130(monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(command, "_run", interrupted)
    out, err = io.StringIO(), io.StringIO()
    assert command.main(["analyze", MATMUL], out=out, err=err) == 130
    assert err.getvalue() == "symroof: interrupted\n" and out.getvalue() == ""


def test_ctrl_c_while_the_command_loads_is_one_line_and_exit_130(monkeypatch):
    def loading(argv, out, err):
        raise KeyboardInterrupt  # as while sympy is imported
    monkeypatch.setattr(command, "main", loading)
    err = io.StringIO()
    assert cli_main(["analyze", MATMUL], err=err) == 130 and err.getvalue() == "symroof: interrupted\n"


def test_a_real_ctrl_c_in_a_plan():
    # SIGINT while a plan runs, in a process of its own: one line, exit 130
    code = ("import os, signal, sys, threading\n"
            "from symroof.cli import main\n"
            "threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
            "sys.exit(main(['plan', 'mixtral-8x7b', '--chip', 'b200', '--chips', '256', '--batch', '4194304']))\n")
    env = {**os.environ, "SYMROOF_CACHE": "off"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                          check=False)
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "symroof: interrupted\n", ""), proc.stderr[-500:]


def test_the_importers_output_is_written_last_and_whole(tmp_path, monkeypatch):
    # -o FILE once was written before a later step failed (an unknown chip), and left behind
    from symroof.cli import options
    written = tmp_path / "out.sr"
    options.save_program(str(written), "bf16[B] -> bf16[B]\n")
    assert written.read_text() == "bf16[B] -> bf16[B]\n" and [p.name for p in tmp_path.iterdir()] == ["out.sr"]
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    from symroof.errors import SymroofError
    with pytest.raises(SymroofError, match="cannot write .* No space left"):
        options.save_program(str(written), "changed\n")
    # the old file stands, and no temporary one is left beside it
    assert written.read_text() == "bf16[B] -> bf16[B]\n" and [p.name for p in tmp_path.iterdir()] == ["out.sr"]


@pytest.mark.parametrize(("code", "said"), [
    ("raise ValueError('boom')", "importing {name} raised ValueError: boom"),
    ("raise RuntimeError", "importing {name} raised RuntimeError (its own code"),
    ("import sys\nsys.exit(3)", "importing {name} raised SystemExit: 3"),
])
def test_user_code_that_fails_as_it_is_imported_is_the_users_error(tmp_path, monkeypatch, code, said):
    # from-jax and from-torch import the module they are named: a failure there is the module's
    # own (exit 2, saying so), not symroof's (it was an internal error, exit 3)
    from symroof.errors import SymroofError
    from symroof.targets import load_target
    name = f"failing_{abs(hash(code))}"
    (tmp_path / f"{name}.py").write_text(code + "\ndef f(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    for target, shown in ((f"{name}:f", name), (f"{tmp_path / name}.py:f", f"{tmp_path / name}.py")):
        with pytest.raises(SymroofError, match=said.format(name=shown).replace("(", r"\(")):
            load_target(target, "FUNCTION")
    # a relative module name is no module's name here
    with pytest.raises(SymroofError, match="expected MODULE:FUNCTION"):
        load_target("..x:f", "FUNCTION")


def test_an_output_that_is_a_device_a_pipe_or_a_link_is_written_not_replaced(tmp_path):
    """`-o /dev/null` or `-o /dev/stdout` writes to the device (renaming a file over it, as
    root, would replace /dev/null); a pipe nobody reads is an error at once, not a hang; a link
    stays a link, its file written; a folder is refused."""
    import errno
    import stat

    from symroof.resources import write_atomically
    write_atomically(os.devnull, b"nothing")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as raised:
        write_atomically(fifo, b"x")
    assert raised.value.errno == errno.ENXIO and stat.S_ISFIFO(os.stat(fifo).st_mode)
    real, link = tmp_path / "real.sr", tmp_path / "link.sr"
    real.write_text("old")
    link.symlink_to(real)
    write_atomically(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    with pytest.raises(IsADirectoryError):
        write_atomically(tmp_path, "x")
    from symroof.cli.command import main
    out, err = io.StringIO(), io.StringIO()
    (tmp_path / "curve.png").mkdir()
    argv = ["model", "llama-3-8b", "--decode", "--chip", "h100", "--batches", "1,2", "-o", f"{tmp_path}/curve.png"]
    assert main(argv, out=out, err=err) == 2
    assert "is a directory" in err.getvalue() and err.getvalue().count("\n") == 1


def test_a_module_file_that_is_a_pipe_or_a_device_is_refused_not_imported(tmp_path):
    from symroof.cli.command import main
    pipe, device = tmp_path / "block.py", tmp_path / "zero.py"
    os.mkfifo(pipe)
    device.symlink_to("/dev/zero")
    for target in (f"{pipe}:f", f"{device}:f"):
        err = io.StringIO()
        assert main(["from-jax", target, "--shapes", "x=bf16[B, D]"], out=io.StringIO(), err=err) == 2
        assert err.getvalue() == f"symroof: error: cannot read {target[:-2]}: not a regular file\n"


@pytest.mark.parametrize("command, blocked, extra", [
    (["from-jax", "tests/data/jax_blocks.py:mlp", "--shapes", "x=bf16[B, D]; w_up=bf16[D, F]; w_down=bf16[F, D]"],
     "jax", "symroof[jax]"),
    (["from-torch", "tests/data/torch_models.py:gpt2"], "torch", "symroof[torch]"),
])
def test_an_importer_without_its_framework_says_what_to_install(monkeypatch, command, blocked, extra):
    """A user's module that imports JAX (or torch), where it is not installed: the error names
    the extra to install, not the module that failed to import it."""
    from symroof.cli.command import main
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    monkeypatch.setitem(sys.modules, blocked, None)  # `import jax` raises ImportError
    err = io.StringIO()
    assert main(command, out=io.StringIO(), err=err) == 2
    assert extra in err.getvalue() and err.getvalue().count("\n") == 1


def test_a_file_written_whole_has_the_mode_a_new_file_gets_or_the_one_it_had(tmp_path):
    """The draft mkstemp makes is 0600: the written file is not (a plot others could not read)."""
    import stat

    from symroof.resources import write_atomically
    new, old = tmp_path / "new.png", tmp_path / "old.sr"
    mask = os.umask(0o022)
    try:
        write_atomically(new, b"x")
        old.write_text("old")
        old.chmod(0o640)
        write_atomically(old, "new")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644 and stat.S_IMODE(old.stat().st_mode) == 0o640
    assert old.read_text() == "new"


@pytest.mark.parametrize("argv", [[], ["analyze"], ["plan", "llama-3-8b", "--chip", "h100", "--chips", "8"],
                                  ["analyze", "x", "--frobnicate"], ["model", "llama-3-8b", "--decode", "--set"],
                                  ["plan", "x", "--batch", "1", "--sequences", "2", "--chip", "h100", "--chips", "1"]])
def test_a_usage_error_is_one_line_too(argv):
    """argparse's own errors (a missing argument, an unknown flag) are one line and exit 2, as
    every other error is, pointing at --help rather than printing the usage block."""
    code = subprocess.run([sys.executable, "-m", "symroof", *argv], capture_output=True, text=True, timeout=60)
    assert code.returncode == 2 and code.stdout == ""
    assert code.stderr.count("\n") == 1 and ": error: " in code.stderr and "--help lists the flags" in code.stderr
