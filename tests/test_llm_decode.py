"""LLM decode is DRAM-bound: every byte of the matmul weights and of the KV cache crosses the DRAM bus
once, and the plan must not move much more. The bytes are written out here from the networks'
published sizes (closed forms), not taken from the model."""

from __future__ import annotations

import pytest

from tileplan import api
from tileplan.workload import zoo
from tileplan.workload.layer import OpKind


def _gpt2_decode_bytes(kv: int) -> int:
    """Elements of GPT-2 small's matmul weights (QKV, O, MLP up/down, LM head) + its KV cache."""
    d, ff, layers, vocab = 768, 3072, 12, 50257
    return layers * (4 * d * d + 2 * d * ff) + d * vocab + 2 * layers * kv * d


def _llama_block_decode_bytes(kv: int) -> int:
    """Elements of one Llama-3-8B block's matmul weights (GQA 32/8 heads of 128, SwiGLU 14,336) + its KV cache."""
    d, kvd, ff = 4096, 8 * 128, 14336
    return 2 * d * d + 2 * d * kvd + 3 * d * ff + 2 * kv * kvd


@pytest.mark.parametrize(
    ("network", "arch", "compulsory_elements"),
    [
        ("gpt2-decode", "edge", _gpt2_decode_bytes(1024)),
        ("llama3-8b-block-decode", "nmp", _llama_block_decode_bytes(2048)),
    ],
)
def test_decode_traffic_is_within_5_percent_of_weights_and_kv_cache(
    network: str, arch: str, compulsory_elements: int
) -> None:
    net = zoo.get(network)
    plan = api.plan(net, arch)
    compulsory_bytes = compulsory_elements * api.load_arch(arch).precision_bytes
    ops = {x.name: x.op for x in net.layers}
    matmuls = [lp for lp in plan.layers if ops[lp.name] is OpKind.MATMUL]
    for lp in matmuls:  # one token: every matmul streams its weight (or K / V) and is DRAM-bound
        # (edge's NoC has DRAM's bandwidth and also carries the outputs: NoC time is within 1 % of DRAM's)
        c = lp.cost
        assert c.dram_cycles > 4 * c.compute_cycles and c.dram_cycles >= 0.99 * c.noc_cycles, lp.name
        assert lp.cost.dram_bytes <= 1.05 * lp.compulsory_bytes, (lp.name, lp.cost.dram_bytes, lp.compulsory_bytes)
    matmul_bytes = sum(lp.cost.dram_bytes for lp in matmuls)
    assert compulsory_bytes <= matmul_bytes <= 1.05 * compulsory_bytes
    # the whole network (norms, softmax, residual adds of one token, one embedding row) adds little
    assert sum(lp.cost.dram_bytes for lp in plan.layers) <= 1.05 * compulsory_bytes
