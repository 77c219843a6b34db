"""What many chips add up to: a TPU slice or pod, a GPU node or cluster (`totals`). The book
asks it of a full TPU v5p pod: how many FLOPs/s, how much HBM, what bisection bandwidth.

Peak FLOPs/s (per dtype), HBM capacity and HBM bandwidth are the chip's figures times the
chips. The bisection bandwidth is what crosses the narrowest cut into two halves:

* a torus k1 x k2 x k3 is cut across its longest axis: each of the chips / k_longest lines of
  chips along that axis crosses the cut once, and once more through its wraparound link
  where the axis closes into a ring (on a slice, where it is whole and long enough:
  topology.py), each link carrying its one-way bandwidth each way;
* an NVLink domain (NVSwitches, taken as non-blocking) or a fully connected node: half the
  GPUs send to the other half at once, each at its egress (a switch), or over a link to
  each peer across (fully connected: (N/2)^2 links);
* GPU nodes joined by the scale-out fabric: half the GPUs' NICs at once where the file says
  the fabric is a fat tree with full bisection (`scaleout.fabric`); where it does not say,
  that figure is only an upper bound, and marked so.

Each is given one way (what crosses the cut in one direction) and both ways summed.

Examples:
    >>> from symroof.hardware.chips import get_chip
    >>> pod = totals(get_chip("v5p"), 8960)
    >>> pod.shape, pod.peak_flops["bf16"], pod.hbm_capacity
    ((16, 20, 28), 4112640000000000000, 860160000000000)
    >>> cut = pod.cuts[0]
    >>> cut.links, cut.one_way
    (640, 57600000000000)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import sympy

from ..dtypes import RATES
from ..errors import HardwareError
from ..show import capacity, human, wrapped
from .chips import Chip
from .shapes import Shape
from .topology import closes_into_ring


@dataclass(frozen=True)
class Cut:
    """One network's bisection: its name, the links (or NICs) crossing the cut, the bytes/s
    crossing it one way and both ways, how it was counted, and whether it is only an upper
    bound (a fabric the file does not say has full bisection)."""

    network: str
    links: int
    one_way: sympy.Rational
    bidi: sympy.Rational
    how: str
    upper_bound: bool = False


@dataclass(frozen=True)
class Totals:
    """Many chips' totals (`totals`): peak FLOPs/s per dtype, HBM capacity and bandwidth, and
    the bisection of each network they span, as exact sympy numbers; `str()` for people."""

    chip: Chip
    chips: int
    shape: Shape | None  # a torus slice's or pod's axis lengths; None for GPUs
    peak_flops: dict[str, sympy.Rational]  # per rate, dense, over all the chips
    hbm_capacity: sympy.Rational
    hbm_bandwidth: sympy.Rational
    cuts: tuple[Cut, ...]
    unknown: tuple[str, ...] = ()  # what the file lacks for a bisection, in words

    def __str__(self) -> str:
        where = f" ({'x'.join(map(str, self.shape))})" if self.shape else ""
        out = [f"{self.chips} x {self.chip.name}{where}: totals (each chip's figure x {self.chips})",
               "  peak FLOPs/s (dense; integer dtypes OPs/s):"]
        for rate, value in self.peak_flops.items():
            out.append(f"    {rate:<5} {human(value, 'OPs/s' if rate.startswith('int') else 'FLOPs/s')}")
        out += [f"  HBM capacity   {capacity(self.hbm_capacity)}",
                f"  HBM bandwidth  {human(self.hbm_bandwidth, 'bytes/s')}",
                *wrapped("bisection bandwidth (the narrowest cut into halves; one way: what crosses it in one "
                         "direction; both ways: the two summed):", "  ")]
        for cut in self.cuts:
            bound = "at most " if cut.upper_bound else ""
            out.append(f"    {cut.network}: {bound}{human(cut.one_way, 'bytes/s')} one way, "
                       f"{bound}{human(cut.bidi, 'bytes/s')} both ways")
            out += wrapped(cut.how, "      ")
        out += [line for text in self.unknown for line in wrapped(text, "    ")]
        return "\n".join(out)


def totals(chip: Chip, chips: int | None = None, slice: str | Shape | None = None) -> Totals:
    """The totals of `chips` chips, or of a torus slice ("16x20x28"); a TPU's chips are laid
    on its pod (all of it) or the vendor's slice of that many, a GPU's fill NVLink domains
    (`interconnect.domain_size`) joined by the scale-out fabric.

    Examples:
        >>> from symroof.hardware.chips import get_chip
        >>> nvl72 = totals(get_chip("gb200"), 72)
        >>> nvl72.cuts[0].network, nvl72.cuts[0].links, nvl72.cuts[0].one_way
        ('NVLink', 36, 32400000000000)
        >>> totals(get_chip("v5p"), 96)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        symroof.errors.HardwareError: 96 TPU v5p chips: not the pod (8960) nor one of the vendor's slices ...
    """
    if chips is not None and chips < 1:
        raise HardwareError(f"--chips is a number of chips, 1 or more, not {chips}")
    shape = _torus_shape(chip, chips, slice)
    if shape is not None:
        chips = math.prod(shape)
    if chips is None:
        raise HardwareError(f"totals of how many {chip.name} chips? give --chips N"
                            + (" or --slice AxBxC" if _torus(chip) else ""))
    peaks = {rate: chips * value for rate in RATES
             if (value := chip.figure(f"peak_flops_per_s.{rate}")) is not None}
    if shape is not None:
        cuts, unknown = _torus_cut(chip, shape)
    elif _torus(chip):
        cuts, unknown = [], [f"{chip.texts.get('interconnect.name', 'ICI')}: the file gives no shape of "
                             f"{chip.name}'s pod (interconnect.pod_shape), so no bisection"]
    else:
        cuts, unknown = _gpu_cuts(chip, chips)
    return Totals(chip, chips, shape, peaks, chips * chip.require("hbm_capacity_bytes"),
                  chips * chip.hbm_bandwidth, tuple(cuts), tuple(unknown))


def _torus(chip: Chip) -> bool:
    return chip.texts.get("interconnect.topology", "").startswith("torus")


def _torus_shape(chip: Chip, chips: int | None, slice: str | Shape | None) -> Shape | None:
    """The torus a TPU's chips make: the slice given, the whole pod, or the vendor's slice of
    that many chips; None for a chip that is no torus or whose pod's shape no source gives."""
    if not _torus(chip):
        if slice is not None:
            raise HardwareError(f"--slice lays chips on a torus; {chip.name}'s network is no torus: give --chips N")
        return None
    if slice is not None:
        # read, and refused with why where it does not fit the pod
        shape = chip.on_slice(slice).slice or ()
        if chips is not None and chips != math.prod(shape):
            raise HardwareError(f"--chips {chips} and --slice {'x'.join(map(str, shape))} "
                                f"({math.prod(shape)} chips) disagree: give one")
        return shape
    pod = chip.pod_shape
    if pod is None or chips is None:
        return None
    if chips == math.prod(pod):
        return pod
    vendor = chip.vendor_slice(chips)
    if vendor is None:
        listed = ", ".join("x".join(map(str, s)) for s in chip.slice_shapes)
        raise HardwareError(f"{chips} {chip.name} chips: not the pod ({math.prod(pod)}) nor one of the vendor's "
                            f"slices{f' ({listed})' if listed else ''}: give the torus with --slice AxBxC")
    return vendor


def _torus_cut(chip: Chip, shape: Shape) -> tuple[list[Cut], list[str]]:
    """A torus cut across its longest axis: chips / k lines of chips along it cross the cut,
    each once, and twice where the axis closes into a ring."""
    one_way = chip.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
    name = chip.texts.get("interconnect.name", "ICI")
    if one_way is None:
        return [], [f"{name}: no per-link bandwidth in the file, so no bisection"]
    bidi = chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s") or 2 * one_way
    longest = max(shape)
    if longest == 1:
        return [], []
    lines = math.prod(shape) // longest
    # a torus pod's axes all close into rings (v3's too, where no wraparound length is
    # given); a slice's, each whole, where long enough (topology.py's rule)
    ring = shape == chip.pod_shape or closes_into_ring(chip, longest)
    links = lines * (2 if ring else 1)
    shown = "x".join(map(str, shape))
    how = (f"{shown} cut across its axis of {longest}: {lines} lines of chips along it cross, "
           f"{'twice each (it closes into a ring)' if ring else 'once each (no wraparound)'}: {links} links "
           f"x {human(one_way, 'bytes/s')} one way ({human(bidi, 'bytes/s')} both ways) a link")
    return [Cut(name, links, links * one_way, links * bidi, how)], []


def _gpu_cuts(chip: Chip, chips: int) -> tuple[list[Cut], list[str]]:
    """An NVLink domain's bisection (the domain the chips fill, or all of them where fewer),
    and the scale-out fabric's where they span several domains."""
    name = chip.texts.get("interconnect.name", "the fast links")
    domain = chip.figure("interconnect.domain_size")
    node = min(chips, int(domain)) if domain else chips
    cuts, unknown = [], []
    if domain and chips > domain and chips % int(domain):
        raise HardwareError(f"{chips} {chip.name} GPUs are not whole {int(domain)}-GPU {name} domains: give a "
                            f"multiple of {int(domain)}")
    inside = _domain_cut(chip, node, name)
    if inside is None:
        unknown.append(f"{name}: no bandwidth in the file for a cut of a {node}-GPU domain")
    elif node > 1:  # past one domain its cut is a domain's, not the cluster's: said, the fabric's follows
        cuts.append(inside if not (domain and chips > domain) else
                    dataclasses.replace(inside, how=f"one domain's, not the {chips} GPUs': {inside.how}"))
    if domain and chips > domain:
        nic = chip.figure("scaleout.bandwidth_one_way_bytes_per_s_per_chip")
        fabric = chip.texts.get("scaleout.name", "scale-out network")
        if nic is None:
            unknown.append(f"{fabric}: no per-GPU scale-out bandwidth in the file, so no bisection across the "
                           f"{chips // int(domain)} domains")
        else:
            egress, per_node = chip.figure("scaleout.node_egress_bytes_per_s"), chip.figure("scaleout.chips_per_node")
            if egress is not None and per_node:
                nic = min(nic, egress / per_node)
            full = chip.texts.get("scaleout.fabric") == "fat_tree"
            half = chips // 2
            how = (f"the {chips} GPUs' (the cluster's): {chips // int(domain)} domains of {int(domain)}: half the "
                   f"GPUs ({half}) each at its NIC's "
                   f"{human(nic, 'bytes/s')} one way, "
                   + ("the fabric a fat tree with full bisection (scaleout.fabric)" if full else
                      "if the fabric has full bisection: the file does not say (scaleout.fabric is null)"))
            cuts.append(Cut(fabric, half, half * nic, 2 * half * nic, how, upper_bound=not full))
    return cuts, unknown


def _domain_cut(chip: Chip, n: int, name: str) -> Cut | None:
    """Half of n GPUs of one domain sending to the other half: through switches (taken as
    non-blocking) at each GPU's egress; fully connected, over the (n/2)^2 links between."""
    topology = chip.texts.get("interconnect.topology", "")
    half = n // 2
    if topology == "mesh":
        link = chip.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
        if link is None:
            return None
        links = half * (n - half)
        return Cut(name, links, links * link, 2 * links * link,
                   f"{n} GPUs fully connected, cut in halves of {half} and {n - half}: {links} links x "
                   f"{human(link, 'bytes/s')} one way a link")
    egress = chip.figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
    if egress is None:
        return None
    return Cut(name, half, half * egress, 2 * half * egress,
               f"{n} GPUs through {name} switches (taken as non-blocking): half of them ({half}) each at its "
               f"egress, {human(egress, 'bytes/s')} one way")
