"""Strategy families: a plan's strategies costed by formula, each family derived once.

A plan tries hundreds of strategies of one model, and most differ only in their sizes:
fsdp=64,sp=2 and fsdp=128,sp=4 write the same program with other numbers in its mesh. A
family is that program with every kind the plan searches on its axes, each size a
symbol (a kind a member leaves out takes axes of one chip), under one ZeRO stage, one
pipeline, one schedule and one microbatch count. A pipeline's stage count is its pp axes'
sizes together, a formula like the others (J*P): each end stage is a program of its own,
of L/(J*P) layers, run as 4*J*P microbatches (unless told how many) of B/M sequences, the
stages' B a symbol given member by member; its sends between stages are a symbol for their
seconds per byte over the member's slower pp link. It is costed once, by the same engine
(`report.assemble`), on a mesh of deferred axes (`mesh.MeshAxis.deferred`): every size
a symbol, and every collective V times a symbol for its seconds per byte, with a symbol
for its latency floor (`collectives.rate_symbols`). Where a member's axes lie (a torus's
pieces and rings, NVLink or the network between domains) follows from its sizes, so each
member's seconds per byte and latency are worked out on its own mesh
(`collectives.time` at V = 1: the time is linear in V).

The family's formulas are compiled once into exact rational arithmetic (`_Compiled`:
gmpy2's rationals, max, floor; no float anywhere), so a member's figures are the very
numbers `symroof.model` gives its strategy, not approximations of them: ties stay ties,
and a plan ranks as it did. tests/models/test_families.py checks every figure against
the model's on random models, chips and strategies.

A process keeps the families it derived (`for_plan`: a sweep over chip counts derives
each once), and the user's cache directory keeps them between runs, as JSON trees of a
few operations, read back only by the code and data that wrote them and checked node by
node (`_Family.read`); SYMROOF_CACHE=off keeps none there.

A member the formulas cannot stand for is costed whole by the caller (`Families.costing`
returns None): a sharded dim its sizes do not split evenly (its own costing says where),
a pipeline whose stages or microbatches do not split the layers or the batch
(`pipeline.check`, as its own costing checks it), axes or a head layout the family does
not have, a formula with an operation that has no exact form here, or a family its own
costing refuses (an error, said by the member's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import sympy
from gmpy2 import mpq

from ..errors import HardwareError, SpecError
from ..hardware.chips import Chip
from ..hardware.machines import Machine
from ..hardware.topology import Piece, lay_out
from ..ir import dim_symbol, tensors_of
from ..lang.structure import read_structured
from ..mesh import Mesh, MeshAxis
from ..resources import resource_path, user_cache
from ..roofline.collectives import check_domain
from ..roofline.collectives import time as collective_time
from . import kinds, pipeline, strategy_costs
from .decls import Options
from .pipeline import SEND, send_link
from .report import assemble, sharded_source, with_defaults
from .strategies import Strategy, head_axes, mesh_axes
from .whole import Model

# the figures a plan reads of a strategy (Costing), each a formula of its family
_FIGURES = ("hbm_per_chip", "optimizer_bytes", "grad_bytes", "activation_bytes", "t_step", "tokens")
_ROOFS = ("t_math", "t_comms", "t_network")
_MEMORY = ("weight_bytes", "grad_bytes", "optimizer_bytes", "activation_bytes")  # training's, a pipeline stage's


@dataclass
class Costing:
    """What the planner reads of one costed strategy, as numbers: its memory a chip, the
    parts of it the ZeRO stages and microbatches change, its step, the roofs of the
    analysis that bounds it (a pipeline's last stage, an accumulation's microbatch) and
    its network time split (`strategy_costs.times`). `model` is the strategy's model where
    it was costed whole (None for a family's member: the planner builds it to show it)."""

    mode: str
    piped: bool
    accumulated: bool
    hbm_per_chip: sympy.Expr
    optimizer_bytes: sympy.Expr
    grad_bytes: sympy.Expr
    activation_bytes: sympy.Expr
    t_step: sympy.Expr
    tokens: sympy.Expr
    roofs: dict[str, sympy.Expr]
    times: dict[str, sympy.Expr]
    batch: int | None  # the step's sequences (B)
    dp_chips: int  # the chips of the data-parallel axes (1 without)
    rates: frozenset[str]  # the chip rates its work runs at (Analysis.rates)
    model: Model | None = None

    @classmethod
    def of(cls, m: Model) -> Costing:
        """A model's, costed whole."""
        mesh = m.structured.program.mesh
        dp = "".join(axes for kind, axes in m.options.strategy if kinds.kind(kind).data)
        return cls(**_figures_of(m), batch=int(m.sizes["B"]) if "B" in m.sizes else None,
                   dp_chips=int(mesh.over(dp)) if mesh is not None else 1, rates=frozenset(m.analysis.rates),
                   model=m)


def _figures_of(m: Model, family: bool = False) -> dict[str, Any]:
    """A model's figures the planner reads (as formulas, for a `family`'s model). A
    pipeline's memory is its fuller end stage's, which a family's sizes do not tell
    (pipeline.fullest): there both stages' are kept, and each member takes the fuller."""
    analysis = m.step_analysis if m.pipeline is None else m.pipeline.last.step_analysis
    stages = {f"stage{k}.{name}": value for k in (0, 1) for name, value in m.pipeline.memory(k).items()} \
        if m.pipeline is not None and family else {}
    return {"mode": m.options.mode, "piped": m.pipeline is not None, "accumulated": m.accumulation is not None,
            **{name: getattr(m, name) for name in _FIGURES if not stages or name in ("t_step", "tokens")},
            **stages, "roofs": {name: getattr(analysis, name) for name in _ROOFS}, "times": strategy_costs.times(m)}


@dataclass(frozen=True)
class _Key:
    zero: int
    pipeline: tuple[tuple[str, str], ...]  # the pp axes and their links (none: no pipeline)
    schedule: str | None
    microbatches: int | None
    copies: str  # tp's axes that copy the KV heads ("" for none)
    # an accumulation's: the member's own kinds and axes, which decide by name which of its
    # collectives run once a step and which each microbatch (an axis of one chip is not one the
    # member has; a pipeline's such decision is written member by member: MeshAxis.alone)
    own: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


class Families:
    """A plan's families (its model, mode, chip, batch and options: the model's under no
    strategy), each derived when a member first asks for it, and kept: `costing` gives a
    member's figures. `for_plan` keeps them from plan to plan."""

    def __init__(self, config: dict, mode: str, target: Machine, batch: dict[str, int], searched: Sequence[str],
                 options: Options, outer: bool):
        self.config, self.mode, self.target, self.batch = config, mode, target, batch
        # the kinds every family carries (not pp's, whose stages are numbers), each on its axes:
        # between domains too (`outer`) where some strategy spans more than one
        self.searched = tuple(k for k in searched if not kinds.kind(k).stages)
        self.options, self.outer = options, outer
        self._found: dict[_Key, _Family | None] = {}

    def costing(self, member: Strategy, zero: int, schedule: str | None, microbatches: int | None) -> Costing | None:
        """A member's figures (member: its strategy's axes, with sizes, as `strategy_of`
        lays them), or None where its family cannot stand for it."""
        stages = kinds.stages().name
        copies = ""
        for tp in kinds.where(lambda k: k.splits_width, member):
            copies = head_axes(member[tp.name], int(self.config["sizes"]["K"]), tp.name)[1]
            if copies and copies != "".join(a for a, *_ in member[tp.name] if a.islower()):
                return None  # the copies on an axis of their own: only the lowercase ones are a family's
        own = tuple((kind, tuple((a, link) for a, _, link in axes)) for kind, axes in member.items()
                    if kind != stages) if microbatches else ()
        piped = member.get(stages, ())
        if piped and not self._stages_fit(member, piped, schedule, microbatches):
            return None  # its own costing says why
        key = _Key(zero, self._pipeline(piped), schedule, microbatches, copies, own)
        if key not in self._found:
            self._found[key] = self._derive(key)
        family = self._found[key]
        return family.evaluate(member) if family is not None else None

    def _stages_fit(self, member: Strategy, piped: tuple[tuple[str, int, str], ...], schedule: str | None,
                    microbatches: int | None) -> bool:
        """Whether a member's pipeline splits the layers and its replicas' batches as its own
        costing requires (`pipeline.check`): its family's stage count is a formula."""
        count = math.prod(size for _, size, _ in piped)
        micro = pipeline.microbatches_default(count) if microbatches is None else microbatches
        replicas = math.prod(size for kind in kinds.where(lambda k: k.splits_batch, member)
                             for _, size, _ in member[kind.name])
        try:  # as `report.assemble` checks a pipeline whose stage count is a number
            pipeline.check_batch(int(self.config["sizes"]["L"]), count, micro, self.batch.get("B"), replicas,
                                 pipeline.parse_schedule(schedule))
        except SpecError:
            return False
        return True

    def _pipeline(self, axes: tuple[tuple[str, int, str], ...]) -> tuple[tuple[str, str], ...]:
        """A family's pp axes for a member's: every axis the plan puts pp on (its own, and its
        outer one between domains), the member taking 1 chip on those it leaves out, so
        that pp=16 on J=16 or on J=4,P=4 is one family (of every stage count: the sizes
        together); a member's axes that are not those, as they are."""
        pp = kinds.stages()
        every = (*(((pp.outer, "dcn"),) if self.outer else ()), (pp.axis, "ici"))
        own = tuple((a, link) for a, _, link in axes)
        return every if own and set(own) <= set(every) else own

    def _superset(self, key: _Key) -> Strategy:
        """The family's strategy: each kind on its axes, every size None (a symbol; typed as
        a Strategy: its readers take the axes' names and links, the pipeline's stage count
        from the key)."""
        out: dict[str, tuple[tuple[str, int | None, str], ...]] = \
            {kind: tuple((a, None, link) for a, link in axes) for kind, axes in key.own}
        for kind in kinds.where(lambda k: not key.own and (k.name in self.searched or k is kinds.rest())):
            name = kinds.zero_stage(key.zero).name if kind is kinds.rest() else kind.name
            outer = ((kind.outer, None, "dcn"),) if self.outer and not kind.splits_width else ()
            copies = ((kind.axis.lower(), None, "ici"),) if kind.splits_width and key.copies else ()
            out[name] = (*outer, (kind.axis, None, "ici"), *copies)
        if key.pipeline:
            out[kinds.stages().name] = tuple((a, None, link) for a, link in key.pipeline)
        return cast(Strategy, out)

    def _derive(self, key: _Key) -> _Family | None:
        """The family of `key`: as the disk kept it (`_on_disk`), else costed and kept."""
        superset = self._superset(key)
        path = _on_disk(_inputs(self.config, self.mode, self.target, self.batch, self.searched, self.options,
                                self.outer) + repr(key))
        if path is not None:
            try:
                if path.is_file() and path.stat().st_size <= _DISK_BYTES:
                    data = json.loads(path.read_text(encoding="utf-8"))
                    return None if data is None else _Family.read(data, self.target, superset, self.batch.get("B"),
                                                                  key.microbatches)
            except (OSError, ValueError, RecursionError):
                pass  # not what this code keeps: costed again, and kept afresh
        family = self._costed(key, superset)
        if path is not None:
            _write(path, json.dumps(None if family is None else family.to_json(), separators=(",", ":")))
        return family

    def _costed(self, key: _Key, superset: Strategy) -> _Family | None:
        mesh = Mesh(tuple(MeshAxis(a, size, link, None, True) for axes in superset.values() for a, size, link in axes))
        try:
            built, about = sharded_source(self.config, self.mode, superset, microbatches=key.microbatches,
                                          schedule=key.schedule)
            structured = read_structured(built, mesh=mesh)
            dims = {s.name for s in structured.relations} | {d.name for s in structured.program.statements
                                                             for t in tensors_of(s) for d in t.dims if d.name}
            if dims & set(mesh.names):  # a mesh axis named as a dim: their symbols would be one
                return None
            sizes = with_defaults(structured, self.mode, self.config["sizes"]["context"], dict(self.batch))
            stages = about.pop("stage_programs", None)
            about.update(mode=self.mode, sizes=sizes, chip=self.target.name, chips=1)
            m = assemble(structured, about, stages, self.target, sizes,
                         dataclasses.replace(self.options, strategy=tuple(about["strategy"].items())), mesh)
            figures = _figures_of(m, family=True)
            rates = frozenset(m.analysis.rates)
            splits = _splits(m)
        except (SpecError, HardwareError):
            return None  # its members are costed whole: each says what is wrong with it
        return _Family.of(figures, splits, rates, self.target, superset, self.batch.get("B"), key.microbatches)


_DISK_BYTES = 64 * 2**20  # the most a kept family may take on disk


@functools.cache
def _fingerprint() -> str:
    """symroof's code and data as they are: a kept family is only read back by the very code
    (and chip and model files) that kept it."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for path in sorted([*package.rglob("*.py"), *(resource_path(n) for n in ("hardware.json", "models.json"))]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _on_disk(inputs: str) -> Path | None:
    """Where the disk keeps a family of these inputs (`user_cache`), None where it keeps none:
    the user's cache directory is not their own, or SYMROOF_CACHE=off."""
    if os.environ.get("SYMROOF_CACHE", "").lower() in ("off", "0", "no"):
        return None
    name = hashlib.sha256(f"{_fingerprint()}\n{inputs}".encode()).hexdigest()[:32]
    folder = user_cache("families")
    if folder is None:
        return None
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder / f"{name}.json"


def _write(path: Path, text: str) -> None:
    """Written whole or not at all (a temporary file beside it, renamed); a disk that refuses
    keeps nothing, and the family is costed again next time."""
    written = None
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp") as f:
            written = f.name
            f.write(text)
        os.replace(written, path)
    except OSError:
        if written is not None:
            with contextlib.suppress(OSError):
                os.unlink(written)


def _inputs(config: dict, mode: str, target: Machine, batch: dict[str, int], searched: Sequence[str],
            options: Options, outer: bool) -> str:
    """Everything a plan's families depend on, as text (a key of the families kept in memory
    and on disk): the chip by its every figure, not its name alone (`Chip.fingerprint`)."""
    chip = target.chip.fingerprint() if target.chip is not None else None
    return repr((json.dumps(config, sort_keys=True, default=str), mode, target, chip, sorted(batch.items()),
                 sorted(searched), options, outer))


_KEPT: OrderedDict[str, Families] = OrderedDict()  # for_plan's, the latest last
_KEEP = 16


def for_plan(config: dict, mode: str, target: Machine, batch: dict[str, int], searched: Sequence[str],
             options: Options, outer: bool) -> Families:
    """A plan's families, as an earlier plan of the same model, mode, chip, batch, options
    and kinds left them (a sweep over chip counts derives each family once): the
    `_KEEP` latest, each told apart by everything its formulas depend on."""
    key = _inputs(config, mode, target, batch, searched, options, outer)
    if key in _KEPT:
        _KEPT.move_to_end(key)
    else:
        _KEPT[key] = Families(config, mode, target, batch, searched, options, outer)
        while len(_KEPT) > _KEEP:
            _KEPT.popitem(last=False)
    return _KEPT[key]


def _splits(m: Model) -> tuple[tuple[sympy.Expr, str], ...]:
    """Every sharded dim's size at the model's sizes, with the axes that split it: a member
    whose sizes do not split one evenly is costed whole (which says where). A size is a
    number, or a formula of the family's sizes (a pipeline family's stages' microbatch B),
    each member's worked out with its figures."""
    found: set[tuple[sympy.Expr, str]] = set()
    for each in (m, *((m.pipeline.first, m.pipeline.last) if m.pipeline is not None else ())):
        for statement in each.structured.program.statements:
            for tensor in tensors_of(statement):
                for dim in tensor.dims:
                    if dim.axes and dim.name is not None:
                        found.add((each.at(dim_symbol(dim.name)), "".join(dim.axes)))
        for declared in each.structured.declared:
            for expr, axes in zip(declared.dims, declared.axes):
                if axes:
                    found.add((each.at(expr), "".join(axes)))
    return tuple(sorted(found, key=str))


def _expr(value: object) -> sympy.Expr:
    return value if isinstance(value, sympy.Basic) else sympy.Integer(int(value))  # type: ignore[call-overload]


_WHAT = ("per_byte", "latency", "hops")  # a collective's rate symbols, in the order `_time` gives them
_RATE = re.compile(r"(per_byte|latency|hops)\[(\w+) (\w+)\]")
_NAME = re.compile(r"(stage[01]\.)?\w+|(roofs|times)\.\w+")  # a figure's name in a kept family
_ALONE = re.compile(r"alone\[(\w+)\]")


class _Family:
    """One family's formulas, compiled, and how to evaluate a member."""

    def __init__(self, compiled: _Compiled, names: tuple[str, ...], layout: dict[str, Any], splits: tuple,
                 rates: frozenset[str], target: Machine, superset: Strategy, batch: int | None,
                 microbatches: int | None):
        self.compiled, self.names, self.layout, self.splits = compiled, names, layout, splits
        self.rates, self.target, self.batch, self.microbatches = rates, target, batch, microbatches
        self.axes = {a for axes in superset.values() for a, *_ in axes}
        self.stages = tuple(a for a, *_ in superset.get(kinds.stages().name, ()))  # the pp axes
        # each symbol's part: ("size", axis), ("alone", axis), ("rate", k, kind, axes) (k: _WHAT's
        # index) or, a pipeline's, ("micro", "B"): its stages' B, a microbatch's sequences (B/M)
        self._parts: list[tuple[Any, ...]] = []
        for name in compiled.symbols:
            rate, alone = _RATE.fullmatch(name), _ALONE.fullmatch(name)
            if not (rate or alone or name in self.axes or name == "B" and self.stages):
                raise ValueError(f"a family's formula reads {name!r:.40}, no axis of its own")
            self._parts.append(("rate", _WHAT.index(rate.group(1)), *rate.groups()[1:]) if rate
                               else ("alone", alone.group(1)) if alone
                               else ("size", name) if name in self.axes else ("micro", name))

    @classmethod
    def of(cls, figures: dict[str, Any], splits: tuple[tuple[sympy.Expr, str], ...], rates: frozenset[str],
           target: Machine, superset: Strategy, batch: int | None, microbatches: int | None) -> _Family | None:
        flat = {**{k: v for k, v in figures.items() if k in _FIGURES or k.startswith("stage")},
                **{f"roofs.{k}": v for k, v in figures["roofs"].items()},
                **{f"times.{k}": v for k, v in figures["times"].items()}}
        known = {a for each in superset.values() for a, *_ in each}  # its sizes, and a pipeline's stages' B
        known |= {"B"} if kinds.stages().name in superset else set()
        kept: list[tuple[int | str, str]] = []  # a split's size: a number, or the name of its formula's figure
        for value, split in splits:
            if value.is_Integer:
                kept.append((int(value), split))
            elif value.free_symbols and {s.name for s in value.free_symbols} <= known:
                flat[f"split{len(flat)}"] = value
                kept.append((f"split{len(flat) - 1}", split))
            else:
                return None  # a sharded dim whose size is no formula of the family's sizes: costed whole
        splits_kept = tuple(kept)
        names = tuple(flat)
        formulas = [_expr(flat[n]) for n in names]
        symbols = sorted({s for e in formulas for s in e.free_symbols}, key=str)
        place = {s: k for k, s in enumerate(symbols)}
        try:
            made: dict[sympy.Basic, Any] = {}  # each subformula's tree, made once (the figures share many)
            trees = [_tree(f, place, made) for f in formulas]
        except _Inexact:
            return None
        layout = {k: figures[k] for k in ("mode", "piped", "accumulated")}
        return cls(_Compiled(trees, [s.name for s in symbols]), names, layout, splits_kept, rates, target, superset,
                   batch, microbatches)

    def to_json(self) -> dict[str, Any]:
        """What the disk keeps of it (`Families._derive`; read back by `read`)."""
        return {"names": list(self.names), "symbols": self.compiled.symbols, "trees": self.compiled.trees,
                "layout": self.layout, "splits": [list(s) for s in self.splits], "rates": sorted(self.rates)}

    @classmethod
    def read(cls, data: Any, target: Machine, superset: Strategy, batch: int | None, microbatches: int | None
             ) -> _Family:
        """A family from what the disk kept (`to_json`), every part checked (ValueError where
        one is not what `to_json` writes)."""
        if not isinstance(data, dict) or set(data) != {"names", "symbols", "trees", "layout", "splits", "rates"}:
            raise ValueError("not a family")
        names, symbols, trees, layout = data["names"], data["symbols"], data["trees"], data["layout"]
        words = (list, names), (list, symbols), (list, data["rates"])
        if not all(isinstance(v, kind) and all(isinstance(x, str) and len(x) < 80 for x in v) for kind, v in words):
            raise ValueError("a family's names are not words")
        if not isinstance(trees, list) or len(trees) != len(names) or not all(_NAME.fullmatch(n) for n in names):
            raise ValueError("a family's formulas are not its figures'")
        if not isinstance(layout, dict) or set(layout) != {"mode", "piped", "accumulated"} \
                or layout["mode"] not in ("train", "prefill", "decode") \
                or not all(isinstance(layout[k], bool) for k in ("piped", "accumulated")):
            raise ValueError("a family's layout is not one")
        splits = data["splits"]
        if not isinstance(splits, list) or not all(
                isinstance(s, list) and len(s) == 2 and isinstance(s[1], str) and s[1].isalpha()
                and (isinstance(s[0], int) and not isinstance(s[0], bool) and 0 < s[0] < 10**18
                     or isinstance(s[0], str) and s[0].startswith("split") and s[0] in names) for s in splits):
            raise ValueError("a family's splits are not sizes (or their figures) and axes")
        return cls(_Compiled(trees, symbols), tuple(names), layout, tuple((v, a) for v, a in splits),
                   frozenset(data["rates"]), target, superset, batch, microbatches)

    def _time(self, kind: str, over: str, axes: tuple[MeshAxis, ...], pieces: dict[str, tuple[Piece, ...]]
              ) -> tuple[mpq, mpq, mpq] | None:
        """A collective's seconds per byte, latency and hops on a member's mesh (`axes`, its
        ICI axes lying on the torus as `pieces` says: `lay_out`), over the axes of `over` the
        member has (none: no such collective, all 0); None where one is no rational number.
        Kept by what decides it: the axes, and the pieces each lies on (which alone depend on
        the rest of the mesh)."""
        laid = tuple(sorted((a for a in axes if a.name in over and a.size != 1), key=lambda a: over.index(a.name)))
        if not laid:
            return _NO_TIME
        key = (self.target, kind, tuple((a, pieces.get(a.name)) for a in laid))
        if key not in _TIMED:
            if len(_TIMED) >= _TIMED_MOST:
                _TIMED.clear()
            _TIMED[key] = _timed(kind, laid, axes, self.target)
        return _TIMED[key]

    def evaluate(self, member: Strategy) -> Costing | None:
        axes = mesh_axes(member)
        sizes = {a.name: a.number for a in axes}
        if set(sizes) - self.axes:
            return None
        for value, split in self.splits:
            if isinstance(value, int) and value % math.prod(sizes.get(a, 1) for a in split):
                return None  # its own costing says which dim does not split
        args: list[int | mpq] = []
        times: dict[tuple[str, str], tuple[mpq, mpq, mpq] | None] = {}  # a collective's three, asked for each
        pieces: dict[str, tuple[Piece, ...]] = {}
        if any(part[0] == "rate" for part in self._parts):
            check_domain(list(axes), self.target.chip)  # as a member's own collectives are checked first
            pieces = _laid_out(axes, self.target.chip)
        for part in self._parts:
            if part[0] == "size":
                args.append(sizes.get(part[1], 1))
            elif part[0] == "alone":
                args.append(int(sizes.get(part[1], 1) == 1))
            elif part[0] == "micro":
                stages = math.prod(sizes.get(a, 1) for a in self.stages)
                count = pipeline.microbatches_default(stages) if self.microbatches is None else self.microbatches
                if self.batch is None or self.batch % count:
                    return None  # its own costing says why (pipeline.check)
                args.append(self.batch // count)
            else:
                _, what, kind, over = part
                if (kind, over) not in times:
                    times[kind, over] = self._time(kind, over, axes, pieces)
                timed = times[kind, over]
                if timed is None:
                    return None
                args.append(timed[what])
        found = dict(zip(self.names, self.compiled(args)))
        for value, split in self.splits:
            if isinstance(value, str):
                size = found.pop(value)
                if mpq(size).denominator != 1 or mpq(size).numerator % math.prod(sizes.get(a, 1) for a in split):
                    return None  # as above: a microbatch's B/M (pipeline.py) that does not split
        values = {name: _rational(v) for name, v in found.items()}
        if "stage0.weight_bytes" in values:  # a pipeline's: its fuller end stage's (as pipeline.fullest tells it)
            first, last = ({name: values[f"stage{k}.{name}"] for name in _MEMORY} for k in (0, 1))
            fuller = last if sum(last.values()) - sum(first.values()) > 0 else first
            values.update(fuller, hbm_per_chip=sum(fuller.values()))  # training's memory, on one chip of the mesh
        rest = "".join(a for kind, each in member.items() if kinds.kind(kind).data for a, *_ in each)
        return Costing(**self.layout, **{k: values[k] for k in _FIGURES},
                       roofs={k: values[f"roofs.{k}"] for k in _ROOFS},
                       times={k[6:]: v for k, v in values.items() if k.startswith("times.")},
                       batch=self.batch, dp_chips=math.prod(sizes[a] for a in rest), rates=self.rates)


_NO_TIME = (mpq(0), mpq(0), mpq(0))


# collective times at V = 1 (`_timed`), by chip, kind and axes with their pieces (`_time`): the
# same for every family of a plan, and plan to plan (bounded: cleared when full, by `_time`)
_TIMED: dict[tuple, tuple[mpq, mpq, mpq] | None] = {}
_TIMED_MOST = 1 << 17


@functools.lru_cache(maxsize=4096)
def _laid_out(axes: tuple[MeshAxis, ...], chip: Chip | None) -> dict[str, tuple[Piece, ...]]:
    """Where a member's ICI axes lie on its chip's torus (`lay_out`; read, never changed)."""
    return lay_out(axes, chip)


def _timed(kind: str, laid: tuple[MeshAxis, ...], axes: tuple[MeshAxis, ...], target: Machine
           ) -> tuple[mpq, mpq, mpq] | None:
    """`collective_time` at V = 1 over `laid` on the mesh `axes`, as exact numbers (None where
    one is no rational number); a pipeline's send, a byte over its slower link
    (`pipeline.send_link`), without a latency floor (Pipeline.t_send has none)."""
    if kind == SEND:
        one_way = send_link(laid, target).one_way
        if not (one_way.is_Rational and one_way > 0):
            return None
        return mpq(int(one_way.q), int(one_way.p)), mpq(0), mpq(0)
    timed = collective_time(kind, list(laid), sympy.Integer(1), target.chip, target.ici_bw, axes, words=False)
    if not all(v.is_Rational for v in (timed.bandwidth, timed.latency, timed.hops)):
        return None
    per_byte, latency, hops = (mpq(int(v.p), int(v.q)) for v in (timed.bandwidth, timed.latency, timed.hops))
    return per_byte, latency, hops


class _Inexact(Exception):
    """A formula with an operation `_Compiled` has no exact form for."""


def _rational(value: int | mpq) -> sympy.Rational:
    return sympy.Rational(int(value.numerator), int(value.denominator))


def _inverse(x: int | mpq) -> mpq:
    return mpq(1) / x


# a formula as a tree of JSON values, what `_Compiled` compiles and the disk keeps: an int; ["q",
# p, q] a fraction; ["a", k] the k-th symbol; ["pow", node, n] an integer power; [op, node, ...]
# for op one of _OPS
_OPS = {"+": " + ", "*": " * ", "max": "max", "min": "min", "floor": "floor", "ceil": "ceil"}
_CALLS = {sympy.Max: "max", sympy.Min: "min", sympy.floor: "floor", sympy.ceiling: "ceil"}
MAX_DIGITS = 400  # of a number in a kept formula
MAX_NODES = 2_000_000  # in a family's kept formulas
MAX_DEPTH = 400


def _tree(e: sympy.Basic, place: dict[sympy.Symbol, int], made: dict[sympy.Basic, Any]) -> Any:
    """A formula's tree (see above); _Inexact for an operation without an exact form. A
    subformula met again is the tree `made` the first time: the same object, which
    `_Compiled` then compiles once."""
    found = made.get(e)
    if found is None:
        found = made[e] = _node(e, place, made)
    return found


def _node(e: sympy.Basic, place: dict[sympy.Symbol, int], made: dict[sympy.Basic, Any]) -> Any:
    if e.is_Integer:
        return int(e)
    if e.is_Rational:
        return ["q", int(e.p), int(e.q)]
    if e.is_Symbol:
        return ["a", place[e]]
    args = [_tree(x, place, made) for x in e.args]
    if e.is_Add or e.is_Mul:
        return ["+" if e.is_Add else "*", *args]
    if e.is_Pow and e.exp.is_Integer:
        return ["pow", args[0], int(e.exp)]
    if e.func in _CALLS:
        return [_CALLS[e.func], *args]
    raise _Inexact(str(e.func))


class _Compiled:
    """Formulas as one Python function of their symbols, in exact arithmetic: integers and
    rationals (gmpy2's mpq, which sympy's own numbers use where it is installed), max and
    min, floor and ceiling, integer powers. The function's text is written here from the
    formulas' trees (`_tree`), never from user text: each symbol is an argument by position,
    each fraction a constant by index and each operation one of _OPS, so no name or number
    from a formula is written into it. Each operation is a line of its own, computed once
    however many of the formulas share it (a Max's terms recur across the figures). A tree
    read back from the disk is checked node by node as it is compiled (ValueError for one
    that is no such tree)."""

    def __init__(self, trees: list[Any], symbols: list[str]):
        self.trees, self.symbols = trees, symbols
        self._constants: list[mpq] = []
        self._nodes = 0
        self._lines: dict[str, str] = {}  # an operation's code: the local that holds its value
        self._done: dict[int, str] = {}  # a tree node's code, by the node (alive while compiling)
        results = ", ".join(self._code(t, 0) for t in trees)
        namespace = {"max": max, "min": min, "floor": math.floor, "ceil": math.ceil, "inverse": _inverse,
                     "c": tuple(self._constants)}
        body = "".join(f"    {local} = {code}\n" for code, local in self._lines.items())
        # written by _code from checked tree nodes alone (ints, indexes, _OPS), no text of anyone's
        code = compile(f"def formulas(a):\n{body}    return ({results},)\n", "<strategy family>", "exec")
        exec(code, namespace)  # safe: `code` is _code's, from checked tree nodes (above)
        self._function = cast(Callable[[list[int | mpq]], tuple[int | mpq, ...]], namespace["formulas"])

    def __call__(self, args: list[int | mpq]) -> tuple[int | mpq, ...]:
        return self._function(args)

    def _code(self, node: Any, depth: int) -> str:
        """A node's code, once for each node object (`_tree` makes a recurring subformula one
        object; JSON read back from the disk makes none, so each of its nodes counts)."""
        if isinstance(node, list):
            done = self._done.get(id(node))
            if done is None:
                done = self._done[id(node)] = self._written(node, depth)
            return done
        return self._written(node, depth)

    def _written(self, node: Any, depth: int) -> str:
        self._nodes += 1
        if self._nodes > MAX_NODES or depth > MAX_DEPTH:
            raise ValueError("a family's formulas are larger than symroof keeps")
        if isinstance(node, int) and not isinstance(node, bool):
            if len(str(abs(node))) > MAX_DIGITS:
                raise ValueError("a number in a family's formula has too many digits")
            return f"({node})"
        if not isinstance(node, list) or not node or not isinstance(node[0], str):
            raise ValueError(f"not a formula's node: {node!r:.40}")
        op, *rest = node
        if op == "q" and len(rest) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in rest) \
                and rest[1] > 0 and all(len(str(abs(x))) <= MAX_DIGITS for x in rest):
            self._constants.append(mpq(rest[0], rest[1]))
            return f"c[{len(self._constants) - 1}]"
        if op == "a" and len(rest) == 1 and isinstance(rest[0], int) and 0 <= rest[0] < len(self.symbols):
            return f"a[{rest[0]}]"
        if op == "pow" and len(rest) == 2 and isinstance(rest[1], int) and not isinstance(rest[1], bool) \
                and abs(rest[1]) <= 64:
            base = self._code(rest[0], depth + 1)
            return self._local(f"{base} ** {rest[1]}" if rest[1] >= 0 else f"inverse({base} ** {-rest[1]})")
        if op in _OPS and rest:
            args = [self._code(x, depth + 1) for x in rest]
            return self._local(_OPS[op].join(args) if op in ("+", "*") else f"{_OPS[op]}({', '.join(args)})")
        raise ValueError(f"not a formula's node: {op!r:.20}")

    def _local(self, code: str) -> str:
        """The local that holds an operation's value (its operands are locals, arguments and
        constants), a line of its own the first time the operation is met."""
        return self._lines.setdefault(code, f"t{len(self._lines)}")
