"""Transformer layers on the one loop nest: matmuls, element-wise and row-wise layers, embeddings.

A token tensor ``[batch, tokens, features]`` is a layer tensor with ``n = batch``, ``c = features``,
``h = tokens``, ``w = 1``. A matmul ``Y[b, m, n] = A[b, m, k] . B[b, k, n]`` maps m -> P, n -> K, k -> C
(R = S = Q = 1):

* B a **weight** (Linear / Gemm): the batch is N (B does not depend on it, so its tiles are reused
  across the batch, exactly as a 1x1 convolution's weights are).
* B an **activation** (attention's Q.K^T and P.V): every (batch, head) has its own B, so batch x heads
  is G, which indexes A, B and Y alike; N = 1.
* **Grouped-query attention** (``kv_heads`` K/V heads, each shared by ``heads // kv_heads`` query
  heads): G = batch x kv_heads and the query heads of a group are folded into P (rows ``j * m + i`` of
  group g are row i of query head ``g * group + j``). B (K or V of the group) does not depend on P, so
  one tile of it serves all the group's query heads -- K/V are never copied per query head -- and the
  folded rows are exactly the row-major ``[heads, m, d]`` layout of Q, so the fold is a view. Folding
  into N instead would also share B, but N sits outside G in the storage order (a strided view) and
  decode (m = 1) would leave P = 1 to spread over the PE array.
"""

from __future__ import annotations

from tileplan.dims import Operand  # noqa: F401 - used by the doctests
from tileplan.errors import WorkloadError
from tileplan.workload.layer import Layer, OpKind

_ELEMENTWISE = {"softmax": OpKind.SOFTMAX, "layernorm": OpKind.LAYERNORM, "rmsnorm": OpKind.RMSNORM,
                "gelu": OpKind.GELU, "silu": OpKind.SILU, "mul": OpKind.MUL, "rope": OpKind.ROPE, "add": OpKind.ADD}


def matmul(name: str, *, m: int, k: int, n: int, batch: int = 1, groups: int = 1, b_activation: bool = False,
           inputs: tuple[str, ...] = ()) -> Layer:
    """``Y[g, i, j] = sum_c A[g, i, c] B[g, c, j]`` for ``groups`` independent (m x k) . (k x n)
    products, over ``batch`` rows of A sharing B (``batch`` > 1 only with a weight B).

    ``inputs`` names A's producer, then B's when B is an activation made by a layer (an activation B
    that is not produced by the network, e.g. a KV cache, is read from DRAM like a network input).

    >>> qk = matmul("qk", m=128, k=64, n=128, groups=12, b_activation=True)
    >>> qk.macs == 12 * 128 * 128 * 64, qk.params, qk.shape_str()
    (True, 0, '768x128x1 -> 1536x128x1 x act g12')
    """
    if b_activation and batch != 1:
        raise WorkloadError(f"layer {name!r}: a matmul of two activations puts its batch on the groups "
                            f"(groups = batch x heads), got batch={batch}")
    return Layer(name=name, op=OpKind.MATMUL, n=batch, c_in=groups * k, h=m, w=1, k_out=groups * n, groups=groups,
                 inputs=inputs, b_activation=b_activation)


def elementwise(name: str, kind: str, *, channels: int, rows: int, batch: int = 1, inputs: tuple[str, ...] = (),
                input_count: int = 1, broadcast: bool = False) -> Layer:
    """An element-wise or row-wise layer (``kind``: softmax, layernorm, rmsnorm, gelu, silu, mul, rope, add)
    over a ``batch x channels x rows`` tensor (``input_count`` equally shaped tensors for mul/add; with
    ``broadcast`` an add or mul also reads one ``channels`` vector broadcast over the rows, e.g. a mask).

    >>> elementwise("ln", "layernorm", channels=768, rows=128).macs == 4 * 768 * 128
    True
    >>> mask = elementwise("mask", "add", channels=128, rows=12 * 128, broadcast=True)
    >>> mask.elements(Operand.WEIGHT), mask.params, mask.macs == 128 * 12 * 128
    (128, 0, True)
    """
    if kind not in _ELEMENTWISE:
        raise WorkloadError(f"layer {name!r}: unknown element-wise kind {kind!r}; expected one of "
                            f"{', '.join(_ELEMENTWISE)}")
    return Layer(name=name, op=_ELEMENTWISE[kind], n=batch, c_in=channels, h=rows, w=1, k_out=channels,
                 groups=channels, inputs=inputs, input_count=input_count, b_activation=broadcast)


def embedding(name: str, *, rows: int, dim: int, table_rows: int, batch: int = 1) -> Layer:
    """A Gather of ``rows`` rows (tokens) per batch item from a ``table_rows x dim`` weight table:
    reads the looked-up rows only and writes them (no loop nest, like a data move).

    >>> e = embedding("wte", rows=128, dim=768, table_rows=30522)
    >>> e.params, e.macs
    (23440896, 0)
    """
    return Layer(name=name, op=OpKind.EMBEDDING, n=batch, c_in=dim, h=rows, w=1, k_out=dim, groups=dim,
                 table_rows=table_rows)
