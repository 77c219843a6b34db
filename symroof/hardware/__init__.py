"""Hardware: the chips of `hardware.json` (read and checked), the machine an analysis runs
against (a chip, bare figures or symbols), where a mesh lies on a torus pod, and what many
chips add up to (`totals`: a pod, a slice, a GPU cluster)."""

from .chips import Chip, get_chip, list_chips, load_hardware
from .machines import Machine, machine
from .pods import Totals, totals

__all__ = ["Chip", "Machine", "Totals", "get_chip", "list_chips", "load_hardware", "machine", "totals"]
