"""Time the generated C99 programs of a plan's layers on this CPU: a real measured source for
``tileplan correlate`` (each layer compiled with ``cc -O2``, run on random operands, the fastest of
``repeats`` runs of the whole process kept)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.errors import TileplanError
from tileplan.plan import NetworkPlan
from tileplan.program.cgen import emit_c, operand_format
from tileplan.program.generate import generate_program
from tileplan.program.verify import random_operands
from tileplan.workload.layer import Precision
from tileplan.workload.network import Network

CFLAGS = ("-std=c99", "-O2")
#: Libraries linked after the source (the float element-wise kinds call libm).
LIBS = ("-lm",)


def time_layers(network: Network, arch: Arch, plan: NetworkPlan, *, repeats: int = 3,
                log: Callable[[str], None] | None = None) -> dict[str, float]:
    """Seconds each distinct planned layer's C program takes (layers reusing a plan are skipped)."""
    cc = shutil.which("cc")
    if cc is None:
        raise TileplanError("timing generated C needs a C compiler: `cc` is not on PATH")
    out: dict[str, float] = {}
    todo = [lp for lp in plan.layers if lp.mapping is not None and lp.cached_from is None]
    with tempfile.TemporaryDirectory(prefix="tileplan-ctime-") as tmp:
        folder = Path(tmp)
        for i, lp in enumerate(todo):
            if log:
                log(f"timing {lp.name} ({i + 1}/{len(todo)})")
            assert lp.mapping is not None
            layer = network[lp.name].with_precision(Precision.uniform(arch.precision_bytes, arch.psum_bytes))
            program = generate_program(layer, arch, lp.mapping)
            src, exe = folder / "layer.c", folder / "layer"
            src.write_text(emit_c(program))
            done = subprocess.run([cc, *CFLAGS, "-o", str(exe), str(src), *LIBS], capture_output=True, text=True)
            if done.returncode != 0:
                raise TileplanError(f"cc failed on layer {lp.name}: {done.stderr[:300]}")
            inputs, weight = random_operands(layer, np.random.default_rng(0))
            args, fmt = [], operand_format(program)[0]
            for j, x in enumerate(inputs + ([weight] if weight is not None else [])):
                path = folder / f"operand{j}.bin"
                x.astype(fmt).tofile(path)
                args.append(str(path))
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                run = subprocess.run([str(exe), *args, str(folder / "out.bin")], capture_output=True, text=True)
                best = min(best, time.perf_counter() - t0)
                if run.returncode != 0:
                    raise TileplanError(f"the C program of layer {lp.name} failed: {run.stderr[:300]}")
            out[lp.name] = best
    return out
