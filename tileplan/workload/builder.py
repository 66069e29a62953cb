"""A small builder that tracks tensor shapes so network definitions read like their papers."""

from __future__ import annotations

from dataclasses import dataclass

from tileplan.errors import WorkloadError
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network


@dataclass(frozen=True, slots=True)
class Tensor:
    """A named activation: the layer that produced it (``""`` for the network input) and its shape."""

    src: str
    channels: int
    h: int
    w: int


def _ceil_extra(size: int, r: int, stride: int, before: int, after: int) -> int:
    """Extra end padding that turns floor-mode into ceil-mode output size (PyTorch's rule: the last
    window must start inside the input or its leading padding)."""
    span = size + before + after - r
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + before:
        out -= 1
    return max(0, (out - 1) * stride + r - (size + before + after))


class NetBuilder:
    """Appends layers in topological order; each method returns the output ``Tensor``.

    >>> b = NetBuilder("tiny", n=1, channels=3, h=32, w=32)
    >>> x = b.conv(b.input, "conv1", 16, 3)
    >>> x = b.pool(x, "pool1", 2)
    >>> (x.channels, x.h, x.w)
    (16, 16, 16)
    """

    def __init__(self, name: str, *, n: int, channels: int, h: int, w: int) -> None:
        self.name = name
        self.n = n
        self.layers: list[Layer] = []
        self.input = Tensor("", channels, h, w)

    def _src(self, t: Tensor) -> tuple[str, ...]:
        return (t.src,) if t.src else ()

    def _push(self, layer: Layer) -> Tensor:
        self.layers.append(layer)
        return Tensor(layer.name, layer.k_out, layer.p, layer.q)

    def conv(self, x: Tensor, name: str, k_out: int, r: int, s: int | None = None, *, stride: int = 1,
             pad: int | tuple[int, ...] | None = None, groups: int = 1, dilation: int = 1) -> Tensor:
        return self._push(Layer.conv(name, n=self.n, c_in=x.channels, h=x.h, w=x.w, k_out=k_out, r=r, s=s,
                                     stride=stride, pad=pad, groups=groups, dilation=dilation,
                                     inputs=self._src(x)))

    def dwconv(self, x: Tensor, name: str, r: int, *, stride: int = 1, pad: int | None = None) -> Tensor:
        return self.conv(x, name, x.channels, r, stride=stride, pad=pad, groups=x.channels)

    def pool(self, x: Tensor, name: str, r: int, *, stride: int | None = None,
             pad: int | tuple[int, int, int, int] = 0, kind: str = "max", ceil: bool = False) -> Tensor:
        """An ``r x r`` max/avg pool; ``ceil=True`` rounds the output size up like PyTorch's
        ``ceil_mode`` (modelled as extra bottom/right padding, which is what the hardware reads)."""
        st = r if stride is None else stride
        pads = (pad, pad, pad, pad) if isinstance(pad, int) else pad
        if ceil:
            pads = (pads[0], pads[1] + _ceil_extra(x.h, r, st, pads[0], pads[1]),
                    pads[2], pads[3] + _ceil_extra(x.w, r, st, pads[2], pads[3]))
        return self._push(Layer.pool(name, kind=kind, n=self.n, channels=x.channels, h=x.h, w=x.w, r=r,
                                     stride=st, pad=pads, inputs=self._src(x)))

    def global_pool(self, x: Tensor, name: str) -> Tensor:
        return self._push(Layer.pool(name, kind="global", n=self.n, channels=x.channels, h=x.h, w=x.w, r=x.h,
                                     inputs=self._src(x)))

    def fc(self, x: Tensor, name: str, k_out: int) -> Tensor:
        return self._push(Layer.fc(name, n=self.n, c_in=x.channels * x.h * x.w, k_out=k_out,
                                   inputs=self._src(x)))

    def add(self, xs: list[Tensor], name: str) -> Tensor:
        first = xs[0]
        if any((t.channels, t.h, t.w) != (first.channels, first.h, first.w) for t in xs):
            raise WorkloadError(f"{self.name}: add {name!r} of differently shaped tensors")
        return self._push(Layer.add(name, n=self.n, channels=first.channels, h=first.h, w=first.w,
                                    inputs=tuple(t.src for t in xs if t.src), input_count=len(xs)))

    def concat(self, xs: list[Tensor], name: str) -> Tensor:
        first = xs[0]
        return self._push(Layer.concat(name, n=self.n, channels=sum(t.channels for t in xs), h=first.h,
                                       w=first.w, inputs=tuple(t.src for t in xs if t.src)))

    def data_move(self, x: Tensor, name: str, k_out: int, out_h: int, out_w: int) -> Tensor:
        """A pure re-arrangement of ``x`` into a ``k_out x out_h x out_w`` tensor (no MACs, no weights)."""
        return self._push(Layer.data_move(name, n=self.n, c_in=x.channels, h=x.h, w=x.w, k_out=k_out,
                                          out_h=out_h, out_w=out_w, inputs=self._src(x)))

    def space_to_depth(self, x: Tensor, name: str, block: int) -> Tensor:
        """Darknet's reorg / ONNX SpaceToDepth: ``C x H x W -> C*block^2 x H/block x W/block``."""
        if x.h % block or x.w % block:
            raise WorkloadError(f"{self.name}: space_to_depth {name!r} needs {x.h}x{x.w} divisible by "
                                f"{block}")
        return self.data_move(x, name, x.channels * block * block, x.h // block, x.w // block)

    def build(self) -> Network:
        shape = (self.n, self.input.channels, self.input.h, self.input.w)
        return Network(self.name, tuple(self.layers), shape)
