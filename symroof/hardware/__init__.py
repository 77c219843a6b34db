"""Hardware: the chips of `hardware.json` (read and checked), the machine an analysis runs
against (a chip, bare figures or symbols), and where a mesh lies on a torus pod."""

from .chips import Chip, get_chip, list_chips, load_hardware
from .machines import Machine, machine
from .totals import Totals, totals

__all__ = ["Chip", "Machine", "Totals", "get_chip", "list_chips", "load_hardware", "machine", "totals"]
