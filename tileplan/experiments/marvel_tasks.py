"""MARVEL's evaluation (``experiments.marvel``): the numbers of one layer or network, computed in a
worker process each -- a Table 3 layer's off-chip subspace (Table 3, Fig. 6, Fig. 7, Table 4), its
on-chip searches per platform (Fig. 8), the joint search and random sampling (Fig. 10), a whole
network per variant (Fig. 9) -- with the platforms, variants and budgets they run under.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import numpy as np

from tileplan.arch import load
from tileplan.arch.spec import Arch
from tileplan.cost.bounds import compulsory_bytes
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, OPERANDS
from tileplan.mapping import DEFAULT_LAYOUTS, layout_options
from tileplan.search import run as run_strategy
from tileplan.search.marvel import marvel_parts
from tileplan.search.marvel_offchip import candidate_tiles, db_blocks, fits, layout_blocks, offchip
from tileplan.search.objective import Objective
from tileplan.workload.zoo.marvel import TABLE3, MarvelLayer

PLATFORMS = ("eyeriss", "edge")
BASELINES = ("rs", "nvdla", "shidiannao")
VARIANTS = ("marvel", *BASELINES)
#: MARVEL without the no-prologue/epilogue pruning (Fig. 8): CPU-time budget per layer, platform and
#: objective. The latency search completes well within it (the incumbent's compute steps cap what is
#: built); the exact energy search takes minutes on the larger layers, so it stops at the budget with
#: the best found so far (never worse than MARVEL's: MARVEL's space is searched first).
NODIV_BUDGET_S = {Objective.LATENCY: 60.0, Objective.ENERGY: 5.0}
#: Innermost letters a layout may take per tensor (batch 1: N is never innermost); W, I, O as the paper.
INNER = {0: ("C", "H", "W"), 1: ("K", "C", "R", "S"), 2: ("K", "P", "Q")}

Task = tuple[str, str, str, float]  # (kind, layer label, platform, random sampling's largest budget, s)


@cache
def _arch(name: str) -> Arch:
    return load(name)


def _row(label: str) -> MarvelLayer:
    return next(r for r in TABLE3 if r.label == label)


def _problem(label: str, platform: str) -> Problem:
    return Problem(_row(label).layer(), _arch(platform))


def _layouts() -> list[list[str]]:
    """Per tensor (input, weight, output) one layout per innermost letter, the rest in default order."""
    return [[DEFAULT_LAYOUTS[op].replace(x, "") + x for x in INNER[op]] for op in OPERANDS]


def _offchip_task(label: str) -> dict[str, Any]:
    """Table 3 / Fig. 6 / Table 4 (off-chip) numbers of one layer."""
    problem = _problem(label, "eyeriss")
    row = _row(label)
    t0 = time.process_time()
    off = offchip(problem)
    seconds = time.process_time() - t0
    tiles = candidate_tiles(problem, True)
    tiles = tiles[fits(problem, tiles)]
    per_op = layout_blocks(problem, tiles, _layouts())
    total = per_op[0][:, :, None, None] + per_op[1][:, None, :, None] + per_op[2][:, None, None, :]
    by_layout = total.min(axis=0)  # (3 input, 4 weight, 3 output) fewest blocks per layout combination
    paper = np.array([row.our_tiles()])
    lay = _paper_layouts(row)
    codes = np.array([[layout_options(op).index(lay[op]) for op in OPERANDS]])
    paper_blocks = float(db_blocks(problem, paper, codes)[0][0])
    dims = [int(problem.dims[d]) for d in DIMS]
    return {"label": label, "tiles": off.mapping.tiles, "order": off.mapping.order, "layouts": off.mapping.layouts,
            "blocks": off.blocks, "paper_blocks": paper_blocks, "paper_fits": bool(fits(problem, paper)[0]),
            "paper_need": _need(problem, row), "by_layout": by_layout, "candidates": off.candidates,
            "best_order_bursts": off.best_order_bursts, "order_bursts": off.order_bursts, "seconds": seconds,
            "dims": dims, "fitting_tilings": len(tiles)}


def _need(problem: Problem, row: MarvelLayer) -> int:
    """Bytes the paper's level-3 tile needs on chip, double-buffered when the arch is."""
    t = np.array(row.our_tiles())
    dims = problem.dims
    rows = (min(t[4], dims[4]) - 1) * problem.stride[0] + min(t[6], dims[6])
    cols = (min(t[5], dims[5]) - 1) * problem.stride[1] + min(t[7], dims[7])
    prec = problem.precision
    inp = int(t[0] * t[1] * t[3] * min(rows, problem.in_h) * min(cols, problem.in_w)) * prec.input
    inp *= problem.layer.input_count
    wgt = int(t[1] * t[2] * t[3] * t[6] * t[7]) * prec.weight if problem.has_operand[1] else 0
    out = int(t[0] * t[1] * t[2] * t[4] * t[5]) * prec.psum
    return (inp + wgt + out) * (2 if problem.arch.double_buffering else 1)


def _paper_layouts(row: MarvelLayer) -> tuple[str, str, str]:
    """The paper's innermost layout letters (W, I, O) as our layouts (its P is our Q, X our W)."""
    w_letter = {"C": "C", "K": "K", "R": "R", "S": "S"}
    i_letter = {"X": "W", "Y": "H", "C": "C"}
    o_letter = {"P": "Q", "Q": "P", "K": "K"}
    w, i, o = row.innermost
    w_ours = "K" if row.channelwise and w == "C" else w_letter[w]
    inner = (i_letter[i], w_ours, o_letter[o])
    out = [default.replace(x, "") + x for x, default in zip(inner, DEFAULT_LAYOUTS, strict=True)]
    return out[0], out[1], out[2]


def _onchip_task(task: Task) -> dict[Any, Any]:
    """Fig. 8 / Table 4 (on-chip) numbers of one layer on one platform, its joint search (Fig. 10), or
    one whole network (Fig. 9: ``label`` is the network)."""
    kind, label, platform, budget_s = task
    out: dict[Any, Any] = {"label": label, "platform": platform}
    if kind == "network":
        from tileplan import api

        for name in VARIANTS:
            t0 = time.process_time()
            plan = api.plan(label, _arch(platform), strategy=name, objective=Objective.LATENCY, jobs=1)
            macs = float(sum(lp.cost.macs for lp in plan.layers))
            out[name] = (plan.latency_cycles, plan.energy_pj, time.process_time() - t0, macs)
        return out
    problem = _problem(label, platform)
    if kind == "nodiv":
        for objective in (Objective.LATENCY, Objective.ENERGY):
            t0 = time.process_time()
            _off, on = marvel_parts(problem, objective, divisors=False, seconds=NODIV_BUDGET_S[objective])
            out[objective.value] = (float(on.cost.latency_cycles[0]), float(on.cost.energy_pj[0]),
                                    time.process_time() - t0, on.complete, float(on.evaluated), float(on.costed))
        return out
    if kind == "joint":
        for name in ("marvel", "marvel-joint"):
            t0 = time.process_time()
            r = run_strategy(name, problem, Objective.LATENCY)
            out[name] = (float(r.cost.latency_cycles[0]), float(r.cost.energy_pj[0]), time.process_time() - t0,
                         float(r.evaluated))
        # random sampling given MARVEL's search time, then the joint search's (capped)
        joint_s = min(out["marvel-joint"][2], budget_s)
        for key, seconds in (("random@marvel", out["marvel"][2]), ("random@joint", joint_s)):
            r = run_strategy("marvel-random", problem, Objective.LATENCY, seconds=max(seconds, 1e-3), seed=0)
            out[key] = (float(r.cost.latency_cycles[0]), float(r.cost.energy_pj[0]), r.seconds, float(r.evaluated))
        return out
    for objective in (Objective.LATENCY, Objective.ENERGY):
        for name in VARIANTS:
            t0 = time.process_time()
            r = run_strategy(name, problem, objective)
            out[objective.value, name] = (float(r.cost.latency_cycles[0]), float(r.cost.energy_pj[0]),
                                          time.process_time() - t0)
    off, on = marvel_parts(problem, Objective.LATENCY)
    out["onchip_space"] = on.space
    out["onchip_evaluated"] = float(on.evaluated)
    out["onchip_costed"] = float(on.costed)
    out["macs"] = float(problem.macs)
    out["roof"] = _roofline(problem)
    t0 = time.process_time()
    run_strategy("marvel", problem, Objective.LATENCY)
    out["marvel_seconds"] = time.process_time() - t0
    return out


def _roofline(problem: Problem) -> float:
    """Attainable MACs per cycle: the PE array's peak, or the NoC moving every operand once."""
    arch = problem.arch
    peak = float(arch.peak_macs_per_cycle(problem.precision.input))
    bw = arch.noc_bytes_per_cycle
    if bw is None:
        return peak
    return min(peak, problem.macs * bw / compulsory_bytes(problem.layer))
