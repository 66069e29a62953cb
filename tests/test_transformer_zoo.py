"""The transformer zoo against closed forms written out from the architectures' published sizes."""

from __future__ import annotations

import pytest

from tileplan.dims import Operand
from tileplan.errors import WorkloadError
from tileplan.workload import zoo
from tileplan.workload.layer import OpKind
from tileplan.workload.network import Network


def _matmul_macs(net: Network) -> int:
    return sum(x.macs for x in net.layers if x.op is OpKind.MATMUL)


def _outputs(net: Network) -> int:
    return sum(x.elements(Operand.OUTPUT) for x in net.layers)


@pytest.mark.parametrize("seq", [128, 512, 7])
def test_bert_base_closed_forms(seq: int) -> None:
    net = zoo.get("bert-base", seq=seq)
    d, h, ff, layers, s = 768, 12, 3072, 12, seq
    assert _matmul_macs(net) == layers * s * (4 * d * d + 2 * s * d + 2 * d * ff)
    # element-wise operations: per layer softmax 3/element over h*s*s scores, two residual adds (1),
    # two LayerNorms (4), GELU (1) over s*ff; embeddings: a 3-way add (2) and a LayerNorm (4)
    per_layer_ops = 3 * h * s * s + 2 * s * d + 2 * 4 * s * d + s * ff
    assert net.macs == _matmul_macs(net) + layers * per_layer_ops + 2 * s * d + 4 * s * d
    assert net.params == (30522 + 512 + 2) * d + d + layers * (4 * d * d + 2 * d * ff + 2 * d)
    # written elements: q k v o (4 s d), scores + softmax (2 h s s), pv (s d), add + ln (2 s d),
    # up + gelu (2 s ff), down + add + ln (3 s d); embeddings: 3 gathers, add, ln (5 s d)
    assert _outputs(net) == layers * (s * (10 * d + 2 * ff) + 2 * h * s * s) + 5 * s * d
    qk = net["layer.0.attn.qk"]
    assert (qk.b_activation, qk.params, qk.elements(Operand.WEIGHT)) == (True, 0, s * d)


def test_bert_base_default_is_seq_128() -> None:
    assert zoo.get("bert-base").layers == zoo.get("bert-base", seq=128).layers
    assert zoo.get("bert-base")["embed.word"].h == 128


def test_gpt2_prefill_and_decode() -> None:
    d, ff, layers, vocab = 768, 3072, 12, 50257
    s = 1024
    pre = zoo.get("gpt2")
    assert _matmul_macs(pre) == layers * s * (4 * d * d + 2 * s * d + 2 * d * ff) + s * d * vocab
    blocks = layers * (4 * d * d + 2 * d * ff + 2 * d)
    # the LM head's weight is the (tied) word table: counted once per layer that reads it
    assert pre.params == (vocab + 1024) * d + blocks + d + d * vocab
    dec = zoo.get("gpt2-decode")
    kv = 1024
    assert _matmul_macs(dec) == layers * (4 * d * d + 2 * kv * d + 2 * d * ff) + d * vocab
    assert dec.params == pre.params
    # the new token's attention reads the cache: K and V of 12 heads x kv tokens x 64, per layer
    qk, pv = dec["layer.3.attn.qk"], dec["layer.3.attn.pv"]
    assert qk.elements(Operand.WEIGHT) == pv.elements(Operand.WEIGHT) == kv * d
    assert qk.inputs == ("layer.3.attn.q",) and pv.inputs == ("layer.3.attn.softmax",)
    assert _matmul_macs(zoo.get("gpt2-decode", kv=100)) == layers * (4 * d * d + 2 * 100 * d + 2 * d * ff) + d * vocab


def test_llama3_block_gqa_closed_forms() -> None:
    d, heads, kv_heads, dh, ff, s = 4096, 32, 8, 128, 14336, 2048
    net = zoo.get("llama3-8b-block")
    kvd = kv_heads * dh
    assert _matmul_macs(net) == s * (2 * d * d + 2 * d * kvd + 3 * d * ff) + 2 * heads * s * s * dh
    assert net.params == 2 * d * d + 2 * d * kvd + 3 * d * ff + 2 * d
    qk = net["layer.0.attn.qk"]
    # grouped-query attention: 8 groups, 4 query heads folded into the rows, K read once per group
    assert (qk.groups, qk.h, qk.c_in // qk.groups, qk.k_out // qk.groups) == (kv_heads, 4 * s, dh, s)
    assert qk.elements(Operand.WEIGHT) == s * kvd  # K as the projection wrote it: no copy per query head
    assert qk.elements(Operand.INPUT) == s * d
    dec = zoo.get("llama3-8b-block-decode")
    kv = 2048
    assert _matmul_macs(dec) == 2 * d * d + 2 * d * kvd + 3 * d * ff + 2 * heads * kv * dh
    assert dec["layer.0.attn.pv"].elements(Operand.WEIGHT) == kv * kvd
    short = zoo.get("llama3-8b-block", seq=256)
    assert _matmul_macs(short) == 256 * (2 * d * d + 2 * d * kvd + 3 * d * ff) + 2 * heads * 256 * 256 * dh


def test_vit_b16_closed_forms() -> None:
    d, ff, layers, s = 768, 3072, 12, 197
    net = zoo.get("vit-b16")
    patch = 196 * d * (3 * 16 * 16)
    assert net["embed.patch"].macs == patch
    assert _matmul_macs(net) == layers * s * (4 * d * d + 2 * s * d + 2 * d * ff) + d * 1000
    assert net.params == 3 * 16 * 16 * d + d + layers * (4 * d * d + 2 * d * ff + 2 * d) + d + d * 1000


@pytest.mark.parametrize(("name", "kwargs", "needle"), [
    ("bert-base", {"seq": 513}, "512 learned positions"),
    ("bert-base", {"kv": 10}, "no KV cache"),
    ("gpt2-decode", {"seq": 4}, "--kv"),
    ("resnet18", {"seq": 4}, "--seq / --kv are for"),
    ("vit-b16", {"seq": 100}, "197"),
    ("llama3-8b-block", {"seq": 0}, "positive"),
])
def test_shape_overrides_rejected(name: str, kwargs: dict[str, int], needle: str) -> None:
    with pytest.raises(WorkloadError, match=needle):
        zoo.get(name, **kwargs)
