"""A network: a DAG of layers joined by tensor edges, kept in a topological order."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from tileplan.dims import Operand
from tileplan.errors import WorkloadError
from tileplan.workload.layer import Layer, OpKind, Precision


@dataclass(frozen=True, slots=True)
class Network:
    """Layers in topological order; ``layer.inputs`` names producers (empty = network input).

    Construction checks that names are unique, every producer exists and comes first, and that
    each consumer's input shape agrees with what its producers output (a fully-connected layer
    may consume a flattened map; a concat's channels are the sum of its producers'; a data move
    reads as many elements as its producers write, in any shape).
    """

    name: str
    layers: tuple[Layer, ...]
    input_shape: tuple[int, int, int, int] = (1, 3, 224, 224)
    by_name: dict[str, Layer] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.layers:
            raise WorkloadError(f"network {self.name!r} has no layers")
        seen: dict[str, Layer] = {}
        for layer in self.layers:
            if layer.name in seen:
                raise WorkloadError(f"network {self.name!r}: duplicate layer name {layer.name!r}")
            for src in layer.inputs:
                if src not in seen:
                    raise WorkloadError(f"network {self.name!r}: layer {layer.name!r} reads {src!r}, which "
                                        f"is not an earlier layer (layers must be in topological order)")
            self._check_shapes(layer, [seen[s] for s in layer.inputs])
            seen[layer.name] = layer
        object.__setattr__(self, "by_name", seen)

    def _check_shapes(self, layer: Layer, producers: list[Layer]) -> None:
        if not producers:
            return
        where = f"network {self.name!r}, layer {layer.name!r}"
        if layer.op is OpKind.CONCAT:
            channels = sum(p.k_out for p in producers)
            spatial = (layer.n, layer.h, layer.w)
            if channels != layer.c_in or any((p.n, p.p, p.q) != spatial for p in producers):
                raise WorkloadError(f"{where}: concat of {[(p.k_out, p.p, p.q) for p in producers]} does not "
                                    f"give {layer.c_in}x{layer.h}x{layer.w}")
            return
        if layer.op is OpKind.MATMUL or layer.op.is_elementwise or layer.b_activation:
            self._check_elements(layer, producers, where)
            return
        if layer.op is OpKind.ADD:
            for p in producers:
                if (p.n, p.k_out, p.p, p.q) != (layer.n, layer.c_in, layer.h, layer.w):
                    raise WorkloadError(f"{where}: adds {p.name!r} of shape {p.k_out}x{p.p}x{p.q} to "
                                        f"{layer.c_in}x{layer.h}x{layer.w}")
            return
        if layer.op is OpKind.DATA_MOVE:
            # A re-arrangement may reinterpret its producers' bytes (reshape, transpose, several
            # tensors gathered into one): only the element count must agree.
            produced = sum(p.n * p.k_out * p.p * p.q for p in producers)
            if produced != layer.n * layer.c_in * layer.h * layer.w:
                raise WorkloadError(f"{where}: moves {layer.n}x{layer.c_in}x{layer.h}x{layer.w} elements but "
                                    f"its producers {[p.name for p in producers]} output {produced}")
            return
        if len(producers) != 1:
            raise WorkloadError(f"{where}: a {layer.op.value} layer reads one tensor, got {len(producers)}")
        p = producers[0]
        if (p.n, p.k_out, p.p, p.q) == (layer.n, layer.c_in, layer.h, layer.w):
            return
        if layer.op is OpKind.FC and p.k_out * p.p * p.q == layer.c_in and p.n == layer.n:
            return
        raise WorkloadError(f"{where}: expects input {layer.n}x{layer.c_in}x{layer.h}x{layer.w} but "
                            f"{p.name!r} produces {p.n}x{p.k_out}x{p.p}x{p.q}")

    @staticmethod
    def _check_elements(layer: Layer, producers: list[Layer], where: str) -> None:
        """Transformer kinds read their producers through views (head splits, transposes of a
        matmul's B, flattened batch): only element counts must agree. A matmul reads A from its first
        producer and an activation B from the second; an element-wise layer ``input_count`` tensors."""
        if layer.op is OpKind.MATMUL:
            want = [layer.elements(Operand.INPUT)] + ([layer.elements(Operand.WEIGHT)] if layer.b_activation else [])
            names = ["A", "B"]
        else:
            want = [layer.elements(Operand.INPUT) // layer.input_count] * layer.input_count
            names = [f"input {i}" for i in range(layer.input_count)]
            if layer.b_activation:  # then the broadcast row
                want, names = want + [layer.elements(Operand.WEIGHT)], names + ["broadcast operand"]
        if len(producers) > len(want):
            raise WorkloadError(f"{where}: a {layer.op.value} layer reads {len(want)} tensor(s), got "
                                f"{len(producers)} producers")
        for name, count, p in zip(names, want, producers, strict=False):
            made = p.elements(Operand.OUTPUT)
            if made != count and not (layer.op is OpKind.MATMUL and made % count == 0):
                # (a matmul operand may be a slice of its producer: ViT's head reads the class token,
                # GPT-2's attention Q, K and V are thirds of one projection)
                raise WorkloadError(f"{where}: its {name} has {count:,} elements but {p.name!r} produces "
                                    f"{made:,} ({p.n}x{p.k_out}x{p.p}x{p.q})")

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, name: str) -> Layer:
        try:
            return self.by_name[name]
        except KeyError:
            raise WorkloadError(f"network {self.name!r} has no layer {name!r}") from None

    def consumers(self, name: str) -> list[Layer]:
        """Layers that read ``name``'s output."""
        return [layer for layer in self.layers if name in layer.inputs]

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    @property
    def batch(self) -> int:
        """Images per inference (N of the layers; the largest if they differ)."""
        return max((layer.n for layer in self.layers), default=1)

    @property
    def params(self) -> int:
        """Weight elements (biases are not modelled; a matmul's activation B is not a weight)."""
        return sum(layer.params for layer in self.layers)

    def with_precision(self, precision: Precision) -> Network:
        """The network with every layer that has no precision yet set to ``precision``."""
        return replace(self, layers=tuple(layer.with_precision(precision) for layer in self.layers))
