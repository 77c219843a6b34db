"""The wheel carries the grammar, hardware.json and models.json: build it, install it in a
fresh venv, and run `symroof analyze` and `symroof model` from there, away from the checkout."""

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_installs_and_runs(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next(dist.glob("symroof-*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)],
                   check=True, capture_output=True)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(bin_dir / "symroof"), "analyze", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]",
                           "--chip", "tpu-v5e", "--solve", "B", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, env=clean)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["flops"] == "2*B*D*F"
    assert abs(data["threshold"]["rule"] - 240.2439) < 1e-3
    where = subprocess.run([str(bin_dir / "python"), "-c",
                            "import symroof.resources as r; print(r.resource_path('symroof.lark')); "
                            "print(r.resource_path('hardware.json')); print(r.resource_path('models.json'))"],
                           capture_output=True, text=True, cwd=tmp_path, env=clean, check=True)
    assert len(where.stdout.split()) == 3
    for line in where.stdout.split():
        assert str(env_dir) in line and "_data" in line  # from the wheel, not the checkout
    model = subprocess.run([str(bin_dir / "symroof"), "model", "llama-3-70b", "--decode", "--json"],
                           capture_output=True, text=True, cwd=tmp_path, env=clean)
    assert model.returncode == 0, model.stderr
    assert json.loads(model.stdout)["kv_bytes_per_token"] == 327680
