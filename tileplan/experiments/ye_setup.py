"""What Ye et al.'s experiment modules share: the ``ye-<KB>`` machine at one byte per word, the
convolutional part of a network, and the DRAM objective (``ye`` and ``ye_extra`` both import it)."""

from __future__ import annotations

from dataclasses import replace

from tileplan import api
from tileplan.arch.spec import Arch
from tileplan.search.objective import Objective
from tileplan.workload.layer import OpKind
from tileplan.workload.network import Network

DRAM = Objective.DRAM


def words_arch(kb: int) -> Arch:
    """``ye-<kb>`` with one-byte elements (the buffer holds ``kb`` K data words)."""
    return api.load_arch(f"ye-{kb}", ["precision_bytes=1"])


def conv_part(network: Network) -> Network:
    """The network up to its classifier (the layers before the first global pool or FC layer): the
    convolutions Ye et al. evaluate."""
    layers = network.layers
    end = next((i for i, x in enumerate(layers) if x.op in (OpKind.FC, OpKind.GLOBALPOOL)), len(layers))
    return replace(network, layers=layers[:end])
