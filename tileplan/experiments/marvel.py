"""MARVEL's evaluation (Chatarasi et al., §4) in the one multi-level model: the off-chip subspace
(Table 3, Fig. 6, Fig. 7), the space sizes before and after decoupling and pruning (Table 4), the
on-chip mappings against the three fixed-dataflow baselines, MARVEL without the no-prologue/epilogue
pruning and the roofline (Fig. 8; that variant's energy search has a CPU-time budget per layer, see
``marvel_tasks.NODIV_BUDGET_S``), whole networks (Fig. 9), and the decoupling gap against the joint exhaustive
search and random sampling with their search times (Fig. 10).

Both platforms share the DRAM block size and L2, so the off-chip part is computed once (on
``eyeriss``). Search times are CPU seconds of the searching process (the machine may be shared).
Throughput is MACs per cycle of the latency-optimal mapping, energy that of the
energy-optimal mapping, as the paper optimises each separately.

This module runs the experiment: ``experiments.marvel_tasks`` computes each layer's and network's
numbers in worker processes, ``experiments.marvel_figures`` turns them into tables, figures and
notes, ``experiments.marvel_extra`` adds Table 2 and the uniform dataflow.
"""

from __future__ import annotations

from typing import Any

from tileplan.experiments import marvel_extra
from tileplan.experiments.common import ExperimentResult, Log, Reference
from tileplan.experiments.marvel_figures import _decoupling, _fig6_fig7, _fig8, _fig9, _search_time, _table3, _table4
from tileplan.experiments.marvel_tasks import PLATFORMS, Task, _offchip_task, _onchip_task
from tileplan.parallel import default_jobs, run_parallel
from tileplan.workload.zoo.marvel import TABLE3

NAME = "marvel"
TITLE = "MARVEL (Chatarasi et al.): decoupled off-chip / on-chip mapping with data layouts"
PAPER = "004_4b39796ccd1b0168.txt"

QUICK_LAYERS = ("L4", "L10")
#: Fig. 9's whole networks (quick: one small network, the same code path).
NETWORKS = ("vgg16", "alexnet", "resnet50", "mobilenetv2")
QUICK_NETWORKS = ("lenet5",)
#: Random sampling's largest CPU-time budget per layer and platform (Fig. 10; the paper's ran 48 h).
RANDOM_CAP_S = 5.0
QUICK_RANDOM_CAP_S = 0.25


def run(*, quick: bool = False, jobs: int | None = None, log: Log = lambda _m: None) -> ExperimentResult:
    """MARVEL's §4 (``quick``: two layers)."""

    ref = Reference.load(NAME)
    res = ExperimentResult(NAME, TITLE, PAPER, quick=quick,
                           quick_scope=f"layers {', '.join(QUICK_LAYERS)}, network {', '.join(QUICK_NETWORKS)}, "
                                       "short random budgets")
    workers = jobs or default_jobs()
    labels = list(QUICK_LAYERS) if quick else [r.label for r in TABLE3]
    log("off-chip subspace")
    offs: dict[str, dict[str, Any]] = {}
    for i, d in run_parallel(_offchip_task, labels, jobs=workers):
        offs[labels[i]] = d
    budget_s = QUICK_RANDOM_CAP_S if quick else RANDOM_CAP_S
    # the joint and no-divisor searches first (the longest tasks), so the workers end together
    tasks: list[Task] = [("joint", lab, p, budget_s) for lab in labels for p in PLATFORMS]
    tasks += [("nodiv", lab, p, 0.0) for lab in labels for p in PLATFORMS]
    nets = list(QUICK_NETWORKS) if quick else list(NETWORKS)
    tasks += [("network", net, p, 0.0) for net in nets for p in PLATFORMS]
    tasks += [("onchip", lab, p, 0.0) for lab in labels for p in PLATFORMS]
    ons: dict[Task, dict[Any, Any]] = {}
    for done, (i, d) in enumerate(run_parallel(_onchip_task, tasks, jobs=workers), start=1):
        ons[tasks[i]] = d
        log(f"on-chip {done}/{len(tasks)}")
    _table3(res, ref, labels, offs)
    _fig6_fig7(res, ref, labels, offs)
    _table4(res, ref, labels, offs, ons)
    _fig8(res, ref, labels, ons)
    _fig9(res, ref, nets, ons)
    _decoupling(res, ref, labels, ons, budget_s)
    _search_time(res, labels, offs, ons, budget_s)
    marvel_extra.run(res, ref, labels, workers)
    return res
