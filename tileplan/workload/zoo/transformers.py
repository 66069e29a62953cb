"""Transformers: BERT-base, ViT-B/16, GPT-2 (prefill and decode) and one Llama-3-8B decoder block.

Every matmul, softmax, norm, activation, residual add and embedding lookup is a layer (see
``workload.transformer``); the attention scale 1/sqrt(d_head) is applied to the Q.K^T result as it is
written and the causal mask inside the softmax (neither moves data). Biases are not modelled (as for
every network in the zoo), so neither is LayerNorm's beta. Q, K and V are three projections (GPT-2's
fused ``c_attn`` computes the same MACs with the same weights).
"""

from __future__ import annotations

from dataclasses import dataclass

from tileplan.errors import WorkloadError
from tileplan.workload.builder import NetBuilder
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network
from tileplan.workload.transformer import elementwise, embedding, matmul


@dataclass
class Tokens:
    """A token tensor being built: ``batch x rows x dim`` produced by layer ``src`` (``""``: input)."""

    layers: list[Layer]
    batch: int
    rows: int
    dim: int
    src: str = ""

    def push(self, layer: Layer) -> str:
        self.layers.append(layer)
        return layer.name

    def linear(self, name: str, src: str, k: int, n: int, rows: int | None = None) -> str:
        return self.push(matmul(name, m=self.rows if rows is None else rows, k=k, n=n, batch=self.batch,
                                inputs=(src,) if src else ()))

    def eltwise(self, name: str, kind: str, srcs: tuple[str, ...], channels: int | None = None,
                rows: int | None = None, count: int = 1) -> str:
        return self.push(elementwise(name, kind, channels=self.dim if channels is None else channels,
                                     rows=self.rows if rows is None else rows, batch=self.batch,
                                     inputs=tuple(s for s in srcs if s), input_count=count))

    def attention(self, prefix: str, x: str, *, heads: int, kv_heads: int, kv: int, cached: bool,
                  rope: bool = False) -> str:
        """Self-attention of ``x``; with ``cached`` the K/V of the ``kv`` earlier tokens come from a
        KV cache in DRAM (decode), else from this layer's own K/V projections (``kv`` = rows)."""
        d, dh = self.dim, self.dim // heads
        group = heads // kv_heads
        q = self.linear(f"{prefix}.q", x, d, d)
        k = self.linear(f"{prefix}.k", x, d, kv_heads * dh)
        v = self.linear(f"{prefix}.v", x, d, kv_heads * dh)
        if rope:
            q = self.eltwise(f"{prefix}.q_rope", "rope", (q,))
            k = self.eltwise(f"{prefix}.k_rope", "rope", (k,), channels=kv_heads * dh)
        g = self.batch * kv_heads
        qk = self.push(matmul(f"{prefix}.qk", m=group * self.rows, k=dh, n=kv, groups=g, b_activation=True,
                              inputs=(q,) if cached else (q, k)))
        sm = self.push(elementwise(f"{prefix}.softmax", "softmax", channels=g * kv, rows=group * self.rows,
                                   inputs=(qk,)))
        pv = self.push(matmul(f"{prefix}.pv", m=group * self.rows, k=kv, n=dh, groups=g, b_activation=True,
                              inputs=(sm,) if cached else (sm, v)))
        return self.linear(f"{prefix}.o", pv, d, d)


def _ffn(t: Tokens, prefix: str, x: str, ff: int, act: str) -> str:
    up = t.linear(f"{prefix}.up", x, t.dim, ff)
    a = t.eltwise(f"{prefix}.{act}", act, (up,), channels=ff)
    return t.linear(f"{prefix}.down", a, ff, t.dim)


def _encoder(t: Tokens, i: int, x: str, *, heads: int, ff: int, pre_norm: bool) -> str:
    """One BERT (post-norm) or ViT / GPT-2 (pre-norm) layer with a GELU MLP."""
    p = f"layer.{i}"
    if pre_norm:
        h = t.eltwise(f"{p}.attn.ln", "layernorm", (x,))
        a = t.attention(f"{p}.attn", h, heads=heads, kv_heads=heads, kv=t.rows, cached=False)
        x = t.eltwise(f"{p}.attn.add", "add", (a, x), count=2)
        h = t.eltwise(f"{p}.mlp.ln", "layernorm", (x,))
        m = _ffn(t, f"{p}.mlp", h, ff, "gelu")
        return t.eltwise(f"{p}.mlp.add", "add", (m, x), count=2)
    a = t.attention(f"{p}.attn", x, heads=heads, kv_heads=heads, kv=t.rows, cached=False)
    x = t.eltwise(f"{p}.attn.add", "add", (a, x), count=2)
    x = t.eltwise(f"{p}.attn.ln", "layernorm", (x,))
    m = _ffn(t, f"{p}.mlp", x, ff, "gelu")
    x = t.eltwise(f"{p}.mlp.add", "add", (m, x), count=2)
    return t.eltwise(f"{p}.mlp.ln", "layernorm", (x,))


def _check(name: str, seq: int, kv: int | None, *, max_seq: int | None = None, takes_kv: bool = False) -> None:
    if seq < 1:
        raise WorkloadError(f"{name}: --seq must be a positive number of tokens, got {seq}")
    if max_seq is not None and seq > max_seq:
        raise WorkloadError(f"{name}: --seq {seq} is longer than its {max_seq} learned positions")
    if kv is not None and not takes_kv:
        raise WorkloadError(f"{name} has no KV cache (--kv is for the decode networks: gpt2-decode, "
                            f"llama3-8b-block-decode)")
    if kv is not None and kv < 1:
        raise WorkloadError(f"{name}: --kv must be a positive number of cached tokens, got {kv}")


def bert_base(batch: int = 1, seq: int | None = None, kv: int | None = None) -> Network:
    """BERT-base (Devlin et al. 2019), encoder only (no pooler): 12 post-norm layers, d = 768, 12 heads,
    MLP 3,072; embeddings: 30,522 words, 512 positions, 2 token types. ``seq`` tokens (default 128).
    Per layer seq * (4 d^2 + 2 seq d + 2 d ff) MACs: 11.3 G at seq 128."""
    seq = 128 if seq is None else seq
    _check("bert-base", seq, kv, max_seq=512)
    d, heads, ff = 768, 12, 3072
    t = Tokens([], batch, seq, d)
    words = t.push(embedding("embed.word", rows=seq, dim=d, table_rows=30522, batch=batch))
    pos = t.push(embedding("embed.pos", rows=seq, dim=d, table_rows=512, batch=batch))
    typ = t.push(embedding("embed.type", rows=seq, dim=d, table_rows=2, batch=batch))
    x = t.eltwise("embed.add", "add", (words, pos, typ), count=3)
    x = t.eltwise("embed.ln", "layernorm", (x,))
    for i in range(12):
        x = _encoder(t, i, x, heads=heads, ff=ff, pre_norm=False)
    return Network("bert-base", tuple(t.layers), (batch, 1, seq, 1))


def vit_b16(batch: int = 1, seq: int | None = None, kv: int | None = None) -> Network:
    """ViT-B/16 (Dosovitskiy et al. 2021) at 224x224: a 16x16/16 patch convolution (196 tokens), the
    class token concatenated (a copy: 197 tokens), the learned position table added (read as the add's
    second input), 12 pre-norm layers (d = 768, 12 heads, MLP 3,072), final LayerNorm and the
    1,000-class head on the class token."""
    _check("vit-b16", 197 if seq is None else seq, kv)
    if seq is not None and seq != 197:
        raise WorkloadError("vit-b16: the token count follows from the 224x224 image (197); --seq does not apply")
    d, heads, ff, rows = 768, 12, 3072, 197
    b = NetBuilder("vit-b16", n=batch, channels=3, h=224, w=224)
    patches = b.conv(b.input, "embed.patch", d, 16, stride=16, pad=0)
    t = Tokens(b.layers, batch, rows, d)
    cls = t.push(embedding("embed.cls", rows=1, dim=d, table_rows=1, batch=batch))
    x = t.push(Layer.data_move("embed.concat", n=batch, c_in=d, h=rows, w=1, k_out=d, out_h=rows, out_w=1,
                               inputs=(patches.src, cls)))
    x = t.push(elementwise("embed.pos", "add", channels=d, rows=rows, batch=batch, inputs=(x,), input_count=2))
    for i in range(12):
        x = _encoder(t, i, x, heads=heads, ff=ff, pre_norm=True)
    x = t.eltwise("final.ln", "layernorm", (x,))
    t.push(matmul("head", m=1, k=d, n=1000, batch=batch, inputs=(x,)))
    return Network("vit-b16", tuple(t.layers), (batch, 3, 224, 224))


def _gpt2(name: str, batch: int, seq: int, kv: int, cached: bool) -> Network:
    d, heads, ff = 768, 12, 3072
    t = Tokens([], batch, seq, d)
    words = t.push(embedding("embed.word", rows=seq, dim=d, table_rows=50257, batch=batch))
    pos = t.push(embedding("embed.pos", rows=seq, dim=d, table_rows=1024, batch=batch))
    x = t.eltwise("embed.add", "add", (words, pos), count=2)
    for i in range(12):
        p = f"layer.{i}"
        h = t.eltwise(f"{p}.attn.ln", "layernorm", (x,))
        a = t.attention(f"{p}.attn", h, heads=heads, kv_heads=heads, kv=kv, cached=cached)
        x = t.eltwise(f"{p}.attn.add", "add", (a, x), count=2)
        h = t.eltwise(f"{p}.mlp.ln", "layernorm", (x,))
        x = t.eltwise(f"{p}.mlp.add", "add", (_ffn(t, f"{p}.mlp", h, ff, "gelu"), x), count=2)
    x = t.eltwise("final.ln", "layernorm", (x,))
    t.push(matmul("lm_head", m=seq, k=d, n=50257, batch=batch, inputs=(x,)))
    return Network(name, tuple(t.layers), (batch, 1, seq, 1))


def gpt2(batch: int = 1, seq: int | None = None, kv: int | None = None) -> Network:
    """GPT-2 small (Radford et al. 2019) prefill of ``seq`` tokens (default 1,024): 12 pre-norm layers,
    d = 768, 12 heads, MLP 3,072, 50,257-word vocabulary, tied LM head over every position."""
    seq = 1024 if seq is None else seq
    _check("gpt2", seq, kv, max_seq=1024)
    return _gpt2("gpt2", batch, seq, seq, cached=False)


def gpt2_decode(batch: int = 1, seq: int | None = None, kv: int | None = None) -> Network:
    """GPT-2 small generating one token against a KV cache of ``kv`` tokens (default 1,024): the new
    token's Q attends over ``kv`` cached keys and values read from DRAM."""
    kv = 1024 if kv is None else kv
    _check("gpt2-decode", 1, kv, takes_kv=True)
    if seq not in (None, 1):
        raise WorkloadError("gpt2-decode generates one token; --seq does not apply (use --kv for the cache)")
    return _gpt2("gpt2-decode", batch, 1, kv, cached=True)


def _llama_block(name: str, batch: int, seq: int, kv: int, cached: bool) -> Network:
    d, heads, kv_heads, ff = 4096, 32, 8, 14336
    t = Tokens([], batch, seq, d)
    p = "layer.0"
    h = t.eltwise(f"{p}.attn.norm", "rmsnorm", ("",))
    a = t.attention(f"{p}.attn", h, heads=heads, kv_heads=kv_heads, kv=kv, cached=cached, rope=True)
    x = t.eltwise(f"{p}.attn.add", "add", (a,), count=2)
    h = t.eltwise(f"{p}.mlp.norm", "rmsnorm", (x,))
    gate = t.linear(f"{p}.mlp.gate", h, d, ff)
    up = t.linear(f"{p}.mlp.up", h, d, ff)
    act = t.eltwise(f"{p}.mlp.silu", "silu", (gate,), channels=ff)
    prod = t.eltwise(f"{p}.mlp.mul", "mul", (act, up), channels=ff, count=2)
    down = t.linear(f"{p}.mlp.down", prod, ff, d)
    t.eltwise(f"{p}.mlp.add", "add", (down, x), count=2)
    return Network(name, tuple(t.layers), (batch, 1, seq, 1))


def llama3_8b_block(batch: int = 1, seq: int | None = None, kv: int | None = None) -> Network:
    """One Llama-3-8B decoder block (Meta 2024), prefill of ``seq`` tokens (default 2,048): RMSNorm,
    Q/K/V with grouped-query attention (32 query heads, 8 K/V heads, d_head 128), rotary embeddings,
    output projection, RMSNorm, SwiGLU MLP (gate and up 4,096 -> 14,336, down 14,336 -> 4,096)."""
    seq = 2048 if seq is None else seq
    _check("llama3-8b-block", seq, kv, max_seq=8192)
    return _llama_block("llama3-8b-block", batch, seq, seq, cached=False)


def llama3_8b_block_decode(batch: int = 1, seq: int | None = None, kv: int | None = None) -> Network:
    """The Llama-3-8B block generating one token against a KV cache of ``kv`` tokens (default 2,048)."""
    kv = 2048 if kv is None else kv
    _check("llama3-8b-block-decode", 1, kv, takes_kv=True)
    if seq not in (None, 1):
        raise WorkloadError("llama3-8b-block-decode generates one token; --seq does not apply (use --kv)")
    return _llama_block("llama3-8b-block-decode", batch, 1, kv, cached=True)
