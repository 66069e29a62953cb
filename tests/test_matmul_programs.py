"""Programs of matmul layers: the executor runs the generated program of every distinct matmul of a
reduced BERT layer and a reduced Llama (GQA) block, its output equals the plain numpy product, and the
DRAM bytes and bursts it counts equal the model's (the third witness)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import toy_arch

from tileplan.api import plan_layer
from tileplan.dims import Operand
from tileplan.program import verify_layer
from tileplan.program.reference import reference_output
from tileplan.program.verify import random_operands
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.transformer import matmul

S, D, FF = 6, 8, 12
LAYERS = {
    "bert.q": matmul("q", m=S, k=D, n=D),  # projections (weight B)
    "bert.up": matmul("up", m=S, k=D, n=FF),
    "bert.down": matmul("down", m=S, k=FF, n=D),
    "bert.qk": matmul("qk", m=S, k=D // 2, n=S, groups=2, b_activation=True),  # 2 heads
    "bert.pv": matmul("pv", m=S, k=S, n=D // 2, groups=2, b_activation=True),
    "llama.qk": matmul("qk", m=2 * S, k=D // 2, n=S, groups=1, b_activation=True),  # 2 query heads per KV head
    "llama.pv": matmul("pv", m=2 * S, k=S, n=D // 2, groups=1, b_activation=True),
    "decode.qk": matmul("qk", m=2, k=D // 2, n=3 * S, groups=2, b_activation=True),  # one token, KV cache
    "batched.q": matmul("q", m=S, k=D, n=D, batch=2),
}


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("size", [96, 4096])
def test_matmul_program_counts_the_model_bytes(name: str, size: int) -> None:
    layer = LAYERS[name].with_precision(Precision.uniform(2))
    arch = toy_arch(unified=size, burst=8, cores=2)
    plan = plan_layer(layer, arch)
    assert plan.mapping is not None
    verdict = verify_layer(layer, arch, plan.mapping, seed=3)
    assert verdict.ok, verdict.mismatches()
    assert verdict.counted_read_bytes[Operand.WEIGHT] >= layer.elements(Operand.WEIGHT) * 2  # B really moved


def test_reference_is_a_batched_matrix_product() -> None:
    """The reference the executor is checked against is ``A @ B`` per group, written out here."""
    layer = LAYERS["bert.qk"]
    inputs, weight = random_operands(layer, np.random.default_rng(0))
    assert weight is not None
    a = inputs[0].reshape(2, D // 2, S).transpose(0, 2, 1)  # (group, m, k) from the (G*C, H) layer tensor
    b = weight.reshape(2, S, D // 2).transpose(0, 2, 1)  # (group, k, n) from (G*K, C)
    want = np.einsum("gmk,gkn->gnm", a, b).reshape(1, 2 * S, S, 1)
    assert np.array_equal(reference_output(layer, inputs, weight), want)


def test_layer_kinds_without_programs_say_so() -> None:
    from tileplan.program.errors import ProgramError
    from tileplan.program.generate import generate_program
    from tileplan.workload.transformer import elementwise

    soft = elementwise("s", "softmax", channels=4, rows=3).with_precision(Precision.uniform(1))
    with pytest.raises(ProgramError, match="no program for softmax"):
        generate_program(soft, toy_arch(), plan_layer(soft, toy_arch()).mapping)
    assert isinstance(LAYERS["bert.q"], Layer)
