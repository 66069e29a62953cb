"""A layer: op kind, the eight loop dimensions, stride/padding/dilation and per-operand precision.

Sizes are element counts unless a name says ``_bytes``. The vocabulary is DESIGN.md's: N batch,
G groups, K output channels per group, C input channels per group, P x Q output rows x columns,
R x S filter rows x columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from tileplan.dims import DIMS, Dim, Operand
from tileplan.errors import WorkloadError


class OpKind(Enum):
    """What a layer computes. Every kind maps onto the same 8-dimensional loop nest.

    - ``CONV``/``GROUPED_CONV``/``DEPTHWISE``/``POINTWISE``/``FC``: multiply-accumulate layers with a
      weight tensor (FC is a 1x1 layer on a flattened input).
    - ``MAXPOOL``/``AVGPOOL``/``GLOBALPOOL``: channelwise windows (G = channels, K = C = 1), no weights;
      MACs count window operations.
    - ``ADD``: element-wise combination of ``input_count`` equally shaped tensors (residual adds; an
      imported element-wise product of two activations costs the same and uses this kind too).
    - ``CONCAT``: channel concatenation; producers write into their slice of the result, so it moves
      no data and does no work.
    - ``DATA_MOVE``: a pure re-arrangement (reorg/space-to-depth, channel-shuffle transpose,
      upsample/resize, an explicit reshape or pad): reads its input tensor once, writes its output
      tensor once, no MACs, no weights. Its output size is given explicitly (``out_hw``); its loop
      dimensions only describe the two shapes (G = R = S = 1, K = output and C = input channels)
      and must not be read as a multiply-accumulate nest.
    """

    CONV = "conv"
    GROUPED_CONV = "grouped_conv"
    DEPTHWISE = "depthwise"
    POINTWISE = "pointwise"
    FC = "fc"
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"
    GLOBALPOOL = "globalpool"
    ADD = "add"
    CONCAT = "concat"
    DATA_MOVE = "data_move"

    @property
    def has_weights(self) -> bool:
        return self in (OpKind.CONV, OpKind.GROUPED_CONV, OpKind.DEPTHWISE, OpKind.POINTWISE, OpKind.FC)

    @property
    def is_pool(self) -> bool:
        return self in (OpKind.MAXPOOL, OpKind.AVGPOOL, OpKind.GLOBALPOOL)

    @property
    def channelwise(self) -> bool:
        """Each output channel reads only its own input channel (G = channels, K = C = 1)."""
        return self in (OpKind.DEPTHWISE, OpKind.MAXPOOL, OpKind.AVGPOOL, OpKind.GLOBALPOOL, OpKind.ADD)


#: Largest size of any one dimension of a layer (batch, channels, height, width, kernel).
MAX_EXTENT = 65536


@dataclass(frozen=True, slots=True)
class Precision:
    """Bytes per element of each operand; ``psum`` is the accumulator width (defaults to output)."""

    input: int = 1
    weight: int = 1
    output: int = 1
    psum: int = 0

    def __post_init__(self) -> None:
        for name in ("input", "weight", "output"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise WorkloadError(f"precision.{name} must be a positive number of bytes, got {value!r}")
        if self.psum == 0:
            object.__setattr__(self, "psum", self.output)
        elif self.psum < 1:
            raise WorkloadError(f"precision.psum must be a positive number of bytes, got {self.psum!r}")

    @classmethod
    def uniform(cls, nbytes: int, psum: int = 0) -> Precision:
        """Every operand ``nbytes`` wide, and the accumulator ``psum`` bytes (0: ``nbytes`` too).

        >>> Precision.uniform(1, 4)
        Precision(input=1, weight=1, output=1, psum=4)
        """
        return cls(nbytes, nbytes, nbytes, psum or nbytes)

    def of(self, operand: Operand) -> int:
        """Bytes per element of ``operand``."""
        return (self.input, self.weight, self.output)[operand]


def _pair(value: int | tuple[int, int], what: str, layer: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2:
        raise WorkloadError(f"layer {layer!r}: {what} must be an int or a pair, got {value!r}")
    return (int(pair[0]), int(pair[1]))


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer of a network, described by its input tensor and kernel.

    ``c_in``/``k_out`` are total channel counts; the loop dimensions divide them by ``groups``.
    ``pad`` is (top, bottom, left, right). ``inputs`` names the producing layers (empty: the
    network input); ``input_count`` is how many equally-shaped tensors an ``ADD`` sums.
    ``precision`` is ``None`` until the layer is planned on an accelerator (which supplies it).
    ``out_hw`` is the output rows x columns of a ``DATA_MOVE`` layer (``None`` for every other kind,
    whose output size follows from the kernel, stride and padding).

    >>> conv = Layer.conv("c1", n=1, c_in=80, h=73, w=73, k_out=192, r=3, s=3, pad=0)
    >>> conv.dims[Dim.P], conv.dims[Dim.K], conv.macs
    (71, 192, 696867840)
    >>> conv.input_extent_rows(4)   # TSO Eq. 1: (T_R - 1) * S + K
    6
    """

    name: str
    op: OpKind
    n: int
    c_in: int
    h: int
    w: int
    k_out: int
    r: int = 1
    s: int = 1
    groups: int = 1
    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    inputs: tuple[str, ...] = ()
    input_count: int = 1
    precision: Precision | None = None
    out_hw: tuple[int, int] | None = None
    dims: dict[Dim, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"layer {self.name!r}"
        for fname in ("n", "c_in", "h", "w", "k_out", "r", "s", "groups", "input_count"):
            value = getattr(self, fname)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise WorkloadError(f"{where}: {fname} must be a positive integer, got {value!r}")
            if value > MAX_EXTENT:
                raise WorkloadError(f"{where}: {fname}={value:,} is larger than the {MAX_EXTENT:,} tileplan plans "
                                    f"(the search enumerates the tile sizes of every dimension)")
        if len(self.stride) != 2 or min(self.stride) < 1:
            raise WorkloadError(f"{where}: stride must be two positive integers, got {self.stride!r}")
        if len(self.dilation) != 2 or min(self.dilation) < 1:
            raise WorkloadError(f"{where}: dilation must be two positive integers, got {self.dilation!r}")
        if len(self.pad) != 4 or min(self.pad) < 0:
            raise WorkloadError(f"{where}: pad must be four non-negative integers (top, bottom, left, "
                                f"right), got {self.pad!r}")
        if self.c_in % self.groups or self.k_out % self.groups:
            raise WorkloadError(f"{where}: groups={self.groups} must divide c_in={self.c_in} and "
                                f"k_out={self.k_out}")
        if self.op.channelwise and not (self.c_in == self.k_out == self.groups):
            raise WorkloadError(f"{where}: a {self.op.value} layer needs c_in == k_out == groups "
                                f"(got {self.c_in}, {self.k_out}, {self.groups})")
        if self.input_count > 1 and self.op is not OpKind.ADD:
            raise WorkloadError(f"{where}: only add layers take several equally-shaped inputs")
        if self.op is OpKind.DATA_MOVE:
            self._init_data_move(where)
            return
        if self.out_hw is not None:
            raise WorkloadError(f"{where}: out_hw is only for data_move layers (a {self.op.value} layer's "
                                f"output size follows from its kernel, stride and padding)")
        rows = self.h + self.pad[0] + self.pad[1] - self.dilation[0] * (self.r - 1) - 1
        cols = self.w + self.pad[2] + self.pad[3] - self.dilation[1] * (self.s - 1) - 1
        if rows < 0 or cols < 0:
            raise WorkloadError(f"{where}: the {self.r}x{self.s} kernel (dilation {self.dilation}) is larger "
                                f"than the padded {self.h}x{self.w} input")
        p = rows // self.stride[0] + 1
        q = cols // self.stride[1] + 1
        dims = {Dim.N: self.n, Dim.G: self.groups, Dim.K: self.k_out // self.groups,
                Dim.C: self.c_in // self.groups, Dim.P: p, Dim.Q: q, Dim.R: self.r, Dim.S: self.s}
        object.__setattr__(self, "dims", dims)

    def _init_data_move(self, where: str) -> None:
        if (self.out_hw is None or len(self.out_hw) != 2
                or any(not isinstance(v, int) or v < 1 for v in self.out_hw)):
            raise WorkloadError(f"{where}: a data_move layer needs out_hw = (rows, cols), two positive "
                                f"integers, got {self.out_hw!r}")
        if (self.r, self.s, self.groups) != (1, 1, 1) or self.stride != (1, 1) or any(self.pad):
            raise WorkloadError(f"{where}: a data_move layer has no kernel, stride, padding or groups "
                                f"(r = s = groups = 1, stride 1, pad 0)")
        dims = {Dim.N: self.n, Dim.G: 1, Dim.K: self.k_out, Dim.C: self.c_in, Dim.P: self.out_hw[0],
                Dim.Q: self.out_hw[1], Dim.R: 1, Dim.S: 1}
        object.__setattr__(self, "dims", dims)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def conv(cls, name: str, *, n: int = 1, c_in: int, h: int, w: int, k_out: int, r: int,
             s: int | None = None, stride: int | tuple[int, int] = 1,
             pad: int | tuple[int, ...] | None = None, dilation: int | tuple[int, int] = 1, groups: int = 1,
             inputs: tuple[str, ...] = (), precision: Precision | None = None) -> Layer:
        """A convolution; ``pad=None`` means 'same'-style padding ``(kernel - 1) // 2`` on every side.

        The op kind is derived: depthwise when ``groups == c_in == k_out``, grouped when
        ``groups > 1``, pointwise for 1x1 kernels, else conv.
        """
        s = r if s is None else s
        st = _pair(stride, "stride", name)
        dil = _pair(dilation, "dilation", name)
        if pad is None:
            rows, cols = (r - 1) * dil[0] // 2, (s - 1) * dil[1] // 2
            pads = (rows, rows, cols, cols)
        elif isinstance(pad, int):
            pads = (pad, pad, pad, pad)
        elif len(pad) == 2:
            pads = (pad[0], pad[0], pad[1], pad[1])
        else:
            pads = tuple(pad)  # type: ignore[assignment]
        if groups > 1 and groups == c_in == k_out:
            op = OpKind.DEPTHWISE
        elif groups > 1:
            op = OpKind.GROUPED_CONV
        elif r == 1 and s == 1:
            op = OpKind.POINTWISE
        else:
            op = OpKind.CONV
        return cls(name=name, op=op, n=n, c_in=c_in, h=h, w=w, k_out=k_out, r=r, s=s, groups=groups,
                   stride=st, pad=pads, dilation=dil, inputs=inputs, precision=precision)  # type: ignore[arg-type]

    @classmethod
    def fc(cls, name: str, *, n: int = 1, c_in: int, k_out: int, inputs: tuple[str, ...] = (),
           precision: Precision | None = None) -> Layer:
        """A fully-connected layer on ``c_in`` (flattened) features."""
        return cls(name=name, op=OpKind.FC, n=n, c_in=c_in, h=1, w=1, k_out=k_out, inputs=inputs,
                   precision=precision)

    @classmethod
    def pool(cls, name: str, *, kind: str = "max", n: int = 1, channels: int, h: int, w: int, r: int,
             s: int | None = None, stride: int | tuple[int, int] | None = None,
             pad: int | tuple[int, int, int, int] = 0, inputs: tuple[str, ...] = (),
             precision: Precision | None = None) -> Layer:
        """A max/avg pool (``kind``), or a global pool with ``kind="global"`` (kernel = whole map)."""
        if kind == "global":
            op, r, s, st, pads = OpKind.GLOBALPOOL, h, w, (1, 1), (0, 0, 0, 0)
        else:
            kinds = {"max": OpKind.MAXPOOL, "avg": OpKind.AVGPOOL}
            if kind not in kinds:
                raise WorkloadError(f"layer {name!r}: pool kind must be max, avg or global, got {kind!r}")
            op = kinds[kind]
            s = r if s is None else s
            st = _pair(r if stride is None else stride, "stride", name)
            pads = (pad, pad, pad, pad) if isinstance(pad, int) else tuple(pad)  # type: ignore[assignment]
        return cls(name=name, op=op, n=n, c_in=channels, h=h, w=w, k_out=channels, r=r, s=s or r,
                   groups=channels, stride=st, pad=pads, inputs=inputs, precision=precision)  # type: ignore[arg-type]

    @classmethod
    def add(cls, name: str, *, n: int = 1, channels: int, h: int, w: int, inputs: tuple[str, ...] = (),
            input_count: int | None = None, precision: Precision | None = None) -> Layer:
        """An element-wise sum of ``input_count`` (default: ``len(inputs)``, at least 2) tensors."""
        count = input_count if input_count is not None else max(2, len(inputs))
        return cls(name=name, op=OpKind.ADD, n=n, c_in=channels, h=h, w=w, k_out=channels,
                   groups=channels, inputs=inputs, input_count=count, precision=precision)

    @classmethod
    def concat(cls, name: str, *, n: int = 1, channels: int, h: int, w: int, inputs: tuple[str, ...] = (),
               precision: Precision | None = None) -> Layer:
        """A channel concatenation. Producers write into their slice of the result: no traffic."""
        return cls(name=name, op=OpKind.CONCAT, n=n, c_in=channels, h=h, w=w, k_out=channels,
                   inputs=inputs, precision=precision)

    @classmethod
    def data_move(cls, name: str, *, n: int = 1, c_in: int, h: int, w: int, k_out: int, out_h: int,
                  out_w: int, inputs: tuple[str, ...] = (), precision: Precision | None = None) -> Layer:
        """A pure data re-arrangement from a ``c_in x h x w`` to a ``k_out x out_h x out_w`` tensor.

        Reorg / space-to-depth, channel-shuffle transposes, upsampling and materialised reshapes or
        pads: the layer reads its input once and writes its output once (no MACs, no weights).

        >>> reorg = Layer.data_move("reorg", c_in=64, h=26, w=26, k_out=256, out_h=13, out_w=13)
        >>> reorg.macs, reorg.p, reorg.shape_str()
        (0, 13, '64x26x26 -> 256x13x13 move')
        """
        return cls(name=name, op=OpKind.DATA_MOVE, n=n, c_in=c_in, h=h, w=w, k_out=k_out, inputs=inputs,
                   precision=precision, out_hw=(out_h, out_w))

    # ----------------------------------------------------------------- derived quantities
    @property
    def p(self) -> int:
        return self.dims[Dim.P]

    @property
    def q(self) -> int:
        return self.dims[Dim.Q]

    @property
    def dim_tuple(self) -> tuple[int, ...]:
        """Sizes in DIMS order (N, G, K, C, P, Q, R, S)."""
        return tuple(self.dims[d] for d in DIMS)

    @property
    def macs(self) -> int:
        """Multiply-accumulates (for pools: window operations; for add: additions; concat, data move: 0)."""
        if self.op in (OpKind.CONCAT, OpKind.DATA_MOVE):
            return 0
        if self.op is OpKind.ADD:
            return self.n * self.groups * self.p * self.q * (self.input_count - 1)
        size = 1
        for d in DIMS:
            size *= self.dims[d]
        return size

    @property
    def has_weights(self) -> bool:
        return self.op.has_weights

    @property
    def moves_data(self) -> bool:
        """False for a concat, which producers implement by writing in place."""
        return self.op is not OpKind.CONCAT

    def elements(self, operand: Operand) -> int:
        """Element count of ``operand``'s whole tensor (inputs: all ``input_count`` tensors)."""
        if operand is Operand.INPUT:
            return self.n * self.c_in * self.h * self.w * self.input_count
        if operand is Operand.WEIGHT:
            return self.k_out * (self.c_in // self.groups) * self.r * self.s if self.has_weights else 0
        return self.n * self.k_out * self.p * self.q

    def tensor_bytes(self, operand: Operand) -> int:
        """Bytes of ``operand``'s whole tensor at the layer's precision."""
        return self.elements(operand) * self.resolved_precision().of(operand)

    def resolved_precision(self) -> Precision:
        if self.precision is None:
            raise WorkloadError(f"layer {self.name!r} has no precision yet; plan it on an accelerator "
                                f"or pass precision=")
        return self.precision

    def with_precision(self, precision: Precision) -> Layer:
        """This layer at ``precision`` (layers keep an explicitly given precision)."""
        return self if self.precision is not None else replace(self, precision=precision)

    def input_extent_rows(self, t_p: int, t_r: int | None = None) -> int:
        """Input rows an output tile of ``t_p`` rows needs (TSO Eq. 1 with dilation), before clipping."""
        t_r = self.r if t_r is None else t_r
        return (t_p - 1) * self.stride[0] + (t_r - 1) * self.dilation[0] + 1

    def input_extent_cols(self, t_q: int, t_s: int | None = None) -> int:
        """Input columns an output tile of ``t_q`` columns needs, before clipping."""
        t_s = self.s if t_s is None else t_s
        return (t_q - 1) * self.stride[1] + (t_s - 1) * self.dilation[1] + 1

    def signature(self) -> tuple[object, ...]:
        """Everything planning depends on (not the name or graph edges): equal signatures plan alike."""
        return (self.op, self.n, self.c_in, self.h, self.w, self.k_out, self.r, self.s, self.groups,
                self.stride, self.pad, self.dilation, self.input_count, self.precision, self.out_hw)

    def shape_str(self) -> str:
        """Compact human-readable shape, e.g. ``64x56x56 -> 64x56x56 k3x3/s1``."""
        core = f"{self.c_in}x{self.h}x{self.w} -> {self.k_out}x{self.p}x{self.q}"
        if self.op is OpKind.DATA_MOVE:
            return core + " move"
        if self.op in (OpKind.ADD, OpKind.CONCAT, OpKind.FC):
            return core
        extra = f" k{self.r}x{self.s}/s{self.stride[0]}"
        if self.groups > 1 and not self.op.channelwise:
            extra += f" g{self.groups}"
        return core + extra
