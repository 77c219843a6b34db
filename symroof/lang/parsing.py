"""`parse`: spec text -> `Program`. Syntax in `syntax.py`, meaning in `resolve.py`."""

from __future__ import annotations

import functools

from ..errors import SpecError
from ..ir import Mesh, Program
from ..sharding.lowering import check_layout
from .resolve import mesh_from, resolve
from .syntax import WMesh, normalize, read


def parse(text: str, dtype: str = "bf16", mesh: Mesh | str | dict | None = None) -> Program:
    """Parse a spec into its IR.

    Args:
        text: one or more statements (newlines or ';' between them).
        dtype: the dtype of tensors written without one (`X[B, D]`, einsum strings).
        mesh: a mesh for sharded dims, as a `Mesh`, text ("X=2, Y=4@dcn") or a dict
            ({"X": 2}); a `mesh` line in the text must agree with it.

    Raises:
        SpecError: with the position of the first problem.

    Examples:
        >>> program = parse("bf16[B, D] @ bf16[D, F] -> bf16[B, F]")
        >>> [str(step) for step in program.statements[0].steps]
        ['bf16[B, D] *_D bf16[D, F] -> bf16[B, F]']
        >>> print(parse("bd,df->bf", dtype="int8"))
        int8[b, d] * int8[d, f] -> int8[b, f]
        >>> print(parse("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", mesh="X=2"))
        mesh X=2
        bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]
    """
    if isinstance(text, str):
        text = normalize(text)  # positions in errors refer to the text as read
    return resolve(read(text), text, dtype, parse_mesh(mesh), check=check_layout)


def parse_mesh(mesh: Mesh | str | dict | None) -> Mesh | None:
    """A mesh from text ("X=16, Y=16, D=4@dcn"), a dict ({"X": 16}) or a `Mesh`.

    Examples:
        >>> print(parse_mesh("X=16,Y=4@dcn"))
        mesh X=16, Y=4@dcn
    """
    if mesh is None or isinstance(mesh, Mesh):
        return mesh
    if isinstance(mesh, dict):
        # {"X": None}: an axis without a size
        mesh = ", ".join(name if size is None else f"{name}={size}" for name, size in mesh.items())
    if not isinstance(mesh, str) or not mesh.strip():
        raise SpecError(f"a mesh is written like 'X=2, Y=4@dcn', got {mesh!r}")
    return _mesh_text(mesh)


@functools.lru_cache(maxsize=4096)
def _mesh_text(mesh: str) -> Mesh:
    """A mesh from its text, read once (a Mesh cannot change: a plan reads each of its
    candidates' meshes many times)."""
    text = "mesh " + normalize(mesh.strip())
    statements = read(text)
    if len(statements) != 1 or not isinstance(statements[0], WMesh):
        raise SpecError(f"a mesh is written like 'X=2, Y=4@dcn', got {mesh!r}")
    return mesh_from(statements[0], text)
