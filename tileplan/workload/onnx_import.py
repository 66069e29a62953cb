"""Import an ONNX model as a tileplan ``Network``.

Only shapes matter: weights are read for their dimensions (initializers, ``Constant`` or
``ConstantOfShape`` nodes, or external-data files that may be absent). Shapes come from
``onnx.shape_inference`` after pinning a symbolic batch dimension to 1.

What becomes a layer:

- Conv (groups, dilations, strides, asymmetric pads, ``auto_pad``; 1-D and 2-D) -> conv kinds;
  Gemm and MatMul with a constant weight -> FC (a MatMul over the last axis of a >2-D tensor ->
  pointwise conv); MaxPool / AveragePool (``ceil_mode`` becomes end padding) -> pools;
  GlobalAveragePool / GlobalMaxPool and ReduceMean / ReduceMax over H and W -> global pool.
- Add / Sum of several equally shaped activations -> an n-ary add (Sub, Mul, Div, Max, Min, Mean of
  equally shaped activations cost the same and use the add kind too); channel Concat -> concat.
- Transpose (e.g. a channel shuffle), Upsample, Resize, SpaceToDepth, DepthToSpace, a Concat along
  another axis, a Pad that cannot be folded -> data move (reads its input once, writes its output once).

What is folded into its producer (no layer, no traffic): activations (Relu, LeakyRelu, Clip,
Sigmoid, HardSwish, ...), BatchNormalization and other normalisations, LRN, Softmax, Dropout,
Identity, Cast, (De)QuantizeLinear, element-wise ops with a constant or broadcast operand, and the
views Flatten / Reshape / Squeeze / Unsqueeze. A Pad on H and W is folded into the padding of the
convolution or pool that reads it. Nodes computing only on constants or shapes are ignored.

Anything else is reported in ONE ``UnsupportedOperatorError`` listing every offending node, unless
``skip_unsupported=True``, which passes such nodes through (identity on the first activation when
the shapes allow, else a data move) with a warning.
"""

from __future__ import annotations

import heapq
import os
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx

from tileplan.errors import UnsupportedOperatorError, WorkloadError, printable
from tileplan.workload._onnx_common import (
    LINEAR,
    REDUCE_POOL,
    SHAPE_OPS,
    SINGLE_ACTIVATION_OUTPUT,
    SUPPORTED,
    Constants,
    Namer,
    OnnxFileError,
    OnnxShapeError,
    attr,
    canon,
    ints,
    op_label,
)
from tileplan.workload._onnx_convert import Converter
from tileplan.workload._onnx_names import readable
from tileplan.workload._onnx_shapes import fill_shapes
from tileplan.workload._onnx_xformer import INT_TYPES
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network

__all__ = ["OnnxFileError", "OnnxShapeError", "load_onnx"]


def load_onnx(path: str | os.PathLike[str], *, batch: int | None = None, skip_unsupported: bool = False,
              seq: int | None = None) -> Network:
    """The network in the ONNX file ``path``.

    ``batch`` sets the batch size N (default: the model's own, 1 when it is symbolic). Raises
    ``OnnxFileError`` for a missing, truncated or corrupt file, ``OnnxShapeError`` when shapes
    cannot be inferred and ``UnsupportedOperatorError`` (listing every unsupported node) unless
    ``skip_unsupported`` is set. Layer names are the node names, sanitised and made unique
    (``<op><index>`` for unnamed nodes).
    """
    p = Path(path)
    if batch is not None and batch < 1:
        raise WorkloadError(f"{p}: batch size must be positive, got {batch}")
    model = _read(p)
    graph = model.graph
    validate_graph(graph, p)
    consts = Constants(graph)
    nodes = _toposort(graph, consts, p)
    static = _static_tensors(nodes, consts)
    problems = _unsupported(nodes, static, consts)
    if problems and not skip_unsupported:
        raise UnsupportedOperatorError(_unsupported_message(p, nodes, problems))
    inputs = _activation_inputs(graph, consts, p)
    native = _pin_batch(graph, inputs, p, seq)
    shapes, types = _infer_shapes(model, p)
    used = {t for node in graph.node for t in node.input} | {o.name for o in graph.output}
    producers = {out: node for node in graph.node for out in node.output if out}
    stopped = fill_shapes([node for _, node in nodes], shapes, consts, producers)
    conv = Converter(p, shapes, consts, static, used, producers, skip_unsupported, list(graph.node))
    conv.shapes_stopped = stopped
    for vi in inputs:
        conv.add_input(vi.name, _dims(vi) or (), vi.type.tensor_type.elem_type)
    conv.types = types
    made_by: dict[str, onnx.NodeProto] = {}  # layer name -> the node it was made for
    for index, node in nodes:
        if any(out and out not in static for out in node.output):  # else: constants or shape metadata
            before = len(conv.layers)
            try:
                conv.convert(node, index, supported=index not in problems)
            except WorkloadError as err:
                if str(err).startswith(str(p)):
                    raise
                raise type(err)(f"{p}: {err}") from None
            made_by.update((layer.name, node) for layer in conv.layers[before:])
    conv.warn_skipped()
    if not conv.layers:
        raise WorkloadError(f"{p}: the graph has no convolution, pooling, FC or other plannable layer")
    n, c, h, w = canon(_dims(inputs[0]) or ())
    layers = readable(conv.layers, made_by)
    if batch is not None and batch != native:
        layers = _rebatch(layers, native, batch, p)
        n = n // native * batch
    try:
        return Network(Namer().take(p.stem, "model"), tuple(layers), (n, c, h, w))
    except WorkloadError as err:
        raise WorkloadError(f"{p}: the imported layers do not form a valid network: {err}") from None


# --------------------------------------------------------------------- reading
#: ``auto_pad`` values ONNX defines.
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def validate_graph(graph: onnx.GraphProto, path: Path) -> None:
    """Refuse a graph that breaks ONNX's rules in ways an import would otherwise paper over, naming
    the node: a tensor written twice (by two nodes, or by a node and the graph's inputs or
    initializers), a node that reads its own output, an ``auto_pad`` ONNX does not define."""
    written: dict[str, str] = {vi.name: "a graph input" for vi in graph.input}
    written.update({t.name: "an initializer" for t in graph.initializer})
    for index, node in enumerate(graph.node):
        label = f"node {printable(node.name or f'{node.op_type.lower()}{index}')!r} ({node.op_type})"
        for out in node.output:
            if not out:
                continue
            if out in node.input:
                raise OnnxFileError(f"{path}: {label} reads its own output {printable(out)!r}; not a valid "
                                    f"ONNX graph (each tensor is computed before it is read)")
            if out in written:
                raise OnnxFileError(f"{path}: {label} writes tensor {printable(out)!r}, which {written[out]} "
                                    f"already defines; ONNX tensors are written once: rename one of them")
            written[out] = f"{label}"
        for a in node.attribute:
            if a.name != "auto_pad":
                continue
            text = a.s.decode("utf-8", errors="replace")
            if text not in (*AUTO_PADS, ""):
                raise OnnxFileError(f"{path}: {label} has auto_pad={printable(text)!r}; ONNX defines "
                                    f"{', '.join(AUTO_PADS)}")


def _read(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise OnnxFileError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - protobuf raises several unrelated types
        raise OnnxFileError(f"{path}: not a readable ONNX model, the file is truncated or corrupt "
                            f"({type(err).__name__}: {err}); re-export or re-download it") from None
    if not model.graph.node:
        raise OnnxFileError(f"{path}: contains no graph nodes (empty, truncated or not an ONNX model); "
                            f"re-export or re-download it")
    return model


def _toposort(graph: onnx.GraphProto, consts: Constants, path: Path) -> list[tuple[int, onnx.NodeProto]]:
    """Nodes in a topological order (files in the wild are not always sorted), with their index."""
    available = {vi.name for vi in graph.input} | consts.initializer_names | {""}
    producer: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for out in node.output:
            if out:
                producer[out] = i
    deps: list[set[int]] = []
    users: dict[int, list[int]] = defaultdict(list)
    for i, node in enumerate(graph.node):
        mine: set[int] = set()
        for t in node.input:
            if t in available:
                continue
            if t not in producer:
                raise OnnxFileError(f"{path}: node {node.name!r} ({op_label(node)}) reads tensor {t!r}, "
                                    f"which no node, initializer or graph input defines (truncated or "
                                    f"corrupt file?)")
            if producer[t] != i:
                mine.add(producer[t])
        deps.append(mine)
        for d in mine:
            users[d].append(i)
    # Kahn's algorithm, lowest original index first: a sorted graph keeps its order.
    ready = [i for i, d in enumerate(deps) if not d]
    heapq.heapify(ready)
    order: list[int] = []
    remaining = [len(d) for d in deps]
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            remaining[u] -= 1
            if remaining[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(graph.node):
        stuck = [graph.node[i].name or graph.node[i].op_type for i in range(len(deps)) if remaining[i] > 0]
        raise OnnxFileError(f"{path}: the graph has a cycle through nodes {stuck[:5]}; it is not a valid "
                            f"model")
    return [(i, graph.node[i]) for i in order]


def _static_tensors(nodes: list[tuple[int, onnx.NodeProto]], consts: Constants) -> set[str]:
    """Tensors that are not activations: constants, shapes and anything computed only from them --
    except a lookup of rows of a 2-D weight table summed into the tokens (position and token-type
    embeddings, indexed by ids computed from the sequence length), which reads real bytes."""
    static = set(consts.initializer_names)
    readers: dict[str, set[str]] = defaultdict(set)
    for _, node in nodes:
        for t in node.input:
            readers[t].add(node.op_type)
    for _, node in nodes:
        inputs = [t for t in node.input if t]
        if is_table_lookup(node, consts) and readers[node.output[0]] and readers[node.output[0]] <= {"Add", "Cast"}:
            continue
        if node.op_type in SHAPE_OPS or all(t in static for t in inputs):
            static.update(node.output)
        elif node.op_type in SINGLE_ACTIVATION_OUTPUT:
            static.update(node.output[1:])
    return static


def _unsupported(nodes: list[tuple[int, onnx.NodeProto]], static: set[str], consts: Constants
                 ) -> dict[int, str]:
    """Index -> reason for every node on activations that tileplan cannot import."""
    problems: dict[int, str] = {}
    for index, node in nodes:
        if all(not t or t in static for t in node.input) or node.op_type in SHAPE_OPS:
            continue
        reason = _problem(node, static, consts)
        if reason:
            problems[index] = reason
    return problems


def _problem(node: onnx.NodeProto, static: set[str], consts: Constants) -> str:
    op = op_label(node)
    if op not in SUPPORTED:
        return op
    if op == "Conv":
        weight = consts.shape(node.input[1]) if len(node.input) > 1 else None
        if len(ints(node, "kernel_shape", [])) > 2 or (weight is not None and len(weight) > 4):
            return "Conv (3-D)"
    if op == "Gemm" and (len(node.input) < 2 or node.input[1] not in static or node.input[0] in static):
        return f"{op} (of two activations)"
    if op in LINEAR and node.input[0] in static:
        return f"{op} (of a constant by an activation)"
    if op == "Gemm" and attr(node, "transA", 0):
        return "Gemm (transA=1)"
    if op in REDUCE_POOL:
        axes = ints(node, "axes", [])
        if not axes and len(node.input) > 1:
            value = consts.value(node.input[1])
            axes = [] if value is None else [int(a) for a in np.ravel(value)]
        if sorted(axes) not in ([2, 3], [-2, -1]) and not (op == "ReduceMean" and len(axes) == 1):
            return f"{op} (over axes other than H, W)"
    return ""


def _unsupported_message(path: Path, nodes: list[tuple[int, onnx.NodeProto]], problems: dict[int, str]
                         ) -> str:
    by_op: dict[str, list[str]] = defaultdict(list)
    for index, node in nodes:
        if index in problems:
            by_op[problems[index]].append(node.name or f"{node.op_type.lower()}{index}")
    listed = "; ".join(f"{op} (node{'s' if len(names) > 1 else ''} {', '.join(repr(n) for n in names)})"
                       for op, names in by_op.items())
    return (f"{path}: {len(problems)} node(s) use operators tileplan cannot plan: {listed}. Replace them, or "
            f"pass skip_unsupported=True (CLI: --skip-unsupported) to import them as identity/data movement")


def is_table_lookup(node: onnx.NodeProto, consts: Constants) -> bool:
    """A Gather of rows of a 2-D initializer (an embedding table)."""
    table = consts.shape(node.input[0]) if node.op_type == "Gather" and node.input else None
    return table is not None and len(table) == 2 and node.input[0] in consts.initializer_names and \
        attr(node, "axis", 0) == 0


# --------------------------------------------------------------------- shapes
def _dims(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    dims = []
    for d in tt.shape.dim:
        if not d.HasField("dim_value") or d.dim_value < 1:
            return None
        dims.append(int(d.dim_value))
    return tuple(dims)


def _activation_inputs(graph: onnx.GraphProto, consts: Constants, path: Path) -> list[onnx.ValueInfoProto]:
    inputs = [vi for vi in graph.input if vi.name not in consts.initializer_names]
    if not inputs:
        raise OnnxFileError(f"{path}: the graph has no input tensor (every input is a constant)")
    return inputs


def _pin_batch(graph: onnx.GraphProto, inputs: list[onnx.ValueInfoProto], path: Path, seq: int | None = None) -> int:
    """Set a symbolic batch (axis 0) of every input to 1 and a symbolic sequence length (axis 1 of an
    integer input, e.g. token ids or an attention mask, or of a rank-3 input) to ``seq``; returns
    the first input's batch."""
    unknown: list[str] = []
    pinned = False
    for vi in inputs:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            unknown.append(f"{vi.name!r} (no shape)")
            continue
        for axis, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            if d.HasField("dim_value"):
                raise OnnxShapeError(f"{path}: input {vi.name!r} has size {d.dim_value} on axis {axis}: every size "
                                     f"of an input must be at least 1; re-export with the real input size")
            tokens = tt.elem_type in INT_TYPES or len(tt.shape.dim) == 3
            if axis == 0:
                d.dim_value = 1
            elif axis == 1 and tokens and seq is not None:
                d.dim_value = seq
                pinned = True
            elif axis == 1 and tokens:
                raise OnnxShapeError(f"{path}: input {vi.name!r} has a dynamic sequence length (axis 1, "
                                     f"{d.dim_param or '?'}); give the tokens to plan with --seq N (API: seq=N)")
            else:
                unknown.append(f"{vi.name!r} axis {axis} ({d.dim_param or '?'})")
    if unknown:
        raise OnnxShapeError(f"{path}: input size unknown for {', '.join(unknown)}; tileplan needs static "
                             f"input shapes (only the batch may be symbolic): re-export with a fixed size")
    if seq is not None and not pinned:
        raise OnnxShapeError(f"{path}: --seq {seq} given but no input has a dynamic sequence length (axis 1 of "
                             f"token ids or of a 3-D input); drop --seq, the export's own sizes apply")
    return inputs[0].type.tensor_type.shape.dim[0].dim_value if inputs[0].type.tensor_type.shape.dim else 1


def _infer_shapes(model: onnx.ModelProto, path: Path) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """Fully known shapes of every tensor after ONNX shape inference (with data propagation, so
    shapes computed by Shape/Gather/Concat chains are known)."""
    # Custom-domain nodes often come without an opset import, which makes inference refuse the
    # whole graph; declaring the domain lets it skip just those nodes.
    declared = {o.domain for o in model.opset_import}
    for domain in sorted({node.domain for node in model.graph.node} - declared - {"ai.onnx"}):
        model.opset_import.append(onnx.helper.make_opsetid(domain, 1))
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                                     data_prop=True)
    except Exception as err:  # noqa: BLE001 - onnx raises InferenceError, ValidationError, RuntimeError...
        raise OnnxShapeError(f"{path}: ONNX shape inference failed ({type(err).__name__}: {err}); fix the "
                             f"graph or give it static shapes") from None
    shapes: dict[str, tuple[int, ...]] = {}
    g = inferred.graph
    types = {t.name: int(t.data_type) for t in g.initializer}
    for vi in [*g.input, *g.value_info, *g.output]:
        if vi.type.tensor_type.elem_type:
            types[vi.name] = int(vi.type.tensor_type.elem_type)
        dims = _dims(vi)
        if dims is not None or (vi.type.tensor_type.HasField("shape") and not vi.type.tensor_type.shape.dim):
            shapes[vi.name] = dims or ()
    return shapes, types


def _rebatch(layers: list[Layer], native: int, batch: int, path: Path) -> list[Layer]:
    """The layers at batch ``batch`` instead of the model's ``native`` batch."""
    out = []
    for layer in layers:
        if layer.n % native:
            raise OnnxShapeError(f"{path}: layer {layer.name!r} has batch {layer.n}, not a multiple of the "
                                 f"model's batch {native}; cannot change the batch size")
        out.append(replace(layer, n=layer.n // native * batch))
    return out
