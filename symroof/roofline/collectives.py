"""What a collective costs on a chip's links.

The model, with V the bytes each chip holds of the collective's larger side (after an
AllGather, before a ReduceScatter, the unreduced block of an AllReduce) and N the chips
along an axis:

* AllGather and ReduceScatter over ICI axes that all close into rings (a torus axis at
  least as long as the chip's `wraparound_min_axis_size`) use both directions of every
  axis at once: V / (W_bidirectional x number of axes).
* Otherwise each axis is a line, or a switch (NVLink; DCN and PCIe, through each chip's
  NIC or host link): each chip takes in (N - 1)/N of V at the one-way bandwidth,
  (N - 1)/N x V / W_one_way, one axis after another, the slowest first while the array
  is smallest (gathering over X then Y, the array grows by N_X before crossing Y). On
  NVLink the one-way bandwidth is the GPU's egress; fully connected GPUs (MI300X)
  receive from every peer at once over a link each, V / (N x W_link).
* A torus axis closes into a ring at the chip's `wraparound_min_axis_size` and its
  multiples (4 on v4 and v5p, 16 on v5e and v6e); the ICI axes together may span at
  most the chip's domain (`domain_size`: a v5e pod of 256, an 8-GPU NVLink node).
* On a torus chip whose pod shape is known (`pod_shape`: 16 x 16 on v5e), the mesh's
  ICI axes are laid onto its physical axes (topology.py). An axis longer than any
  physical axis spans several (v5e's X=64: 16 x 4), and a collective over it costs
  what it costs over those pieces as separate axes: v5e's X=256 is two rings of 16,
  V / (2 x W_bidirectional) for an AllGather, not one ring of 256.
* AllReduce costs a ReduceScatter plus an AllGather: twice either.
* On a GPU cluster an axis past the NVLink node (on DCN: there the scale-out network,
  InfiniBand) is costed as NCCL's hierarchical algorithm runs it. An AllReduce over n GPUs
  of a node and m nodes is a ReduceScatter inside the node (each GPU (n - 1)/n of V at its
  NVLink egress), an AllReduce across the nodes of the V/n each GPU then holds, on its own
  NIC, and an AllGather inside the node: 2(n - 1)/n x V / W_nvlink + 2(m - 1)/m x (V/n) /
  W_nic, one-way bandwidths per GPU (the order above: the slow axis on the small array).
  Assumed: every GPU has a NIC of its own and crosses to the GPU of its rank in the other
  nodes (rail-optimized, as NVIDIA's reference architectures wire them), all at once; where
  the node's egress over its GPUs is less than one NIC, that share is the bandwidth.
* Permute (ppermute's neighbour exchange; V: each chip's block) sends each chip's block
  to the next chip along one axis, the last's to the first: V / W_one_way, every link
  busy one way at once; one hop on a ring or through a switch, N - 1 on a line (the last
  block's way back).
* AllToAll (V: each chip's block, the same size before and after; the whole array is
  N x V) costs a quarter of an AllGather of the whole array on a ring with wraparound,
  N x V / (4 x W_bidirectional): a quarter of the array crosses the ring's middle each
  way. On a line the middle link carries that quarter one way, N x V / (4 x W_one_way)
  (a little less for odd N). Through a switch (NVLink, a DCN NIC, PCIe) each chip sends
  (N - 1)/N of its block out of its own egress; fully connected, a 1/N piece to each
  peer over a link each. Over several axes, one axis after another.
* Each collective takes at least hops x the per-hop latency (a ring of N with
  wraparound: N/2 hops; without: N - 1; a switch: 1), so small arrays come out
  latency-bound. ICI, NVLink and Infinity Fabric take the chip's
  `interconnect.hop_latency_s`; a DCN axis one hop through the network at
  `dcn.hop_latency_s` (a GPU's scale-out network: `scaleout.hop_latency_s`). Where the
  chip has no hop latency for a link (PCIe has none), there is no floor, and the
  result says so.

Examples:
    >>> from symroof.hardware.chips import get_chip
    >>> from symroof.ir import MeshAxis
    >>> t = time("AllReduce", [MeshAxis("X", 2)], 2 * sympy.Symbol("V"), get_chip("v5e"))
    >>> t.bandwidth, t.latency
    (V/22500000000, 1/500000)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sympy

from ..errors import HardwareError
from ..hardware.chips import Chip
from ..hardware.topology import case_refused, check_cases, lay_out, spans
from ..ir import MeshAxis
from .oneline import link_line, time_line


@dataclass(frozen=True)
class Link:
    """How one mesh axis connects its chips."""

    name: str                        # "ICI", "NVLink", "DCN", "PCIe"
    one_way: sympy.Rational
    bidi: sympy.Rational | None
    ring: bool                       # closes into a ring with wraparound (both directions used)
    switch: bool                     # every chip reaches every other in one hop
    latency: sympy.Rational | None   # seconds per hop
    direct: bool = False             # a link of its own to every peer (fully connected)
    # where `ring` is a case taken for an axis without a size, what that case needs of it
    # ("X a multiple of 16"), said wherever the link is described; "" where its size decided
    case: str = ""

    def __repr__(self) -> str:
        return link_line(self)

    def describe(self) -> str:
        return f"{self.name} ({self.shape()}{self.case})"

    def shape(self) -> str:
        if self.switch:
            return "fully connected" if self.direct else "switch"
        return "ring with wraparound" if self.ring else "no wraparound"


@dataclass(frozen=True)
class Time:
    """A collective's time: bandwidth-bound, latency floor, and what it ran on."""

    bandwidth: sympy.Expr
    latency: sympy.Expr
    hops: sympy.Expr  # a number; over an axis without a size, a formula in it (X/2, X - 1)
    links: str
    latency_known: bool

    def __repr__(self) -> str:
        return time_line(self)

    @property
    def total(self) -> sympy.Expr:
        """The larger of the two (unevaluated where it depends on free dims)."""
        if not self.latency:
            return self.bandwidth
        if self.bandwidth.is_number:
            return sympy.Max(self.bandwidth, self.latency)
        return sympy.Max(self.bandwidth, self.latency, evaluate=False)


def link_name(axis: MeshAxis, chip: Chip | None) -> str:
    """An axis's link as the chip calls it: ICI on a TPU, NVLink on an H100; between
    domains DCN on a TPU, a GPU's scale-out network by its name (InfiniBand); PCIe."""
    if axis.link == "pcie":
        return "PCIe"
    if axis.link == "dcn":
        return chip.texts.get("scaleout.name", "DCN") if chip is not None and _scaleout(chip) else "DCN"
    return chip.texts.get("interconnect.name", "ICI") if chip is not None else "ICI"


def link(axis: MeshAxis, chip: Chip | None, ici_one_way: sympy.Expr | None = None,
         ring: bool | None = None) -> Link:
    """The link along a mesh axis, from the chip's figures. `ici_one_way` replaces the
    chip's per-link ICI (or NVLink) figure; with no chip it describes a plain line of
    links of that bandwidth, without wraparound (or with it, where the axis is written
    `@ring`) and with no known hop latency. `ring` says whether a torus axis closes into
    a ring, where its place on a slice decides (topology.spans); by default its own length
    does. An ICI axis written `@ring` or `@line` is that case where no chip decides (a
    symbolic chip, --ici-bw alone); on a chip, `check_cases` refuses a case its torus does
    not make, with why."""
    if axis.link in ("dcn", "pcie"):
        if chip is None:
            raise HardwareError(f"axis {axis.name} is on {axis.link.upper()}: name a chip for its figures")
        # switched networks: each chip's traffic goes through its own NIC (or host link)
        if axis.link == "pcie":
            pcie = chip.require("pcie_bandwidth_one_way_bytes_per_s", f"mesh axis {axis.name}")
            return Link(link_name(axis, chip), pcie, None, False, True, None)
        # GPUs: the scale-out NIC; the hop latency is that of the network whose bandwidth is used
        network = "scaleout" if _scaleout(chip) else "dcn"
        dcn = chip.figure(f"{network}.bandwidth_one_way_bytes_per_s_per_chip")
        if dcn is None:
            chip.require("dcn.bandwidth_one_way_bytes_per_s_per_chip", f"mesh axis {axis.name}")
        case = ""
        if network == "scaleout":
            dcn, case = _nic_share(chip, dcn)
        return Link(link_name(axis, chip), dcn, None, False, True, chip.figure(f"{network}.hop_latency_s"),
                    case=case)
    if chip is None:
        if ici_one_way is None:
            raise HardwareError("collectives need link figures: name a chip (--chip) or give --ici-bw")
        # no torus to decide: a line of links, or the ring written (X@ring: both directions)
        written = "" if axis.ring is None else f"; written {axis}"
        return Link(link_name(axis, chip), ici_one_way, 2 * ici_one_way, bool(axis.ring), False, None,
                    case=written)
    name = link_name(axis, chip)
    latency = chip.figure("interconnect.hop_latency_s")
    topology = chip.texts.get("interconnect.topology", "")
    links = chip.figure("interconnect.links_per_chip")
    if topology == "switch":
        egress = ici_one_way * links if ici_one_way and links else (
            ici_one_way or chip.require("interconnect.chip_bandwidth_one_way_bytes_per_s", f"mesh axis {axis.name}"))
        return Link(name, egress, None, False, True, latency)
    if topology == "mesh":  # fully connected: a link of its own to every peer
        domain = chip.figure("interconnect.domain_size")
        peer = ici_one_way or chip.figure("interconnect.link_bandwidth_one_way_bytes_per_s") or (
            chip.require("interconnect.chip_bandwidth_one_way_bytes_per_s", f"mesh axis {axis.name}")
            / max(1, (domain or 2) - 1))
        return Link(name, peer, None, False, True, latency, direct=True)
    one_way = ici_one_way or chip.require("interconnect.link_bandwidth_one_way_bytes_per_s",
                                          f"mesh axis {axis.name}")
    bidi = 2 * ici_one_way if ici_one_way else (chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s")
                                                or 2 * one_way)
    wrap = chip.figure("interconnect.wraparound_min_axis_size")
    # a torus axis closes into a ring at the chip's wraparound size and its multiples
    # (whole 4x4x4 cubes on v4 and v5p; the full 16 on v5e and v6e)
    torus = topology.startswith("torus")
    if axis.symbolic:
        ring, case = _symbolic_case(axis, torus, wrap)
        return Link(name, one_way, bidi, ring, False, latency, case=case)
    if ring is None:
        ring = torus and wrap is not None and axis.size >= wrap and axis.size % wrap == 0
    ring = bool(ring and torus)
    if axis.ring is not None and axis.ring != ring:  # check_cases says so before any link is costed
        raise HardwareError(case_refused(axis, chip, ring))
    return Link(name, one_way, bidi, ring, False, latency, case="" if axis.ring is None else f"; written {axis}")


def _scaleout(chip: Chip) -> bool:
    """Whether the chip's network between domains is a GPU scale-out fabric (its figures in
    `scaleout`), not a TPU's DCN: a chip with no DCN figure of its own and a scale-out one."""
    return chip.figure("dcn.bandwidth_one_way_bytes_per_s_per_chip") is None and \
        chip.figure("scaleout.bandwidth_one_way_bytes_per_s_per_chip") is not None


def _nic_share(chip: Chip, nic: sympy.Rational) -> tuple[sympy.Rational, str]:
    """Each GPU's one-way bandwidth across the scale-out fabric, and what limits it where
    not its own NIC. Every GPU of a node crosses the fabric at once in a collective between
    nodes (each its own slice of the array, to the GPU of the same rank in the other nodes:
    rail-optimized), so each gets at most the node's egress over its GPUs."""
    egress = chip.figure("scaleout.node_egress_bytes_per_s")
    node = chip.figure("scaleout.chips_per_node")
    if egress is None or node is None or egress / node >= nic:
        return nic, ""
    return egress / node, f"; the node's egress {float(egress):.3g} bytes/s shared by its {int(node)} GPUs"


def _symbolic_case(axis: MeshAxis, torus: bool, wrap: sympy.Rational | None) -> tuple[bool, str]:
    """(ring, case) for a torus-chip axis without a size: whether
    it wraps around follows from its size on a chip, so the formulas take a case, the one
    written (`X@ring`, `X@line`) or, not written, a ring where the chip's axes can close into
    one, and say which. (A ring written where the chip's axes never close, check_cases
    refuses first.)"""
    if not torus or not wrap:
        return False, "" if axis.ring is None else f"; written {axis.name}@line"
    n = int(wrap)
    if axis.ring is False:
        return False, f"; written {axis.name}@line: right for {axis.name} < {n}"
    if axis.ring:
        return True, f"; written {axis.name}@ring: needs {axis.name} a multiple of {n}"
    return True, (f"; assumed: needs {axis.name} a multiple of {n}, "
                                      f"write {axis.name}@line for an axis without")


def case_at(axis: MeshAxis, size: int | None, chip: Chip | None, all_to_all: bool = False) -> str | None:
    """Why the formulas over an ICI axis without a size do not hold at this size on the
    chip (None where they do, or no size is given): the size spans several of its pod's
    axes, or wraps around where the formulas take a line (or the other way), or is odd
    where an AllToAll on a line takes it even."""
    if size is None or axis.link != "ici":
        return None
    # only the link's shape matters here, not its bandwidth: without a chip, any stands in
    if all_to_all and size % 2 and _even_case(axis, chip, None if chip is not None else 1):
        return (f"{axis.name}={size}: an AllToAll on a line of an odd number of chips costs "
                f"floor(X/2)*ceil(X/2)/X, not the X/4 its formula takes: give {axis.name}={size} in the mesh")
    if chip is None:
        if axis.ring and size % 2:  # no chip's wraparound length makes it even
            return (f"{axis.name}={size}: the formulas over {axis.name}@ring take {axis.name} even ({axis.name}/2 "
                    f"hops, an AllToAll's {axis.name}/4 of the array across the middle); an odd ring has "
                    f"floor({axis.name}/2): give {axis.name}={size}@ring in the mesh")
        return None
    numeric = MeshAxis(axis.name, size)
    given = f"give {axis.name}={size} in the mesh for its own costs"
    try:
        check_domain([numeric], chip)
        pieces = spans(numeric, lay_out([numeric], chip))
    except HardwareError as e:
        return f"{axis.name}={size}: {e}"
    if len(pieces) > 1:
        return (f"{axis.name}={size} spans {len(pieces)} of {chip.name}'s physical axes, but the formulas take "
                f"{axis.name} as one: {given}")
    ring = link(numeric, chip, ring=pieces[0][1]).ring
    if ring != link(axis, chip).ring:
        return (f"at {axis.name}={size} a {chip.name} axis {'closes' if ring else 'does not close'} into a ring, "
                f"but the formulas take {axis.name} as {'a line' if ring else 'a ring'}: write "
                f"{axis.name}@{'ring' if ring else 'line'} in the mesh, or {given}")
    return None


def check_domain(axes: list[MeshAxis], chip: Chip | None) -> None:
    """The ICI (or NVLink) axes together may span at most the chip's domain, and fit its
    pod's shape where it has one (v5e's 16 x 16 holds X=64 as 16 x 4, not X=17); an axis
    written `@ring` or `@line` must be the case the chip makes of it (check_cases)."""
    if chip is None or any(a.deferred for a in axes):  # a family's: checked member by member
        return
    domain = chip.figure("interconnect.domain_size")
    chips = 1
    for axis in axes:
        if axis.link == "ici" and not axis.symbolic:  # one without a size: the formulas take it to fit
            chips *= axis.number
    if domain is not None and chips > domain:
        name = chip.texts.get("interconnect.name", "ICI")
        raise HardwareError(f"the mesh's {name} axes span {chips} chips, but {chip.name}'s {name} reaches "
                            f"{int(domain)}: put the outer axes on DCN (e.g. Y=4@dcn)")
    lay_out(axes, chip)
    check_cases(axes, chip)


def time(kind: str, axes: list[MeshAxis], V: sympy.Expr, chip: Chip | None, ici_one_way: sympy.Expr | None = None,
         mesh: Sequence[MeshAxis] | None = None, words: bool = True) -> Time:
    """The time of one collective over `axes` moving V bytes per chip. `mesh` is all the
    mesh's axes, which decide where each ICI axis lies on a torus chip's pod (by default
    the collective's own axes); an axis spanning several physical axes is costed as a
    collective over them. Over a strategy family's deferred axes: V times a symbol for its
    seconds per byte, and a symbol for its latency floor (`rate_symbols`); the time is
    linear in V, so a member's is V times this function's at V = 1 on the member's mesh
    (`words`=False: the links are not described, only timed)."""
    if any(a.deferred for a in axes):
        per_byte, latency, hops = rate_symbols(kind, "".join(a.name for a in axes))
        return Time(V * per_byte, latency, hops, "laid out member by member", True)
    if kind == "AllReduce":
        once = time("AllGather", axes, V, chip, ici_one_way, mesh, words)
        return Time(2 * once.bandwidth, 2 * once.latency, 2 * once.hops, once.links, once.latency_known)
    if kind == "Permute":
        return _permute(axes, V, chip, ici_one_way, mesh)
    laid = lay_out(axes if mesh is None else mesh, chip)
    described = ", ".join(_described(a, spans(a, laid), chip, ici_one_way) for a in axes) if words else ""
    if words and kind == "AllToAll" and any(_even_case(a, chip, ici_one_way) for a in axes):
        described += "; an AllToAll on a line taken over an even number of chips"
    # from here on, the physical axes: each logical axis, or the pieces of one spanning several
    pieces = [piece for a in axes for piece in spans(a, laid)]
    physical = [a for a, _ in pieces]
    links = [link(a, chip, ici_one_way, ring) for a, ring in pieces]
    if kind == "AllToAll":
        bandwidth = sympy.Add(*(V * _all_to_all_per_byte(a, l) for a, l in zip(physical, links)))
    elif all(l.ring for l in links):
        bandwidth = V / sympy.Add(*(l.bidi for l in links))
    else:
        # one axis after another; the array grows as it goes, so the slowest link goes first,
        # while the array is smallest, and the fastest moves the whole V
        pairs = sorted(zip(physical, links), key=lambda p: _slowness(_per_byte(_stand_in(p[0]), p[1])))
        bandwidth, grown = sympy.Integer(0), V
        for axis, l in pairs:
            bandwidth += _per_byte(axis, l) * grown
            grown = grown / axis.count
    hops = sympy.Add(*(_hops(a, l) for a, l in zip(physical, links)))
    known = all(l.latency is not None for l in links)
    latency = sympy.Add(*(_hops(a, l) * (l.latency or 0) for a, l in zip(physical, links)))
    return Time(bandwidth, latency, hops, described, known)


def rate_symbols(kind: str, axes: str) -> tuple[sympy.Symbol, sympy.Symbol, sympy.Symbol]:
    """A strategy family's collective of this kind over these deferred axes (their names run
    together): its seconds per byte, its latency floor and its hops, as symbols whose names
    no dim can take."""
    per_byte, latency, hops = (sympy.Symbol(f"{what}[{kind} {axes}]", nonnegative=True)
                               for what in ("per_byte", "latency", "hops"))
    return per_byte, latency, hops


def _permute(axes: list[MeshAxis], V: sympy.Expr, chip: Chip | None, ici_one_way: sympy.Expr | None,
             mesh: Sequence[MeshAxis] | None) -> Time:
    """A Permute over one axis: each chip's block to the next chip along it, the last's to
    the first (a cyclic shift, as ppermute's ring exchanges run). Every chip sends V over
    one link one way at once: V / W_one_way. On a ring, one hop; on a line the last
    chip's block crosses the whole line back (its links carry it the other way, at no cost
    in bandwidth), N - 1 hops; through a switch, one. An axis that spans several physical
    axes (v5e's X=64: 16 x 4) is costed as the line it then is."""
    (axis,) = axes
    pieces = spans(axis, lay_out(list(axes) if mesh is None else list(mesh), chip))
    l = link(axis, chip, ici_one_way, pieces[0][1] if len(pieces) == 1 else False)
    hops = sympy.Integer(1) if l.switch or l.ring else axis.count - 1
    described = f"{axis.name}: {l.describe()}" + ("; a cyclic shift across the line" if hops != 1 else "")
    return Time(V / l.one_way, hops * (l.latency or 0), hops, described, l.latency is not None)


def _described(axis: MeshAxis, spanned: list[tuple[MeshAxis, bool | None]], chip: Chip | None,
               ici_one_way: sympy.Expr | None) -> str:
    """An axis's links in words: "X: ICI (no wraparound)"; one spanning several physical
    axes says so, "X=64: ICI 16 (ring with wraparound) x 4 (no wraparound)", and
    "X=256: ICI 16 x 16 (rings with wraparound)" where the pieces are alike."""
    pieces = [p for p, _ in spanned]
    links = [link(p, chip, ici_one_way, ring) for p, ring in spanned]
    if len(pieces) == 1:
        return f"{axis.name}: {links[0].describe()}"
    shapes = {l.shape() for l in links}
    if len(shapes) == 1:
        shape = shapes.pop().replace("ring with", "rings with")
        return f"{axis}: {links[0].name} " + " x ".join(str(p.size) for p in pieces) + f" ({shape})"
    return f"{axis}: {links[0].name} " + " x ".join(f"{p.size} ({l.shape()})" for p, l in zip(pieces, links))


def _slowness(per_byte: sympy.Expr) -> float:
    """Seconds per byte as a number to order links by; a symbolic chip's links share one
    symbol (W_ici), so the order is that of their numeric factors."""
    return float(per_byte.xreplace({s: 1 for s in per_byte.free_symbols}))


def _even_case(axis: MeshAxis, chip: Chip | None, ici_one_way: sympy.Expr | None) -> bool:
    """Whether an AllToAll over this axis takes its size even: a line without a size."""
    if not axis.symbolic:
        return False
    l = link(axis, chip, ici_one_way)
    return not (l.ring or l.switch)


def _stand_in(axis: MeshAxis) -> MeshAxis:
    """An axis to order links by: one without a size, as a long one (its (N - 1)/N near 1;
    where links are alike the order changes nothing: (N_X N_Y - 1)/(N_X N_Y) either way)."""
    return MeshAxis(axis.name, 10**6, axis.link) if axis.symbolic else axis


def _per_byte(axis: MeshAxis, l: Link) -> sympy.Expr:
    """Seconds per byte of the array gathered over one axis."""
    if l.ring and l.bidi is not None:  # a ring always has its both-ways figure
        return 1 / l.bidi
    n = axis.count
    if l.direct:  # (N - 1)/N of it arrives over N - 1 links at once
        return 1 / (n * l.one_way)
    return (n - 1) / (n * l.one_way)


def _all_to_all_per_byte(axis: MeshAxis, l: Link) -> sympy.Expr:
    """Seconds per byte of each chip's block for an AllToAll over one axis."""
    n = axis.count
    if l.ring and l.bidi is not None:
        # a quarter of the array (n blocks) crosses the middle, 2 links each way: of each chip's
        # block, floor(n/2) ceil(n/2) / n each way, n/4 for an even n (a torus chip's rings are:
        # multiples of 4 or 16; over an axis without a size, the case taken: case_at)
        if axis.symbolic:
            return n / (4 * l.bidi)
        return sympy.Rational((n // 2) * ((n + 1) // 2), n) / l.bidi
    if l.direct:
        return 1 / (n * l.one_way)
    if l.switch:
        return (n - 1) / (n * l.one_way)
    # a line: the middle link carries what the left half sends the right half, one way;
    # floor(n/2) ceil(n/2) / n, n/4 for an even n: the case taken over an axis without a size
    # (a formula in floor and ceiling has no threshold or limit symroof can solve)
    if axis.symbolic:
        return n / (4 * l.one_way)
    return sympy.Rational((n // 2) * ((n + 1) // 2), n) / l.one_way


def _hops(axis: MeshAxis, l: Link) -> sympy.Expr:
    n = axis.count
    if l.switch:
        return sympy.Integer(1)
    # a ring's size is a multiple of the chip's wraparound length (4 or 16): even
    return (n / 2 if axis.symbolic else sympy.Integer(n // 2)) if l.ring else n - 1
