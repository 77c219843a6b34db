"""The backward pass of a template's forward program, written as a program of its own, so
that a strategy's gradient collectives are found by the sharding engine like any other.

It reads the template's forward program (sharded by `strategies.subscripted`, one
statement a line) and writes, block by block in reverse order:

* for a matmul with a parameter (a tensor without the batch B): the gradient into its
  input, `dY *_{W's other dims} W -> dA`, and into its parameter, `A *_{A's other dims}
  dY -> dW`. dW keeps the parameter's sharding, so a split batch contracted away leaves
  partial sums the engine all-reduces (data parallelism) or reduce-scatters (FSDP), and
  a contracted head or width split over a tensor-parallel axis leaves an AllReduce of dA.
  Consecutive matmuls reading one input (q, k and v; the gated MLP's two) send their
  gradients back through one matmul over their weights side by side (`let J1 = ...`), as
  Megatron and XLA do, so the input's gradient is reduced once, not once a weight;
* every other statement (norms, activations, softmax, the fused attention, gathers,
  residual adds) twice: the convention that a backward costs twice its forward;
* for a parameter no matmul reads (norm scales, biases, embedding tables read by a
  gather), its gradient's reduction written out: ReduceScatter over the FSDP axes where it
  is split along them, AllReduce over the other batch axes.

So a training step's matmul FLOPs are exactly 3x the forward's, as the 6·N·tokens rule has
them, and its collectives are those of the sharded program, forward and backward.
"""

from __future__ import annotations

import re

from .strategies import Strategy, braced, dims_of, is_parameter, names, sub

_MATMUL = re.compile(r"^(?P<a>\w+\[[^\]]*\])\s*\*_(?P<c>\{[^}]*\}|[^\W_]+)\s*(?P<w>\w+\[[^\]]*\])\s*->\s*"
                     r"(?:\w+:\s*)?(?P<y>\w+\[[^\]]*\])\s*$")
_NAME = re.compile(r"(?<![\w\[])[^\W\d_][^\W_]*:\s*(?=\w+\[)")  # "x: " before a tensor
_DECLARED = re.compile(r"(\w+):\s*(\w+\[[^\]]*\])")
_HEADS = ("repeat", "part")


def _bare(dim: str) -> str:
    return dim.split("_", 1)[0]


def _axes(dim: str) -> str:
    return dim.split("_", 1)[1].strip("{}").replace(",", "") if "_" in dim else ""


def _dtype(tensor: str) -> str:
    return tensor[:tensor.index("[")]


def _tensor(dtype: str, dims: list[str]) -> str:
    return f"{dtype}[{', '.join(dims)}]"


def _contracted(names_: list[str]) -> str:
    return names_[0] if len(names_) == 1 else "{" + ",".join(names_) + "}"


def backward(text: str, strategy: Strategy) -> str:
    """The backward program of a subscripted forward program (see the module docstring)."""
    lines = text.split("\n")
    body = [line for line in lines if line.strip() and not line.lstrip().startswith(("let ", "mesh ", "#"))]
    weights = {m.group("w") for line in body if (m := _MATMUL.match(line.split("#", 1)[0].strip()))
               and is_parameter(m.group("w"))}
    writer = _Writer(strategy, {_bare_tensor(w) for w in weights})
    tree, _ = _tree(body, 0)
    out = writer.block(tree)
    lets = [f"let {name} = {expr}" for name, expr in writer.widths]
    return "\n".join(["backward {   # the backward pass, written by symroof (backward.py)",
                      *("  " + line for line in lets + out), "}"]) + "\n"


def _bare_tensor(tensor: str) -> str:
    return _tensor(_dtype(tensor), [_bare(d) for d in dims_of(tensor)])


def _tree(lines: list[str], k: int) -> tuple[list, int]:
    """Lines as nested items: a statement line, a fused block (its lines), or a
    (head line, items) block, up to the `}` that closes the enclosing one."""
    items: list = []
    while k < len(lines):
        line = lines[k]
        word = line.strip().split(None, 1)[0]
        if line.strip() == "}":
            return items, k + 1
        if word in _HEADS:
            inner, k = _tree(lines, k + 1)
            items.append((line, inner))
            continue
        if word == "fused":
            end = next(j for j in range(k, len(lines)) if lines[j].strip() == "}")
            items.append(lines[k:end + 1])
            k = end + 1
            continue
        items.append(line)
        k += 1
    return items, k


class _Writer:
    def __init__(self, strategy: Strategy, matmul_weights: set[str]):
        self.batch = names(strategy, "dp", "ep", "sp")  # the weights' gradients are summed over these
        self.sequence = names(strategy, "sp")
        self.fsdp = names(strategy, "fsdp")
        self.matmul_weights = matmul_weights
        self.widths: list[tuple[str, str]] = []

    def block(self, items: list) -> list[str]:
        out: list[str] = []
        k = len(items) - 1
        while k >= 0:  # the backward runs the forward in reverse
            item = items[k]
            if isinstance(item, tuple):
                head, inner = item
                out += [head, *self.block(inner), head[:len(head) - len(head.lstrip())] + "}"]
                k -= 1
            elif isinstance(item, list):  # a fused block: its work twice
                out += [_unnamed(line) for line in item] * 2
                k -= 1
            else:
                group = self._group(items, k)
                out += self._statement(items[k - len(group) + 1:k + 1])
                k -= len(group)
        return out

    def _group(self, items: list, k: int) -> list[str]:
        """The run of weight matmuls ending at item k that read one input (q, k, v)."""
        first = _matmul(items[k])
        if first is None:
            return [items[k]]
        run = [items[k]]
        j = k - 1
        while j >= 0 and isinstance(items[j], str) and (m := _matmul(items[j])) is not None and \
                m.group("c") == first.group("c") and _same_input(m.group("a"), first.group("a")):
            run.insert(0, items[j])
            j -= 1
        return run

    def _statement(self, run: list[str]) -> list[str]:
        lead = run[0][:len(run[0]) - len(run[0].lstrip())]
        matches = [_matmul(line) for line in run]
        if matches[0] is None:
            line = run[0]
            code = line.split("#", 1)[0].strip()
            word = code.split(None, 1)[0]
            if word == "cache":  # the keys and values a cache would keep: no gradient of their own
                return []
            if word in ("param", "embedding"):
                return [lead + s for s in self._syncs(code)]
            if word == "gather" and self.fsdp:  # its backward scatters into the table's gradient, whole
                line = line.replace(sub("D", self.fsdp), "D")
            if word.startswith("AllToAll"):  # an expert exchange: the gradients go back the way they came
                return [lead + _reversed_exchange(code)]
            if word.startswith("AllGather"):  # the sequence's keys or values: their gradients scattered back
                local, whole = (t.strip() for t in code.split(None, 1)[1].split("->"))
                over = ",".join(self.sequence)
                return [f"{lead}ReduceScatter_{{{over},S}} {whole} {{U_{braced(self.sequence)}}} -> {local}"
                        "   # the gradient of the keys or values"]
            return [_unnamed(line)] * 2
        out = [lead + self._input_grad([m for m in matches if m is not None], lead)]
        for m in reversed(matches):
            assert m is not None
            a, w, y = m.group("a"), m.group("w"), _gradient(m.group("y"), m.group("a"))
            w_names = {_bare(d) for d in dims_of(w)}  # dims a shares with w (an expert's E) are not summed
            batch = [_bare(d) for d in dims_of(a) if _bare(d) not in w_names]
            out.append(f"{lead}{a} *_{_contracted(batch)} {y} -> {w}   # the gradient of a weight")
        return out

    def _input_grad(self, matches: list[re.Match], lead: str) -> str:
        """dA: the output's gradient through the weights (side by side where several)."""
        first = matches[0]
        a, w, y = first.group("a"), first.group("w"), _gradient(first.group("y"), first.group("a"))
        # the dims summed, and those the weight shares with its input (a batched matmul's, as
        # an expert's E): neither is the weight's own, summed in the gradient of the input
        c = {d.strip() for d in first.group("c").strip("{}").split(",")} | \
            ({_bare(d) for d in dims_of(a)} & {_bare(d) for d in dims_of(w)})
        free = [d for d in dims_of(w) if _bare(d) not in c]
        if len(matches) == 1:
            return f"{y} *_{_contracted([_bare(d) for d in free])} {w} -> {a}   # the gradient of the input"
        sizes, axes = [], set()
        for m in matches:
            mfree = [d for d in dims_of(m.group("w")) if _bare(d) not in c]
            sizes.append("*".join(_bare(d) for d in mfree) or "1")
            axes |= {"".join(_axes(d) for d in mfree)}
        name = f"J{len(self.widths) + 1}"
        terms = dict.fromkeys(sizes)
        self.widths.append((name, " + ".join(t if sizes.count(t) == 1 else f"{sizes.count(t)}*{t}" for t in terms)))
        width = sub(name, axes.pop() if len(axes) == 1 else "")
        kept = [d for d in dims_of(w) if _bare(d) in c]
        dy = _tensor(_dtype(y), [d for d in dims_of(y) if _bare(d) not in {_bare(f) for f in free}] + [width])
        wide = _tensor(_dtype(w), kept + [width])
        return f"{dy} *_{name} {wide} -> {a}   # the input's gradient through {len(matches)} weights side by side"

    def _syncs(self, code: str) -> list[str]:
        """The reductions of the gradients of the declared parameters no matmul reads."""
        out = []
        for _, tensor in _DECLARED.findall(code.split(None, 1)[1]):
            if _bare_tensor(tensor) in self.matmul_weights or not (self.batch or self.fsdp):
                continue
            dims = dims_of(tensor)
            fsdp = sub("D", self.fsdp)
            whole = _tensor(_dtype(tensor), ["D" if d == fsdp else d for d in dims])
            if fsdp in dims and self.fsdp:
                grad = _tensor(_dtype(tensor), dims)
                over = ",".join(self.fsdp)
                out.append(f"ReduceScatter_{{{over},D}} {whole} {{U_{braced(self.fsdp)}}} -> {grad}")
                rest = self.batch
                reduced = grad
            else:
                rest = self.batch + self.fsdp
                reduced = whole
            if rest:
                out.append(f"AllReduce_{braced(rest)} {reduced} {{U_{braced(rest)}}} -> {reduced}")
        return [line + "   # a parameter's gradient" for line in out]


def _matmul(item) -> re.Match | None:
    if not isinstance(item, str):
        return None
    m = _MATMUL.match(item.split("#", 1)[0].strip())
    return m if m is not None and is_parameter(m.group("w")) else None


def _same_input(a: str, b: str) -> bool:
    """One input (S = T in training: k and v read the keys' side of the same tensor)."""
    return a.replace("S", "T") == b.replace("S", "T")


def _gradient(y: str, a: str) -> str:
    """The gradient of a matmul's output, in its input's dtype: a router's fp32 logits
    come back as a bf16 gradient, the backward matmuls running in the forward's dtype."""
    return _tensor(_dtype(a), dims_of(y))


def _reversed_exchange(code: str) -> str:
    """An AllToAll run backwards: `AllToAll_{M,E} x -> y` becomes `AllToAll_{M,D'} y -> x`,
    D' the dim of x the axes split."""
    word, rest = code.split(None, 1)
    before, after = (t.strip() for t in rest.split("->"))
    axes = word.split("_", 1)[1].strip("{}").split(",")[:-1]
    dim = next(_bare(d) for d in dims_of(before) if set(axes) <= set(_axes(d)))
    return f"AllToAll_{{{','.join(axes)},{dim}}} {after} -> {before}   # the gradients back"


def _unnamed(line: str) -> str:
    """A forward line without its tensor names (they name the forward's tensors)."""
    return _NAME.sub("", line)
