"""Readable layer names for PyTorch exports: the module path the exporter recorded, shortened.

The TorchScript exporter names a node by its module path (``/model/encoder/layer.0/attention/self/
query/MatMul``); the dynamo exporter names it ``node_MatMul_55`` and keeps the path in the node's
``pkg.torch.onnx.name_scopes`` metadata. Either becomes ``layer.0.attn.query``: containers that say
nothing (``model``, ``encoder``, ``transformer``, ``self``) are dropped, a few long words shortened, and
layers that are not a module of their own get their kind (``layer.0.attn.qk``, ``layer.0.attn.softmax``,
``layer.0.attn.pv``, ``layer.0.mlp.gelu``). Graphs without such paths keep their node names.
"""

from __future__ import annotations

import ast
from dataclasses import replace

import onnx

from tileplan.workload._onnx_common import Namer
from tileplan.workload.layer import Layer, OpKind

#: Path components that only say where the module lives.
DROP = frozenset({"", "model", "encoder", "decoder", "transformer", "vit", "self", "base_model", "bert", "gpt2",
                  "llama"})
#: Shorter spellings of common module names.
SHORT = {"attention": "attn", "self_attn": "attn", "layers": "layer", "h": "layer", "embeddings": "embed",
         "intermediate": "mlp", "intermediate_act_fn": "act", "act_fn": "act", "layernorm": "ln"}
#: Kinds that are a module of their own (a Linear, a norm, an embedding): the path names them.
MODULE_KINDS = frozenset({OpKind.LAYERNORM, OpKind.RMSNORM, OpKind.EMBEDDING, OpKind.CONV})


def module_path(node: onnx.NodeProto) -> list[str] | None:
    """The module path of an exported node, or ``None`` when the exporter recorded none."""
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return None
            if isinstance(scopes, list) and len(scopes) >= 2:
                return str(scopes[-2]).split(".")
            return None
    if node.name.startswith("/") and node.name.count("/") >= 2:
        return [word for part in node.name.strip("/").split("/")[:-1] for word in part.split(".")]
    return None


def short_path(parts: list[str]) -> str:
    out: list[str] = []
    for part in parts:
        if part in DROP:
            continue
        out.append(SHORT.get(part, part))
    return ".".join(out)


def readable(layers: list[Layer], nodes: dict[str, onnx.NodeProto]) -> list[Layer]:
    """``layers`` renamed from their nodes' module paths (``nodes``: layer name -> node), inputs
    following; unchanged when no node carries a path."""
    paths = {name: module_path(node) for name, node in nodes.items()}
    if not any(paths.values()):
        return layers
    namer = Namer()
    names: dict[str, str] = {}
    for layer in layers:
        parts = paths.get(layer.name)
        if parts is None:
            names[layer.name] = namer.take(layer.name, "layer")
            continue
        base = short_path(parts)
        kind = _kind_word(layer, names)
        own = layer.op in MODULE_KINDS or (layer.op is OpKind.MATMUL and not layer.b_activation) or \
            (base.rsplit(".", 1)[-1] == kind)
        names[layer.name] = namer.take(base if own and base else f"{base}.{kind}" if base else kind, kind)
    return [replace(layer, name=names[layer.name], inputs=tuple(names.get(i, i) for i in layer.inputs))
            for layer in layers]


def _kind_word(layer: Layer, names: dict[str, str]) -> str:
    if layer.op is OpKind.MATMUL and layer.b_activation:
        # Q.K^T reads projections; P.V reads the softmax's probabilities
        return "pv" if any(names.get(i, i).endswith("softmax") for i in layer.inputs[:1]) else "qk"
    if layer.op is OpKind.DATA_MOVE:
        return "move"
    return str(layer.op.value)
