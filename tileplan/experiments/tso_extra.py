"""Beyond TSO's paper: how the choice moves from 16 to 8 bits, and what TSO's restricted space leaves
on the table against the general exhaustive optimum, layer by layer (used by ``experiments.tso``)."""

from __future__ import annotations

from typing import Any

from tileplan import api
from tileplan.arch.spec import Arch
from tileplan.cost.problem import Problem
from tileplan.experiments.common import ExperimentResult, Log
from tileplan.plan import NetworkPlan
from tileplan.report import plots
from tileplan.search.tso import TSO_OPS, describe
from tileplan.workload.layer import Precision
from tileplan.workload.network import Network


def _choices(plan: NetworkPlan, net: Network, arch: Arch, precision: int) -> dict[str, tuple[str, str]]:
    """Searched TSO layers -> (partition, schedule) of their plan."""
    out = {}
    prec = Precision.uniform(precision)
    for lp in plan.layers:
        if lp.cached_from or lp.mapping is None or net[lp.name].op not in TSO_OPS:
            continue
        part, sched = describe(Problem(net[lp.name].with_precision(prec), arch), lp.mapping)
        out[lp.name] = (part.value, sched.value)
    return out


def beyond(res: ExperimentResult, nets: dict[str, Network], plans: dict[tuple[str, str], NetworkPlan], arch: Arch,
           *, quick: bool, jobs: int | None, log: Log) -> None:
    """Add the 8- vs 16-bit table and the TSO-vs-exhaustive table and figure to ``res``."""
    rows: list[dict[str, Any]] = []
    summary = []
    for n in (["lenet5"] if quick else ["lenet5", "squeezenet", "resnet50", "mobilenetv2"]):
        if n not in nets:
            continue
        log(f"{n}: 8-bit")
        p8 = api.plan(nets[n], arch, strategy="tso", precision_bytes=1, jobs=jobs)
        c16 = _choices(plans[n, "burst"], nets[n], arch, 2)
        c8 = _choices(p8, nets[n], arch, 1)
        changed = [name for name in c16 if c16[name] != c8.get(name)]
        for name in changed:
            rows.append({"network": n, "layer": name, "partition_16bit": c16[name][0], "schedule_16bit": c16[name][1],
                         "partition_8bit": c8[name][0], "schedule_8bit": c8[name][1]})
        t16, t8 = plans[n, "burst"].latency_s, p8.latency_s
        summary.append(f"{n}: {len(changed)} of {len(c16)} searched convs change partition or schedule at 8 bit; "
                       f"modelled time {t16 * 1e6:.0f} us -> {t8 * 1e6:.0f} us ({t16 / t8:.2f}x)")
    res.table("beyond_8bit_vs_16bit", rows)
    res.note("8-bit against 16-bit (Sec. VI suggests the choice moves once a tensor fits its MBLOB): "
             + "; ".join(summary) + ".")
    gaps: list[dict[str, Any]] = []
    for n in ["lenet5"] if quick else ["lenet5", "squeezenet"]:
        for lp in plans[n, "burst"].layers:
            layer = nets[n][lp.name].with_precision(Precision.uniform(2))
            if lp.cached_from or lp.mapping is None or (quick and layer.macs > 20_000):
                continue
            log(f"{n}: general exhaustive {lp.name}")
            general = api.plan_layer(layer, arch, strategy="exhaustive")
            gaps.append({"network": n, "layer": lp.name, "op": lp.op, "tso_cycles": lp.cost.latency_cycles,
                         "exhaustive_cycles": general.cost.latency_cycles,
                         "tso_over_exhaustive": lp.cost.latency_cycles / general.cost.latency_cycles})
    res.table("beyond_tso_vs_exhaustive", gaps)
    worse = [g for g in gaps if g["tso_over_exhaustive"] < 1 - 1e-9]
    res.note(f"TSO against the general exhaustive optimum ({len(gaps)} layers): TSO's space leaves up to "
             f"{max(g['tso_over_exhaustive'] for g in gaps):.2f}x on the table (median "
             f"{sorted(g['tso_over_exhaustive'] for g in gaps)[len(gaps) // 2]:.2f}x); the general optimum is "
             + ("never worse." if not worse else f"WORSE on {len(worse)} layers (a bug)."))
    labels = [f"{g['network']}:{g['layer']}" for g in gaps]
    res.figure("beyond_tso_vs_exhaustive", lambda: plots.grouped_bars(
        labels, {"TSO / exhaustive": [g["tso_over_exhaustive"] for g in gaps]},
        title="Ours only: TSO's time over the general exhaustive optimum, per layer", ylabel="x", reference=1.0))
