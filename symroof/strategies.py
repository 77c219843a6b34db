"""Parallelism strategies as shardings of a template's program (the start of issue 12).

A strategy maps kinds of parallelism to mesh axes: `dp=4,tp=8` builds the mesh X=4, Y=8
with data parallelism over X and tensor parallelism over Y; `dp=X,tp=Y` uses the axes of a
mesh given beside it. The template's program is then written sharded, as a person would
write it, and the sharding engine finds the collectives:

* data (dp): the batch B is split over the axis (`B_X`); every chip holds all the weights;
* tensor (tp, Megatron): the attention heads (`K_Y`, each chip its KV heads and their query
  groups) and the MLP width (`F_Y`) are split; the attention output and MLP down projections
  then hold partial sums, which the engine all-reduces: two AllReduces per layer. The
  output layer is split by vocabulary (`V_Y`: each chip its slice of the logits); the input
  embedding table is kept whole on every chip.

Only the forward pass is written, so strategies apply to prefill and decode; training needs
the backward pass's collectives (gradients), which are not written yet, and is refused
rather than guessed. FSDP, sequence, pipeline and expert parallelism are issue 12's next
steps and are refused by name.
"""

from __future__ import annotations

import math
import re

from .errors import SpecError
from .ir import Mesh
from .parse import parse_mesh

KINDS = {"dp": "dp", "data": "dp", "tp": "tp", "tensor": "tp"}
LATER = ("fsdp", "sp", "sequence", "pp", "pipeline", "ep", "expert")
_AXES = {"dp": "X", "tp": "Y"}  # the axes a strategy given by sizes builds
_DIMS = {"dp": ("B",), "tp": ("K", "F")}  # the dims each kind splits


def parse_strategy(text: str, mesh: Mesh | None = None, domain: int | None = None) -> dict[str, tuple[str, int, str]]:
    """`dp=4,tp=8` (sizes: the mesh is built) or `dp=X,tp=Y` (axes of `mesh`, with their
    links), as {kind: (axis, size, link)}. A mesh built from sizes sits on the chip's fast
    links (ICI, NVLink) while it fits its `domain`; past it, data parallelism goes on the
    slower network between domains (DCN: pods, or nodes), as it is deployed."""
    found: dict[str, tuple[str, int, str]] = {}
    for part in text.split(","):
        kind, eq, value = (p.strip() for p in part.partition("="))
        if not eq or not kind or not value:
            raise SpecError(f"--strategy takes KIND=SIZE or KIND=AXIS, e.g. dp=4,tp=8; got {part.strip()!r}")
        if kind.lower() in LATER:
            raise SpecError(f"strategy '{kind}' is not costed yet: dp (data) and tp (tensor) are")
        if kind.lower() not in KINDS:
            raise SpecError(f"unknown strategy '{kind}': dp (data) or tp (tensor)")
        kind = KINDS[kind.lower()]
        if kind in found:
            raise SpecError(f"strategy {kind} is given twice")
        if value.isdigit():
            if mesh:
                raise SpecError("with --mesh, a strategy names its axes (dp=X,tp=Y), not sizes")
            size = int(value)
            if not 1 <= size <= 65536:
                raise SpecError(f"{kind}={size}: a strategy's size is from 1 to 65536 chips")
            found[kind] = (_AXES[kind], size, "ici")
        else:
            if mesh is None or value not in mesh.names:
                have = ", ".join(mesh.names) if mesh else "no mesh: give --mesh X=4,Y=8, or sizes (dp=4,tp=8)"
                raise SpecError(f"strategy {kind}={value}: no mesh axis {value} ({have})")
            if any(axis == value for axis, *_ in found.values()):
                raise SpecError(f"mesh axis {value} is used by two strategies")
            axis = mesh.axis(value)
            found[kind] = (value, axis.size, axis.link)
    chips = math.prod(size for _, size, _ in found.values())
    if mesh is None and domain and chips > domain and "dp" in found and chips // found["dp"][1] <= domain:
        name, size, _ = found["dp"]
        found["dp"] = (name, size, "dcn")
    unused = [a for a in (mesh.names if mesh else ()) if a not in {axis for axis, *_ in found.values()}]
    if unused:
        raise SpecError(f"mesh axis {', '.join(unused)} is given to no strategy: name it (dp={unused[0]}) or "
                        "drop it")
    return found


def shard(text: str, strategy: dict[str, tuple[str, int, str]]) -> str:
    """The program written sharded: a mesh line, and each dim a kind splits subscripted
    with its axis inside every tensor's brackets (never in `let` lines)."""
    if not strategy:
        return text
    axes = {dim: axis for kind, (axis, *_) in strategy.items() for dim in _DIMS[kind]}
    mesh = "mesh " + ", ".join(f"{axis}={size}" + ("" if link == "ici" else f"@{link}")
                               for axis, size, link in strategy.values())

    def dims(match: re.Match) -> str:
        items = [d.strip() for d in match.group(1).split(",")]
        return "[" + ", ".join(f"{d}_{axes[d]}" if d in axes else d for d in items) + "]"

    lines = text.split("\n")
    out = []
    for k, line in enumerate(lines):
        if k == 1:
            out.append(mesh)
        if line.lstrip().startswith(("let ", "#")):
            out.append(line)
            continue
        line = re.sub(r"\[([^\]]*)\]", dims, line)
        if "tp" in strategy and _unembedding(line):  # the output layer is split by vocabulary
            line = re.sub(r"\bV\]", f"V_{strategy['tp'][0]}]", re.sub(r"\[V,", f"[V_{strategy['tp'][0]},", line))
        out.append(line)
    return "\n".join(out)


def _unembedding(line: str) -> bool:
    """The output layer's declaration or matmul (its result has the vocabulary V)."""
    return line.startswith("embedding Wout") or bool(re.search(r"->\s*\w+\[[^\]]*\bV\]", line))


def strategy_of(strategy: str | None, mesh: str | None, mode: str, config: dict, chips: int,
                target=None) -> dict:
    """The strategy a named model is sharded with ({} for none), checked against the mode."""
    if not strategy:
        if mesh:
            raise SpecError("--mesh goes with --strategy KIND=AXIS (dp=X,tp=Y)")
        return {}
    if mode == "train":
        raise SpecError("strategies shard the forward pass (prefill, decode); training's backward collectives "
                        "are not costed yet: use --chips N for an even split")
    if config.get("moe"):
        raise SpecError(f"{config['name']} is a mixture of experts: expert parallelism is not costed yet")
    if chips != 1:
        raise SpecError("--strategy builds the mesh: drop --chips")
    domain = target.chip.figure("interconnect.domain_size") if target is not None and target.chip is not None \
        else None
    return parse_strategy(strategy, parse_mesh(mesh) if mesh else None, int(domain) if domain else None)
