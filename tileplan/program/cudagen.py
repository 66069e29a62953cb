"""CUDA backend: a program as a self-contained ``.cu`` source (e-PlaNNer ch. 7.2 targets a Jetson TX2).

The instruction stream is the C backend's (``cgen``): the same host-side walk, one call per IR
instruction, commented with its line; only the runtime differs (``cuda_template``: device buffers as
on-chip memories, ``cudaMemcpy`` for LOAD/STORE, kernels with the PE array as thread block). With
``-DTILEPLAN_CUDA_EMULATE`` it compiles as C99 or C++ and runs on the CPU, bit-exact.
"""

from __future__ import annotations

from tileplan.mapping import Mapping
from tileplan.program.cgen import _Emitter, ew_kinds, substitutions
from tileplan.program.cgen_ew import Cells
from tileplan.program.cuda_ew import cuda_ew_calls, cuda_ew_runtime
from tileplan.program.cuda_template import CUDA_RUNTIME
from tileplan.program.ir import Program


class _CudaEmitter(_Emitter):
    def region(self, region: tuple[tuple[int, int], ...]) -> str:
        return "reg16(" + ", ".join(str(v) for rng in region for v in rng) + ")"

    def ew_calls(self, kind: str, row: int, out: Cells, inputs: list[Cells], wt: Cells | None,
                 region: str) -> list[str]:
        return cuda_ew_calls(kind, row, out, inputs, wt, region)


def thread_block(mapping: Mapping) -> tuple[int, int]:
    """Thread-block shape of a mapping's CONV kernels: its unrolling of C (x) and K (y)."""
    from tileplan.dims import Dim

    unroll = mapping.unroll()
    return unroll[Dim.C], unroll[Dim.K]


def emit_cuda(program: Program, *, threads: tuple[int, int] = (16, 16)) -> str:
    """A CUDA program running ``program`` (arguments and output as :func:`~tileplan.program.emit_c`);
    ``threads`` is the thread block of the CONV kernel: input x output channels (the PE array)."""
    em = _CudaEmitter(program)
    fields = substitutions(program, em)
    if ew_kinds(program):  # one kernel serves every kind: math.h and libm even for mul / add
        fields.update(ew_ops=cuda_ew_runtime(), includes="#include <math.h>\n", libs=" -lm")
    else:
        fields["ew_ops"] = ""
    fields["memories"] = "\n".join(f"static int64_t *mem_{m.name}[NCORES]; /* device buffer: holds "
                                   f"{', '.join(o.label for o in m.operands)} */" for m in program.memories)
    fields["setup"] = "\n".join(
        f"    for (int core = 0; core < NCORES; core++)\n"
        f"        check(cudaMalloc((void **)&mem_{m.name}[core], {m.size_bytes} * sizeof(int64_t)), __LINE__);"
        for m in program.memories)
    bx, by = max(1, threads[0]), max(1, threads[1])
    return CUDA_RUNTIME.substitute(fields, bx=bx, by=by, max_cells=max(m.size_bytes for m in program.memories))
