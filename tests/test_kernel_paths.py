"""The compiled cost kernel (numba: no reference counting, table lookups, shifts, conditional moves)
gives bit for bit the costs of the vectorised numpy evaluation of the same model, on random batches
of complete mappings (tiles, loop order, hoisting, unrolling, DRAM layouts, core split) over several
accelerators and layer shapes; the tables both read hold ``cost.tables``'s per-dimension sums."""

from __future__ import annotations

import numpy as np
import pytest
from golden_batches import FIELDS, problem_of

from tileplan.cost import compiled
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import best_unroll, evaluate, evaluate_orders, split_tables, tables_for
from tileplan.dims import NDIMS, OPERANDS, RELEVANT
from tileplan.search.space import class_orders, spatial_options, split_options

# (network, layer, accelerator, index into split_options: 0 the unsplit layer, -1 the middle one)
CASES = [
    ("resnet50", "res3a_conv2", "nmp", -1),  # 3x3 conv, 4 clusters x 8 cores, several core shapes
    ("resnet50", "conv1", "nmp", 0),  # 7x7 stride 2
    ("resnet50", "res5a_down", "nmp", -1),  # 1x1 stride 2
    ("mobilenetv2", "block1_dw", "nmp", -1),  # depthwise
    ("lenet5", "fc1", "nmp", 4),  # fully connected
    ("resnet50", "res3a_conv2", "eyeriss", 0),
    ("resnet50", "conv1", "eyeriss", 0),
    ("mobilenetv2", "block2_add", "eyeriss", 0),  # elementwise add (two inputs)
    ("lenet5", "conv2", "hwff1", 0),
]


def _batch(problem, split: int, n: int, rng: np.random.Generator) -> MappingBatch:
    splits = split_options(problem)
    cl, co = splits[len(splits) // 2 if split < 0 else split]
    grid = problem.core_grid(cl, co)
    max_len = np.array(grid.max_length, dtype=np.int64)
    relevant = np.array([[d in RELEVANT[op] for d in range(NDIMS)] for op in OPERANDS])
    tiles = np.clip(np.floor(np.exp(rng.random((n, NDIMS)) * np.log(max_len + 1))).astype(np.int64), 1, max_len)
    tiles[: n // 4] = rng.integers(1, max_len + 1, size=(n // 4, NDIMS))  # uniform sizes too (the bench's)
    uopts = spatial_options(problem, grid.max_length)
    return MappingBatch(tiles, np.argsort(rng.random((n, NDIMS)), axis=1),
                        (rng.random((n, 3, NDIMS)) < 0.25) & relevant[None], uopts[rng.integers(0, len(uopts), size=n)],
                        rng.integers(0, 24, size=(8, 3))[rng.integers(0, 8, size=n)], cl, co)


@pytest.mark.parametrize("path", ["numba", "extension"])
@pytest.mark.parametrize(("net", "layer", "arch", "split"), CASES)
def test_compiled_kernel_equals_numpy_bit_for_bit(net: str, layer: str, arch: str, split: int, path: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Both compiled paths: numba's (``TILEPLAN_KERNEL=numba``) and the extension built at install
    (``auto``, ``cost.aot``)."""
    mode = "auto" if path == "extension" else "numba"
    if compiled.loop() is None:
        pytest.skip("numba not installed")
    if path == "extension" and compiled.built() is None:
        pytest.skip("the kernel's extension is not built (python -m tileplan.warmup builds it)")
    ext = compiled.built() or {}
    before = {name: loop.calls for name, loop in ext.items()}
    problem = problem_of(net, layer, arch)
    batch = _batch(problem, split, 600, np.random.default_rng(11))
    if split != 0:
        assert len(problem.core_grid(batch.cluster_split, batch.core_split).shapes) > 1
    monkeypatch.setenv("TILEPLAN_KERNEL", "numpy")
    reference = evaluate(problem, batch)
    monkeypatch.setenv("TILEPLAN_KERNEL", mode)
    costs = evaluate(problem, batch)
    assert reference.feasible.any()
    for f in FIELDS:
        np.testing.assert_array_equal(np.asarray(getattr(costs, f)), np.asarray(getattr(reference, f)),
                                      err_msg=f"{net}/{layer} on {arch}: {f}")
    # The search's path: every reuse-class loop order per mapping, one objective.
    orders = class_orders()
    sub = batch.take(np.arange(150))
    for objective in ("latency", "energy", "dram"):
        np.testing.assert_array_equal(evaluate_orders(problem, sub, orders, objective, compiled_path=True),
                                      evaluate_orders(problem, sub, orders, objective, compiled_path=False),
                                      err_msg=f"{net}/{layer} on {arch}: {objective} over loop orders")
    # The exhaustive search's choice of unrolling: the compiled loop picks the same option.
    options = spatial_options(problem, problem.core_grid(batch.cluster_split, batch.core_split).max_length)
    K = tables_for(problem, batch)
    monkeypatch.setenv("TILEPLAN_KERNEL", "numpy")
    choice = best_unroll(K, batch.tiles, options)
    monkeypatch.setenv("TILEPLAN_KERNEL", mode)
    np.testing.assert_array_equal(compiled.unroll_choice(K, batch.tiles, options), choice,
                                  err_msg=f"{net}/{layer} on {arch}: best unroll")
    assert len(options) == 1 or len(np.unique(choice)) > 1
    if path == "extension":  # every compiled call above ran the extension's machine code
        assert ext["model_loop"].calls >= before["model_loop"] + 4 and ext["unroll_loop"].calls > before["unroll_loop"]
        assert ext["model_loop"].fallen_back == ext["unroll_loop"].fallen_back == 0


# ResNet-50's split 3 x 3 and 1 x 1/2 on nmp (several core shapes each, most of the 3 s) under slow; the
# default run keeps the split depthwise layer and every unsplit case
@pytest.mark.parametrize("cases", [pytest.param([c for i, c in enumerate(CASES) if i not in (0, 2)], id="others"),
                                   pytest.param([CASES[0], CASES[2]], marks=pytest.mark.slow, id="split-resnet50")])
def test_tables_hold_the_per_dimension_sums(cases: list[tuple[str, str, str, int]]) -> None:
    """The plain-position entries of the kernel tables are ``cost.tables``'s per-dimension statistics
    and burst sums, for every tile size, layout and core shape."""
    from tileplan.cost import kernel
    from tileplan.cost.kernel_tables import STORAGE_LOOP, storage_order, tensor_sizes
    from tileplan.cost.tables import plain_bursts, plain_stats
    from tileplan.mapping import layout_options

    for net, layer, arch, split in cases:
        problem = problem_of(net, layer, arch)
        splits = split_options(problem)
        cl, co = splits[len(splits) // 2 if split < 0 else split]
        grid = problem.core_grid(cl, co)
        codes = (tuple(range(24)),) * 3
        K = split_tables(problem, cl, co, codes)
        prec = problem.precision
        for op in OPERANDS:
            sizes = tensor_sizes(problem, op)
            for code, layout in enumerate(layout_options(op)):
                order = storage_order(op, layout)
                for pos, e in enumerate(order):
                    if op == 0 and e >= 3:
                        continue
                    d = STORAGE_LOOP[op][e]
                    steps = [prec.input, prec.weight, prec.output][op], prec.psum
                    steps = tuple(x * int(np.prod([sizes[f] for f in order[pos + 1:]])) for x in steps)
                    for s, core in enumerate(grid.shapes):
                        n = core.length[d]
                        r = (((s * 3 + op) * 24 + code) * 5 + pos) * kernel.NREC
                        assert K.prec[r + kernel.R_DIM] == d and K.prec[r + kernel.R_LEN] == n
                        t = np.arange(1, n + 1)
                        width = kernel.N_PLAIN2 if op == 2 else kernel.N_PLAIN
                        entries = K.ptab[K.prec[r + kernel.R_OFF]:][:n * width].reshape(n, width)
                        stats = plain_stats(n, sizes[e], t, np.zeros(n, dtype=bool))
                        np.testing.assert_array_equal(entries[:, kernel.P_MAX], stats.max_ext)
                        np.testing.assert_array_equal(entries[:, kernel.P_FULL], stats.nfull)
                        for k, step in enumerate(steps[:1 + (op == 2)]):
                            every, partial = plain_bursts(n, sizes[e], t, np.zeros(n, dtype=bool), step,
                                                          problem.arch.dram.burst_bytes)
                            np.testing.assert_array_equal(entries[:, kernel.P_EVERY + 2 * k], every)
                            np.testing.assert_array_equal(entries[:, kernel.P_PARTIAL + 2 * k], partial)
