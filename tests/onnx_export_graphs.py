"""GPT-2 and Llama blocks written with ``onnx.helper`` in the forms PyTorch 2.13's exporters write
(seen in real exports, ``tests/data/onnx_exports``): GPT-2's Conv1D as Reshape -> Gemm -> Reshape, the
fused QKV Split, SDPA's scaling of Q and K^T by d^-1/4 each (Transpose -> Mul -> MatMul), the tanh
GELU, RMSNorm with ``1 / sqrt``, rotary embeddings (``x cos + rotate_half(x) sin``), grouped-query
attention through ``repeat_kv`` (Unsqueeze -> Expand -> Reshape), position ids sliced from a constant
table up to the run-time sequence length. Node names follow the TorchScript exporter
(``/model/layers.0/self_attn/q_proj/MatMul``). No torch needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx_transformers import Graph


def _seq_len(g: Graph, ids: str) -> str:
    """Unsqueeze(Gather(Shape(ids), 1)): the run-time sequence length as a 1-element tensor."""
    return g.one("Unsqueeze", [g.one("Gather", [g.one("Shape", [ids]), g.scalar_int(1)], axis=0), g.ints([0])])


def _positions(g: Graph, ids: str, table_rows: int) -> str:
    """Position ids as HF writes them: a registered [1, table_rows] buffer sliced up to the sequence
    length (ONNX's shape inference cannot follow this Slice)."""
    g.inits.append(numpy_helper.from_array(np.arange(table_rows, dtype=np.int64)[None], "position_ids"))
    return g.one("Slice", ["position_ids", g.ints([0]), _seq_len(g, ids), g.ints([1]), g.ints([1])])


def _heads(g: Graph, x: str, heads: int, dh: int, name: str, perm: list[int]) -> str:
    return g.one("Transpose", [g.one("Reshape", [x, g.ints([0, 0, heads, dh])], name=f"{name}/Reshape")],
                 name=f"{name}/Transpose", perm=perm)


def _conv1d(g: Graph, x: str, k: int, n: int, seq: int, name: str) -> str:
    """GPT-2's Conv1D: x.view(-1, k) @ W + b, viewed back to [1, seq, n]."""
    flat = g.one("Reshape", [x, g.ints([-1, k])], name=f"{name}/Reshape")
    y = g.one("Gemm", [flat, g.weight(f"{name}.weight", [k, n]), g.weight(f"{name}.bias", [n])], name=f"{name}/Gemm")
    return g.one("Reshape", [y, g.ints([1, seq, n])], name=f"{name}/Reshape_1")


def _scaled(g: Graph, x: str, dh: int, name: str) -> str:
    return g.one("Mul", [x, g.scalar(float(dh) ** -0.25)], name=name)


def gpt2_block(path: Path, *, seq: int = 8, d: int = 16, heads: int = 2, ff: int = 64, vocab: int = 50,
               positions: int = 32) -> Path:
    """Token and position embeddings, one GPT-2 block, the final LayerNorm and the LM head."""
    g, dh, p = Graph(), d // heads, "/model/transformer/h.0"
    ids = "input_ids"
    x = g.one("Gather", [g.weight("wte", [vocab, d]), ids], name="/model/transformer/wte/Gather")
    pos = g.one("Gather", [g.weight("wpe", [positions, d]), _positions(g, ids, positions)],
                name="/model/transformer/wpe/Gather")
    x = g.one("Add", [x, pos], name="/model/transformer/Add")
    h = g.one("LayerNormalization", [x, g.weight("ln_1.w", [d]), g.weight("ln_1.b", [d])],
              name=f"{p}/ln_1/LayerNormalization", axis=-1)
    q, k, v = g.node("Split", [_conv1d(g, h, d, 3 * d, seq, f"{p}/attn/c_attn"), g.ints([d, d, d])],
                     name=f"{p}/attn/Split", n_out=3, axis=2)
    q = _scaled(g, _heads(g, q, heads, dh, f"{p}/attn/q", [0, 2, 1, 3]), dh, f"{p}/attn/Mul")
    k = _scaled(g, _heads(g, k, heads, dh, f"{p}/attn/k", [0, 2, 3, 1]), dh, f"{p}/attn/Mul_1")
    v = _heads(g, v, heads, dh, f"{p}/attn/v", [0, 2, 1, 3])
    scores = g.one("MatMul", [q, k], name=f"{p}/attn/MatMul")
    causal = g.one("Where", [g.one("Less", [g.ints(list(range(seq)), "rows_" + p), g.ints([seq])]),
                             g.scalar(0.0), g.scalar(-1e4)])
    scores = g.one("Add", [scores, causal], name=f"{p}/attn/Add")
    probs = g.one("Softmax", [scores], name=f"{p}/attn/Softmax", axis=-1)
    ctx = g.one("MatMul", [probs, v], name=f"{p}/attn/MatMul_1")
    ctx = g.one("Reshape", [g.one("Transpose", [ctx], name=f"{p}/attn/Transpose_3", perm=[0, 2, 1, 3]),
                            g.ints([1, seq, d])], name=f"{p}/attn/Reshape_4")
    x = g.one("Add", [_conv1d(g, ctx, d, d, seq, f"{p}/attn/c_proj"), x], name=f"{p}/Add")
    h = g.one("LayerNormalization", [x, g.weight("ln_2.w", [d]), g.weight("ln_2.b", [d])],
              name=f"{p}/ln_2/LayerNormalization", axis=-1)
    up = _conv1d(g, h, d, ff, seq, f"{p}/mlp/c_fc")
    cube = g.one("Mul", [g.one("Pow", [up, g.scalar(3.0)]), g.scalar(0.044715)])
    inner = g.one("Mul", [g.one("Add", [up, cube]), g.scalar(0.7978845608)])
    act = g.one("Mul", [g.one("Mul", [up, g.scalar(0.5)]), g.one("Add", [g.one("Tanh", [inner]), g.scalar(1.0)])],
                name=f"{p}/mlp/act/Mul_3")
    x = g.one("Add", [x, _conv1d(g, act, ff, d, seq, f"{p}/mlp/c_proj")], name=f"{p}/Add_1")
    x = g.one("LayerNormalization", [x, g.weight("ln_f.w", [d]), g.weight("ln_f.b", [d])],
              name="/model/transformer/ln_f/LayerNormalization", axis=-1)
    logits = g.one("MatMul", [x, g.weight("lm_head", [d, vocab])], name="/model/lm_head/MatMul")
    return g.save(path, [helper.make_tensor_value_info(ids, TensorProto.INT64, [1, seq])], [logits])


def rmsnorm(g: Graph, x: str, d: int, name: str) -> str:
    """HF's LlamaRMSNorm as the TorchScript exporter writes it: x / sqrt(mean(x^2) + eps) * w."""
    ms = g.reduce_mean(g.one("Pow", [x, g.scalar(2.0)]))
    inv = g.one("Div", [g.scalar(1.0), g.one("Sqrt", [g.one("Add", [ms, g.scalar(1e-6)])])], name=f"{name}/Div")
    return g.one("Mul", [g.weight(f"{name}.weight", [d]), g.one("Mul", [x, inv], name=f"{name}/Mul")],
                 name=f"{name}/Mul_1")


def rope(g: Graph, x: str, seq: int, dh: int, name: str) -> str:
    """x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[..., dh/2:], x[..., :dh/2])."""
    cos = g.weight(f"{name}.cos", [1, 1, seq, dh])
    sin = g.weight(f"{name}.sin", [1, 1, seq, dh])
    x1 = g.one("Slice", [x, g.ints([0]), g.ints([dh // 2]), g.ints([3])])
    x2 = g.one("Slice", [x, g.ints([dh // 2]), g.ints([dh]), g.ints([3])])
    rotated = g.one("Concat", [g.one("Neg", [x2]), x1], axis=-1)
    return g.one("Add", [g.one("Mul", [x, cos]), g.one("Mul", [rotated, sin])], name=f"{name}/Add")


def repeat_kv(g: Graph, x: str, kv: int, rep: int, seq: int, dh: int, name: str) -> str:
    """x[:, :, None].expand(1, kv, rep, seq, dh).reshape(1, kv * rep, seq, dh)."""
    wide = g.one("Expand", [g.one("Unsqueeze", [x, g.ints([2])]), g.ints([1, kv, rep, seq, dh])], name=f"{name}/Expand")
    return g.one("Reshape", [wide, g.ints([1, kv * rep, seq, dh])], name=f"{name}/Reshape")


def llama_block(path: Path, *, seq: int = 8, d: int = 32, heads: int = 4, kv: int = 2, ff: int = 48,
                vocab: int = 50, opset: int = 17) -> Path:
    """Token embedding and one Llama decoder block: RMSNorm, rotary Q/K, GQA (``heads`` / ``kv``)
    through repeat_kv, a causal mask, SwiGLU."""
    g, dh, p = Graph(opset=opset), d // heads, "/model/layers.0"
    rep = heads // kv
    x = g.one("Gather", [g.weight("embed_tokens", [vocab, d]), "input_ids"], name="/model/embed_tokens/Gather")
    h = rmsnorm(g, x, d, f"{p}/input_layernorm")
    proj = {n: g.one("MatMul", [h, g.weight(f"{n}_proj", [d, w])], name=f"{p}/self_attn/{n}_proj/MatMul")
            for n, w in (("q", d), ("k", kv * dh), ("v", kv * dh))}
    q = rope(g, _heads(g, proj["q"], heads, dh, f"{p}/self_attn/q", [0, 2, 1, 3]), seq, dh, f"{p}/self_attn/q_rope")
    k = rope(g, _heads(g, proj["k"], kv, dh, f"{p}/self_attn/k", [0, 2, 1, 3]), seq, dh, f"{p}/self_attn/k_rope")
    v = _heads(g, proj["v"], kv, dh, f"{p}/self_attn/v", [0, 2, 1, 3])
    k = repeat_kv(g, k, kv, rep, seq, dh, f"{p}/self_attn/k_rep")
    v = repeat_kv(g, v, kv, rep, seq, dh, f"{p}/self_attn/v_rep")
    k = _scaled(g, g.one("Transpose", [k], perm=[0, 1, 3, 2]), dh, f"{p}/self_attn/Mul_9")
    scores = g.one("MatMul", [_scaled(g, q, dh, f"{p}/self_attn/Mul_8"), k], name=f"{p}/self_attn/MatMul")
    scores = g.one("Add", [scores, g.weight("causal_mask", [1, 1, seq, seq])], name=f"{p}/self_attn/Add_2")
    probs = g.one("Softmax", [scores], name=f"{p}/self_attn/Softmax", axis=-1)
    ctx = g.one("MatMul", [probs, v], name=f"{p}/self_attn/MatMul_1")
    ctx = g.one("Reshape", [g.one("Transpose", [ctx], perm=[0, 2, 1, 3]), g.ints([1, seq, d])])
    o = g.one("MatMul", [ctx, g.weight("o_proj", [d, d])], name=f"{p}/self_attn/o_proj/MatMul")
    x = g.one("Add", [x, o], name=f"{p}/Add")
    h = rmsnorm(g, x, d, f"{p}/post_attention_layernorm")
    gate = g.one("MatMul", [h, g.weight("gate_proj", [d, ff])], name=f"{p}/mlp/gate_proj/MatMul")
    silu = g.one("Mul", [gate, g.one("Sigmoid", [gate])], name=f"{p}/mlp/act_fn/Mul")
    up = g.one("MatMul", [h, g.weight("up_proj", [d, ff])], name=f"{p}/mlp/up_proj/MatMul")
    down = g.one("MatMul", [g.one("Mul", [silu, up], name=f"{p}/mlp/Mul"), g.weight("down_proj", [ff, d])],
                 name=f"{p}/mlp/down_proj/MatMul")
    x = g.one("Add", [x, down], name=f"{p}/Add_1")
    return g.save(path, [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])], [x], opset)
