"""Lower bounds on a layer's DRAM traffic, to report how far a plan is from ideal."""

from __future__ import annotations

import math

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.arrays import distinct
from tileplan.dims import Dim, Operand
from tileplan.workload.layer import Layer, OpKind


def touched_input_elements(layer: Layer) -> int:
    """Input elements some output actually reads (rows/columns skipped by a stride, or only ever
    covered by padding, are not read)."""
    counts = []
    for axis, (dp, dk) in enumerate(((Dim.P, Dim.R), (Dim.Q, Dim.S))):
        size = layer.h if axis == 0 else layer.w
        pad = layer.pad[0] if axis == 0 else layer.pad[2]
        stride, dil = layer.stride[axis], layer.dilation[axis]
        used = (stride * np.arange(layer.dims[dp], dtype=np.int64)[:, None]
                + dil * np.arange(layer.dims[dk], dtype=np.int64)[None, :] - pad).ravel()
        used = used[(used >= 0) & (used < size)]
        # one window position per output index never repeats (stride >= 1): count without deduplicating
        counts.append(int(used.size if layer.dims[dk] == 1 else distinct(used).size))
    return layer.n * layer.c_in * counts[0] * counts[1] * layer.input_count


def compulsory_bytes(layer: Layer) -> int:
    """Every needed element of every operand moved exactly once (bytes)."""
    if not layer.moves_data:
        return 0
    prec = layer.resolved_precision()
    if layer.op in (OpKind.DATA_MOVE, OpKind.EMBEDDING):  # an embedding's input is the rows it reads
        return layer.elements(Operand.INPUT) * prec.input + layer.elements(Operand.OUTPUT) * prec.output
    return (touched_input_elements(layer) * prec.input + layer.elements(Operand.WEIGHT) * prec.weight
            + layer.elements(Operand.OUTPUT) * prec.output)


def io_lower_bound_bytes(layer: Layer, arch: Arch) -> int:
    """Communication lower bound for the accelerator's total on-chip memory (bytes).

    Demmel & Dinh (2018) bound data movement of the 7-loop convolution with the Hölder-Brascamp-Lieb
    inequality. With exponents 1/2 on the input, filter and output projections and 1/2 on the
    filter-row and filter-column indices, at most (2M)^(3/2) (R S)^(1/2) MACs fit in a segment of
    execution that moves M words, so at least ``G / (2 sqrt(2) sqrt(M R S)) - M`` words move, for
    G MACs and M words of on-chip memory. The bound is valid for every stride (it is tight for
    stride 1 and loose for large strides); we take the larger of it and the compulsory traffic.
    """
    if not layer.moves_data:
        return 0
    compulsory = compulsory_bytes(layer)
    if not layer.has_weight_operand or layer.op.is_elementwise:
        return compulsory
    prec = layer.resolved_precision()
    word = min(prec.input, prec.weight, prec.output)
    onchip = sum(m.size_bytes for m in arch.memories) * arch.cores.total
    m_words = onchip / word
    rs = layer.r * layer.s
    words = layer.macs / (2 * math.sqrt(2) * math.sqrt(m_words * rs)) - m_words
    return max(compulsory, int(math.ceil(words * word)))
