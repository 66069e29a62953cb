"""Execution programs: the plan of one layer spelled out as e-PlaNNer-style IR, run and checked.

* :func:`generate_program` — the program a mapping implies (exactly what the cost model prices);
* :func:`emit_ir` / :func:`parse_ir` — its text form (``[info]``, ``[var]``, ``[text]`` sections);
* :func:`execute` — run it on integer tensors, counting every DRAM byte and burst;
* :func:`emit_c` — a self-contained C99 program doing the same; :func:`emit_cuda` — a CUDA one
  (``-DTILEPLAN_CUDA_EMULATE`` builds it for the CPU);
* :func:`verify_layer` — all of the above against the direct reference and the cost model;
  :func:`verify_layer_c` — the same through the compiled C program (``cc``; ``verify --backend c``);
* :func:`read_ir` / :func:`write_ir` / :func:`write_c` — files (errors name file and line; atomic writes).

>>> from tileplan.arch import load
>>> from tileplan.dims import DIMS
>>> from tileplan.mapping import Mapping
>>> from tileplan.workload.layer import Layer
>>> layer = Layer.conv("c", c_in=4, h=6, w=6, k_out=8, r=3)        # 3x3, pad 1: 8 x 6 x 6 out
>>> mapping = Mapping(tiles=(1, 1, 4, 4, 3, 6, 3, 3), order=DIMS)  # K and P in two tiles each
>>> program = generate_program(layer, load("nmp"), mapping)
>>> emit_ir(program).splitlines()[-1]
'STORE OUTPUT_3 MB2[0]'
>>> result = verify_layer(layer, load("nmp"), mapping)
>>> result.ok, result.counted_bytes  # input rows 0-3 and 2-5 once per K half; 2-byte data
(True, (768, 576, 576))
"""

from tileplan.program.cgen import emit_c
from tileplan.program.cudagen import emit_cuda
from tileplan.program.cverify import verify_layer_c
from tileplan.program.errors import OnChipOverflowError, ProgramError
from tileplan.program.executor import ExecResult, execute
from tileplan.program.files import read_ir, write_c, write_ir
from tileplan.program.generate import generate_program
from tileplan.program.ir import Program
from tileplan.program.irtext import emit_ir, parse_ir
from tileplan.program.reference import reference_output
from tileplan.program.verify import VerifyResult, verify_layer

__all__ = ["ExecResult", "OnChipOverflowError", "Program", "ProgramError", "VerifyResult", "emit_c", "emit_cuda",
           "emit_ir", "execute", "generate_program", "parse_ir", "read_ir", "reference_output",
           "verify_layer", "verify_layer_c", "write_c", "write_ir"]
