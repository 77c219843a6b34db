"""Hardware: the chips of `hardware.json` (read and checked), the machine an analysis runs
against (a chip, bare figures or symbols), where a mesh lies on a torus pod, and what many
chips add up to (`totals`: a pod, a slice, a GPU cluster)."""

from typing import TYPE_CHECKING

from .. import lazy
from .chips import Chip, get_chip, list_chips, load_hardware
from .machines import Machine, machine

if TYPE_CHECKING:
    from .pods import Totals, totals

__all__ = ["Chip", "Machine", "Totals", "get_chip", "list_chips", "load_hardware", "machine", "totals"]

# what many chips add up to, imported when first asked for: `symroof analyze` needs one chip
__getattr__ = lazy.names(__name__, {"Totals": "pods", "totals": "pods"})
