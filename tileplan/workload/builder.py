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

    def pool(self, x: Tensor, name: str, r: int, *, stride: int | None = None, pad: int = 0,
             kind: str = "max") -> Tensor:
        return self._push(Layer.pool(name, kind=kind, n=self.n, channels=x.channels, h=x.h, w=x.w, r=r,
                                     stride=stride, pad=pad, inputs=self._src(x)))

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

    def build(self) -> Network:
        return Network(self.name, tuple(self.layers), (self.n, self.input.channels, self.input.h, self.input.w))
