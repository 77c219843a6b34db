"""Convolution: `conv_{H,W} bf16[B, H, W, C], bf16[KH, KW, C, F] -> bf16[B, H2, W2, F]`,
with the output sizes as lets (`let H2 = floor((H + 2 - 3)/2) + 1`: strides, padding and
dilation live there). N-d: the subscript names the input's spatial dims, one per spatial
axis. Dims are matched by name, as everywhere (NCHW and NHWC alike):

* the kernel's dims in neither the input nor the result are its window, paired in order
  with the subscript's dims (KH with H, KW with W);
* the result's dims not in the input are its spatial dims, paired in order too;
* a dim of the input and the kernel that the result lacks is the input feature, summed
  (C; a group's share of it in a grouped convolution);
* a dim of all three is a group (`conv_{H,W} bf16[B, H, W, G, Cg], bf16[KH, KW, G, Cg, M]
  -> bf16[B, H2, W2, G, M]`; depthwise is Cg = 1, written without the Cg dim).

`conv_transpose_{H,W}` (the same shapes: the input's gradient of a strided convolution,
torch's ConvTranspose) counts per input element instead: 2 x size(input) x size(window) x
size(output features), the products a transposed convolution makes; the zeros of its
input dilated by the stride, which a `conv` over the dilated input would multiply, are
not counted (torch's FlopCounterMode and XLA skip them too).

FLOPs: 2 per multiply-add over the dense window, 2 x size(result) x size(window) x
size(input features) (exact: one add fewer per result element), on the matrix unit. The
padding's positions are counted: the hardware multiplies the zeros (torch's
FlopCounterMode counts so too; XLA's cost analysis counts only the positions where the
window meets the input: the importers' cross-checks explain the difference). Bytes: the
input, the kernel and the result once each.

On a mesh: a split batch, group or output-feature dim needs nothing; a split input
feature leaves partial sums, reduced as a contraction's are; a split spatial dim is
gathered first (AllGather): the halo exchange a partitioner would make instead is not
modelled.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Step
from .base import MATRIX, Counted, Kind, ShapeError, Size, shown


class Convolution(Kind):
    name = "conv"
    unit = MATRIX
    words = ("conv", "conv_transpose")
    arity = (2, 2)
    takes_dims = True
    over_word = "sums"
    makes_dims = True  # the result's spatial dims

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        x, w = inputs
        for dim in over:
            if dim not in x:
                raise ShapeError(f"{word}_{{{shown(over, ',')}}}: {dim} is not a dim of the input", 0)
            if dim in w or dim in output:
                raise ShapeError(f"{word}: the input's spatial dim {dim} is in the "
                                 f"{'kernel' if dim in w else 'result'}: the kernel has its window dims (KH) "
                                 "and the result its own (H2, let H2 = ...)", 1 if dim in w else None)
        window = [d for d in w if d not in x and d not in output]
        spatial = [d for d in output if d not in x and d not in w]
        if len(window) != len(over):
            raise ShapeError(f"{word} over {len(over)} spatial dim{'s' if len(over) > 1 else ''} ({shown(over)}) "
                             f"needs as many window dims in the kernel, in neither input nor result; it has "
                             f"{len(window)} ({shown(window) or 'none'})", 1)
        if len(spatial) != len(over):
            raise ShapeError(f"{word} over {len(over)} spatial dim{'s' if len(over) > 1 else ''} ({shown(over)}) "
                             f"makes as many of the result's own (H2, let H2 = ...); it has {len(spatial)} "
                             f"({shown(spatial) or 'none'})")
        features = [d for d in x if d in w and d not in output]
        kept = [d for d in x if d not in over and d not in features]
        lost = [d for d in kept if d not in output]
        if lost:
            raise ShapeError(f"{word}: the input's dim {lost[0]} is neither spatial, summed with the kernel, nor in "
                             "the result", 0)
        return (*window, *features)

    def count(self, step: Step, size: Size) -> Counted:
        out, summed = size(step.output.labels), size(step.summed)
        if step.fn == "conv_transpose":
            # each input element times each tap and each output feature, added into the result
            x, w = (t.labels for t in step.inputs)
            features = size(tuple(d for d in w if d in step.output.labels and d not in x))
            window = size(tuple(d for d in w if d not in x and d not in step.output.labels))
            products = size(x) * window * features
            return Counted(2 * products, 2 * products - out)
        return Counted(2 * out * summed, out * (2 * summed - 1))

    def whole(self, step: Step) -> tuple[str, ...]:
        return tuple(step.over)

    def describe(self, word: str) -> str:
        if word == "conv_transpose":
            return ("2 FLOPs per multiply-add, per input element: 2·window·output features (a transposed "
                    "convolution scatters each input element; the zeros a dilated input would hold are not counted)")
        return ("2 FLOPs per multiply-add over the dense window (padding counted), per result element: "
                "2·window·input features (exact: one add fewer)")


KIND = Convolution()
