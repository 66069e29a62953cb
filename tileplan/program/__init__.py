"""Execution programs: the plan of one layer spelled out as e-PlaNNer-style IR, run and checked.

* :func:`generate_program` — the program a mapping implies (exactly what the cost model prices);
* :func:`emit_ir` / :func:`parse_ir` — its text form (``[info]``, ``[var]``, ``[text]`` sections);
* :func:`execute` — run it on integer tensors, counting every DRAM byte and burst;
* :func:`emit_c` — a self-contained C99 program doing the same;
* :func:`verify_layer` — all of the above against the direct reference and the cost model.
"""

from tileplan.program.cgen import emit_c
from tileplan.program.errors import OnChipOverflowError, ProgramError
from tileplan.program.executor import ExecResult, execute
from tileplan.program.generate import generate_program
from tileplan.program.ir import Program
from tileplan.program.irtext import emit_ir, parse_ir
from tileplan.program.reference import reference_output
from tileplan.program.verify import VerifyResult, verify_layer

__all__ = ["ExecResult", "OnChipOverflowError", "Program", "ProgramError", "VerifyResult", "emit_c",
           "emit_ir", "execute", "generate_program", "parse_ir", "reference_output", "verify_layer"]
