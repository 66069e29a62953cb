"""MARVEL's Table 2 and §4.2's uniform dataflow.

Table 2: the range of arithmetic intensities of each layer type of MobileNetV2 and
ResNet50, computed from the zoo networks with the paper's definition (MACs per byte at 1 byte per
value): ingress = MACs / (input activations + filter values), egress = MACs / output activations,
total = MACs / (ingress + 2 x egress traffic). Shape arithmetic only, so --quick computes it whole.

Uniform dataflow (§4.2: "CP-partitioned [is] a best dataflow ... for higher throughput on the platform
1 across all layers"): MARVEL's search with the on-chip fan-out restricted to each pair of dimensions,
per Table 3 layer on ``eyeriss``; the uniform dataflow is the pair with the lowest geometric-mean
latency over the layers. The paper's C is the input channels; a depthwise layer's channels are our G,
so "C" fans out over C or G.
"""

from __future__ import annotations

import math
from typing import Any

from tileplan.arch import load as load_arch
from tileplan.cost.problem import Problem
from tileplan.dims import Dim, Operand
from tileplan.experiments.common import ExperimentResult, Reference
from tileplan.parallel import run_parallel
from tileplan.report import plots
from tileplan.search.marvel import marvel_parts
from tileplan.search.objective import Objective
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network
from tileplan.workload.zoo import get as load_network
from tileplan.workload.zoo.marvel import MARVEL_DIMS, TABLE3

#: The paper's Table 2 rows per network (label, our layer type); the label is the key's middle part.
TABLE2_TYPES: dict[str, tuple[str, ...]] = {
    "mobilenetv2": ("RAdd", "DSCONV", "PWCONV", "SPWCONV", "FC"),
    "resnet50": ("CONV", "SCONV", "RAdd", "PWCONV", "SPWCONV", "FC"),
}
METRICS = ("ingress", "egress", "total")


def layer_type(layer: Layer) -> str | None:
    """Table 2's type of ``layer`` (``None`` for layers the table does not list: pools)."""
    op = layer.op.value
    strided = max(layer.stride) > 1
    if op == "add":
        return "RAdd"
    if op == "fc":
        return "FC"
    if op == "depthwise":
        return "DSCONV"
    if op == "pointwise":
        return "SPWCONV" if strided else "PWCONV"
    if op in ("conv", "grouped_conv"):
        return "SCONV" if strided else "CONV"
    return None


def intensities(layer: Layer) -> dict[str, float]:
    """The paper's three arithmetic intensities of ``layer`` (MACs per byte, 1 byte per value)."""
    ingress = layer.elements(Operand.INPUT) + layer.elements(Operand.WEIGHT)
    egress = layer.elements(Operand.OUTPUT)
    return {"ingress": layer.macs / ingress, "egress": layer.macs / egress,
            "total": layer.macs / (ingress + 2 * egress)}


def ranges(net: Network) -> dict[str, dict[str, tuple[float, float, str, str]]]:
    """Per layer type: per metric (min, max, layer at min, layer at max)."""
    out: dict[str, dict[str, tuple[float, float, str, str]]] = {}
    for x in net.layers:
        t = layer_type(x)
        if t is None:
            continue
        for m, v in intensities(x).items():
            lo, hi, nlo, nhi = out.setdefault(t, {}).get(m, (v, v, x.name, x.name))
            out[t][m] = (min(lo, v), max(hi, v), x.name if v < lo else nlo, x.name if v > hi else nhi)
    return out


def table2(res: ExperimentResult, ref: Reference) -> None:
    rows: list[dict[str, Any]] = []
    for name, types in TABLE2_TYPES.items():
        net = load_network(name)
        layers = {x.name: x for x in net.layers}
        found = ranges(net)
        s3 = [x.name for x in net.layers if layer_type(x) == "SCONV" and x.r == 3]
        v15 = (f"; the zoo's {name} strides in {len(s3)} 3x3 convs ({', '.join(s3)}: ResNet v1.5), the paper's "
               "(v1) in the first 1x1 conv of those blocks, which moves them from SCONV to SPWCONV") if s3 else ""
        for t in types:
            row: dict[str, Any] = {"network": name, "type": t, "layers": sum(layer_type(x) == t for x in net.layers)}
            for m in METRICS:
                lo_p, hi_p = ref.value(f"table2.{name}.{t}.{m}_min"), ref.value(f"table2.{name}.{t}.{m}_max")
                row[f"paper_{m}_min"], row[f"paper_{m}_max"] = lo_p, hi_p
                if t not in found:
                    row[f"{m}_min"] = row[f"{m}_max"] = float("nan")
                    continue
                lo, hi, nlo, nhi = found[t][m]
                row[f"{m}_min"], row[f"{m}_max"] = lo, hi
                for end, ours, at in (("min", lo, nlo), ("max", hi, nhi)):
                    x = layers[at]
                    why = (f"ours at {at} ({x.shape_str()}): {x.macs:,} MACs / "
                           + {"ingress": f"({x.elements(Operand.INPUT):,} input + {x.elements(Operand.WEIGHT):,} "
                                         "weight values)",
                              "egress": f"{x.elements(Operand.OUTPUT):,} output values",
                              "total": "(ingress + 2 x egress values)"}[m]
                           + (f"; the zoo's add reads both summands ({x.input_count} x)" if t == "RAdd" else "")
                           + (f"; the zoo's FC reads {x.c_in:,} pooled values (the paper's egress "
                              f"{ref.value(f'table2.{name}.FC.egress_max'):,.0f} = its FC's inputs)"
                              if t == "FC" else "")
                           + (v15 if t in ("SCONV", "SPWCONV") else ""))
                    res.compare(ref, f"table2.{name}.{t}.{m}_{end}", ours, explanation=why, quick_same=True)
            rows.append(row)
        for t in types:
            if t not in found:
                res.note(f"Table 2 {name} {t}: the zoo's {name} has no such layer (e.g. MobileNetV2 strides in "
                         "its depthwise layers, not in a pointwise one), so the paper's range is not compared.")
    res.table("table2_intensity", rows)
    res.figure("table2_intensity", lambda: _figure(rows))


def _figure(rows: list[dict[str, Any]]) -> Any:
    kept = [r for r in rows if r["total_max"] == r["total_max"]]  # NaN: no such layer in the zoo network
    return plots.grouped_bars([f"{r['network']} {r['type']}" for r in kept],
                              {"paper (max)": [r["paper_total_max"] for r in kept],
                               "ours (max)": [r["total_max"] for r in kept]},
                              title="Table 2: highest total arithmetic intensity per layer type",
                              ylabel="MACs per byte", log=True)


#: The candidate uniform dataflows: pairs of the paper's dimension letters (Fig. 8's KC, QP, QR and
#: §4.2's CP, with the other pairs of K, C, P, Q); quick runs only the four the paper names.
DATAFLOWS = ("CP", "KC", "QP", "QR", "KP", "CQ", "KQ")
QUICK_DATAFLOWS = ("CP", "KC", "QP", "QR")
PLATFORM = "eyeriss"


def fanout_dims(flow: str) -> tuple[Dim, ...]:
    """Our dims a fan-out pair in MARVEL's letters spreads over (``MARVEL_DIMS``: its P is the output
    width, our Q); "C" is the input channels, our G on a depthwise layer."""
    return tuple(d for letter in flow for d in (MARVEL_DIMS[letter],) + ((Dim.G,) if letter == "C" else ()))
def _latency_task(task: tuple[str, str]) -> float:
    """MARVEL's latency-optimal cycles of Table 3 layer ``label`` with the fan-out restricted to ``flow``."""

    label, flow = task
    dims = fanout_dims(flow)
    _off, on = marvel_parts(Problem(next(r for r in TABLE3 if r.label == label).layer(), load_arch(PLATFORM)),
                           Objective.LATENCY, parallel=dims, max_parallel=2)
    return float(on.cost.latency_cycles[0])


def uniform_dataflow(res: ExperimentResult, labels: list[str], jobs: int) -> None:
    flows = QUICK_DATAFLOWS if res.quick else DATAFLOWS
    tasks = [(lab, f) for lab in labels for f in flows]
    cycles: dict[tuple[str, str], float] = {}
    for i, c in run_parallel(_latency_task, tasks, jobs=jobs):
        cycles[tasks[i]] = c
    rows: list[dict[str, Any]] = []
    for lab in labels:
        best = min(cycles[lab, f] for f in flows)
        row: dict[str, Any] = {"layer": lab}
        row.update({f"{f}_cycles": cycles[lab, f] for f in flows})
        row["best"] = "/".join(f for f in flows if cycles[lab, f] == best)
        rows.append(row)
    geo = {f: math.exp(sum(math.log(cycles[lab, f] / min(cycles[lab, g] for g in flows)) for lab in labels)
                       / len(labels)) for f in flows}
    uniform = min(flows, key=lambda f: geo[f])
    res.table("uniform_dataflow_eyeriss", rows)
    wins = sum(uniform in r["best"].split("/") for r in rows)
    res.note(f"Uniform dataflow (§4.2) on {PLATFORM}, {len(labels)} layers, dataflows {', '.join(flows)}: the best "
             f"uniform one is {uniform}-partitioned (geometric-mean latency {geo[uniform]:.2f}x each layer's best "
             f"pair; CP: {geo['CP']:.2f}x); it is the best pair on {wins} of {len(labels)} layers. Per layer: "
             + ", ".join(f"{r['layer']} {r['best']}" for r in rows)
             + (". The paper finds CP best across all layers; " + ("so do we." if uniform == "CP" else
                f"ours prefers {uniform} ({geo['CP'] / geo[uniform]:.2f}x faster than CP on the geometric mean).")
                + " The pairs are in MARVEL's letters, whose P is the output width (our Q) and Q the output height "
                  "(our P): read in our letters, CP would be the C x output-height pair, "
                  + (f"{geo['CQ']:.2f}x here." if "CQ" in geo else "not run in --quick.")))
    res.figure("uniform_dataflow_eyeriss", lambda: plots.grouped_bars(
        labels, {f: [cycles[lab, f] / min(cycles[lab, g] for g in flows) for lab in labels] for f in flows},
        title=f"Ours only (§4.2's claim): latency per fan-out pair on {PLATFORM} (1 = layer's best)",
        ylabel="latency / best pair's (x)", log=True, reference=1.0))


def run(res: ExperimentResult, ref: Reference, labels: list[str], jobs: int) -> None:
    """Table 2 and the uniform-dataflow finding (called from :func:`tileplan.experiments.marvel.run`)."""
    table2(res, ref)
    uniform_dataflow(res, labels, jobs)
