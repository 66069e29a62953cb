"""Terminal tables and CSV for plans, accelerators and networks (rich)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping as MappingABC
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

from rich import box
from rich.markup import escape
from rich.table import Table

from tileplan.arch.spec import Arch
from tileplan.dims import DIMS, Dim
from tileplan.files import csv_row
from tileplan.mapping import Mapping, balanced_parts
from tileplan.plan import LayerPlan, NetworkPlan, ctc_ratio
from tileplan.workload.layer import Layer, OpKind
from tileplan.workload.network import Network

if TYPE_CHECKING:
    from tileplan.compare import Comparison


def kb(x: float) -> str:
    return f"{x / 1024:,.1f}"


def si(x: float) -> str:
    """A count with an SI suffix and three significant digits: ``41``, ``34.3k``, ``753k``, ``26.6M``."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale * 0.9995:
            v = x / scale
            return f"{v:.3g}{unit}" if abs(v) < 1000 else f"{v:,.0f}{unit}"
    return f"{x:.0f}"


def number(value: float | int) -> str:
    """A value of a cost breakdown: whole numbers (bytes, bursts, most cycle counts) as integers with
    thousands separators, others with two decimals: ``12,544``, ``47,530.67``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


def plural(n: int, word: str) -> str:
    """``1 layer``, ``72 layers``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def byte_unit(largest: float) -> tuple[str, float]:
    """One binary unit for every byte count of a table, chosen by its largest entry (KiB below 10 MiB)."""
    return ("MiB", 2.0**20) if largest >= 10 * 2**20 else ("KiB", 1024.0)


def scaled(x: float, scale: float) -> str:
    """``x / scale`` with three significant digits, never ``0.000`` for a non-zero value."""
    v = x / scale
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.1f}" if abs(v) >= 10 else (f"{v:.2f}" if abs(v) >= 0.01 else f"{v:.1g}")


def human(x: float, unit: str) -> str:
    """A quantity with a decimal SI prefix chosen for it: ``human(0.133, "s")`` -> ``133 ms``."""
    if x == 0:
        return f"0 {unit}"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0), ("m", 1e-3), ("u", 1e-6),
                          ("n", 1e-9), ("p", 1e-12)):
        if abs(x) >= scale * 0.9995:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def tiles_str(mapping: Mapping, dims: dict[Dim, int]) -> str:
    """Tile sizes of the dimensions larger than 1, e.g. ``K64 C9 P12 Q56 R3 S3``."""
    return " ".join(f"{d.name}{mapping.tiles[d]}" for d in DIMS if dims[d] > 1) or "-"


def _live(mapping: Mapping, dims: dict[Dim, int]) -> list[Dim]:
    """Dimensions whose tile loop runs more than once on some core, outermost first."""
    live = []
    for d in mapping.order:
        longest = max(length for _, length in _slices(dims[d], mapping.cluster_split[d], mapping.core_split[d]))
        if -(-longest // mapping.tiles[d]) > 1:
            live.append(d)
    return live


def order_str(mapping: Mapping, dims: dict[Dim, int]) -> str:
    """Tile loops with more than one trip, outermost first (``-`` when everything fits at once)."""
    return "".join(d.name for d in _live(mapping, dims)) or "-"


def loops_str(mapping: Mapping, dims: dict[Dim, int]) -> str:
    """The tile loops that iterate, outermost first, with their steps, e.g. ``P14 C3``: every other
    dimension is on chip whole (per core). ``-`` when the whole layer fits at once."""
    return " ".join(f"{d.name}{mapping.tiles[d]}" for d in _live(mapping, dims)) or "-"


def short_shape(layer: Layer) -> str:
    """Input -> output as channels x height x width, then the window and stride, e.g.
    ``3x224x224→64x112x112 7x7/2`` (a 1x1 map is just its channels: ``2048→1000``)."""

    def chw(c: int, h: int, w: int) -> str:
        return f"{c}" if h == w == 1 else f"{c}x{h}x{w}"

    src, dst = chw(layer.c_in, layer.h, layer.w), chw(layer.k_out, layer.p, layer.q)
    if layer.op is OpKind.MATMUL:  # rows x k -> rows x n per group
        g, rows = layer.groups, layer.h
        text = f"{rows}x{layer.c_in // g}·{'act' if layer.b_activation else 'W'}→{rows}x{layer.k_out // g}"
        return text + (f" ×{layer.n}" if layer.n > 1 else "") + (f" g{g}" if g > 1 else "")
    if layer.op in (OpKind.ADD, OpKind.CONCAT, OpKind.DATA_MOVE, OpKind.EMBEDDING) or layer.op.is_elementwise:
        words = {OpKind.CONCAT: "concat", OpKind.DATA_MOVE: "move", OpKind.EMBEDDING: "gather"}
        word = words.get(layer.op, layer.op.value)
        return f"{src} {word}" if src == dst else f"{src}→{dst} {word}"
    text = f"{src}→{dst}"
    if layer.op is not OpKind.FC:
        text += f" {layer.r}x{layer.s}/{layer.stride[0]}"
        if layer.groups > 1 and not layer.op.channelwise:
            text += f" g{layer.groups}"
    return text


def _slices(size: int, clusters: int, cores: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for off, length in balanced_parts(size, clusters):
        out.extend((off + o, ln) for o, ln in balanced_parts(length, cores))
    return out


def split_str(mapping: Mapping) -> str:
    parts = [f"{Dim(d).name}/{f}" for d, f in enumerate(mapping.cluster_split) if f > 1]
    inner = [f"{Dim(d).name}/{f}" for d, f in enumerate(mapping.core_split) if f > 1]
    return " ".join(parts) + (" | " + " ".join(inner) if inner else "") if parts or inner else "1"


def plan_table(plan: NetworkPlan, network: Network, *, show_cached: bool = True) -> Table:
    """Per-layer table with totals. Fits a 120-column terminal: the text columns (layer, shape, tiles)
    fold onto more lines when the terminal is narrow; numbers never do."""
    multicore = any(lp.mapping and lp.mapping.cores_used > 1 for lp in plan.layers)
    tot = {k: plan.total(k) for k in ("dram_input_bytes", "dram_weight_bytes", "dram_output_bytes", "bursts",
                                       "latency_cycles")}
    unit, scale = byte_unit(max(tot["dram_input_bytes"], tot["dram_weight_bytes"], tot["dram_output_bytes"]))
    table = Table(title=escape(f"{plan.network} on {plan.arch} — {plan.strategy} search, objective {plan.objective}"),
                  show_footer=True, header_style="bold", box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False)
    ctc = dict(plan.ctc())
    cols = ["layer", "shape", "tile loops"] + (["split"] if multicore else []) + [
        f"in {unit}", f"wt {unit}", f"out {unit}", "bursts", "cycles", "util", "bound", "xcomp", "xIO"] + \
        (["CTC"] if ctc else [])
    for c in cols:
        wraps = c in ("layer", "shape", "tile loops", "split")
        table.add_column(c, justify="left" if wraps or c == "bound" else "right",
                         no_wrap=not wraps, overflow="fold")
    for lp in plan.layers:
        if not show_cached and lp.cached_from:
            continue
        row = _row(lp, network[lp.name], multicore, scale)
        table.add_row(*row, *([f"{ctc[lp.name]:.1f}" if lp.mapping else ""] if ctc else []))
    comp = sum(lp.compulsory_bytes for lp in plan.layers)
    footer = ["total", plural(len(plan.layers), "layer"), f"{plan.searched_layers} searched"] + \
        ([""] if multicore else []) + [scaled(tot["dram_input_bytes"], scale), scaled(tot["dram_weight_bytes"], scale),
                                       scaled(tot["dram_output_bytes"], scale), si(tot["bursts"]),
                                       si(tot["latency_cycles"]), "", "",
                                       f"{plan.dram_bytes / comp:.2f}" if comp else "", ""]
    if ctc:  # the whole network's ratio: all its MACs over all the bursts
        burst = int(plan.meta["dram_burst_bytes"])
        footer.append(f"{ctc_ratio(plan.total('macs'), tot['bursts'], burst):.1f}")
    for col, text in zip(table.columns, footer, strict=True):
        col.footer = text
    return table


def plan_summary(plan: NetworkPlan) -> str:
    """The line under the plan table: latency, DRAM traffic, energy, and how many layers were searched."""
    cached = len(plan.layers) - plan.searched_layers
    unit, scale = byte_unit(plan.dram_bytes)
    return (f"latency {plan.latency_cycles:,.0f} cycles = {human(plan.latency_s, 's')}, DRAM "
            f"{scaled(plan.dram_bytes, scale)} {unit}, energy {human(plan.energy_pj * 1e-12, 'J')}\n"
            f"{plan.searched_layers} of {plural(len(plan.layers), 'layer')} searched; {cached} reused an identical "
            f"layer's plan (marked *) or move no data")


def _row(lp: LayerPlan, layer: Layer, multicore: bool, scale: float) -> list[str]:
    c = lp.cost
    m = lp.mapping
    name = escape(lp.name + (" *" if lp.cached_from else ""))
    shape = escape(short_shape(layer))
    if m is None and not (c.dram_input_bytes or c.dram_output_bytes):
        return [name, shape, "(in place)"] + (["-"] if multicore else []) + ["0"] * 5 + ["", "", "", ""]
    loops = "(stream)" if m is None else loops_str(m, layer.dims)  # a data move or embedding: one pass
    return [name, shape, loops] + ([split_str(m) if m is not None else "-"] if multicore else []) + [
        scaled(c.dram_input_bytes, scale), scaled(c.dram_weight_bytes, scale), scaled(c.dram_output_bytes, scale),
        si(c.bursts), si(c.latency_cycles), f"{c.utilization:.0%}", c.bound, f"{lp.gap_compulsory:.2f}",
        f"{lp.gap_io_bound:.2f}"]


def plan_csv(plan: NetworkPlan) -> str:
    """One row per layer with every cost field and the mapping in compact form."""
    buf = io.StringIO()
    rows = []
    for lp in plan.layers:
        row = {"layer": lp.name, "op": lp.op, "shape": lp.shape, "cached_from": lp.cached_from or "",
               "compulsory_bytes": lp.compulsory_bytes, "io_bound_bytes": lp.io_bound_bytes,
               "evaluated": lp.evaluated}
        cost = asdict(lp.cost)
        cost["footprint_bytes"] = " ".join(str(x) for x in lp.cost.footprint_bytes)
        row.update(cost)
        row["dram_bytes"] = lp.cost.dram_bytes
        if lp.mapping:
            row["tiles"] = " ".join(f"{d.name}{lp.mapping.tiles[d]}" for d in DIMS)
            row["order"] = lp.mapping.loop_order_str()
            row["split"] = split_str(lp.mapping)
        rows.append(row)
    fieldnames: list[str] = []
    for r in rows:
        fieldnames.extend(k for k in r if k not in fieldnames)
    writer = csv.DictWriter(buf, fieldnames=fieldnames)
    writer.writeheader()
    writer.writerows(csv_row(r) for r in rows)
    return buf.getvalue()


def arch_facts(arch: Arch) -> list[tuple[str, str]]:
    """Key facts of an accelerator as (field, value) text pairs (the terminal table and the HTML report)."""
    p = arch.precision_bytes
    facts = [("clock", f"{arch.clock_hz / 1e6:g} MHz"), ("default precision", f"{p} B"),
             ("cores", f"{arch.cores.clusters} cluster(s) x {arch.cores.cores_per_cluster} core(s)"
              + (", multicast in cluster" if arch.cores.multicast and arch.cores.total > 1 else ""))]
    axes = ", ".join(f"{a.name}={a.lanes(p)} ({a.mode.value}: {','.join(a.dims)})" for a in arch.pe_array.axes)
    facts.append(("PE array / core", axes or "1 MAC"))
    facts.append(("peak", f"{arch.peak_macs_per_cycle(p)} MACs/cycle = "
                  f"{arch.peak_macs_per_cycle(p) * arch.clock_hz / 1e9:g} GMAC/s"))
    for m in arch.memories:
        facts.append((f"memory {m.name}", f"{m.size_bytes / 1024:g} KB for {', '.join(m.operands)}, "
                      f"{m.energy_pj_per_byte:g} pJ/B"))
    d = arch.dram
    facts.append(("DRAM", f"{d.bandwidth_bytes_per_s / 1e9:g} GB/s, {d.burst_bytes} B bursts, "
                  f"{d.burst_latency_ns:g} ns/burst, {d.energy_pj_per_byte:g} pJ/B"))
    facts.append(("overlap / double buffering", f"{arch.overlap} / {arch.double_buffering}"))
    rf = arch.register_file
    facts.append(("register file / PE", f"{rf.weights_bytes}/{rf.inputs_bytes}/{rf.psums_bytes} B (w/in/psum)"))
    if arch.noc.bandwidth_bytes_per_s:
        facts.append(("NoC", f"{arch.noc.bandwidth_bytes_per_s / 1e9:g} GB/s"))
    facts.append(("MAC energy", f"{arch.energy.mac_pj:g} pJ"))
    return facts


def arch_table(arch: Arch) -> Table:
    """Key facts of an accelerator."""
    t = Table(title=escape(f"{arch.name}: {arch.description}"), show_header=False)
    t.add_column("field")
    t.add_column("value")
    for name, value in arch_facts(arch):
        t.add_row(name, value)
    return t


def network_table(network: Network, rows: Sequence[MappingABC[str, object]]) -> Table:
    """``tileplan zoo show``: one row per layer from ``zoo.summary_rows``."""
    t = Table(title=escape(f"{network.name}: {len(network)} layers"), show_footer=True)
    if not rows:
        return t
    keys = list(rows[0].keys())
    for k in keys:
        t.add_column(str(k), justify="right" if isinstance(rows[0][k], int | float) else "left")
    for r in rows:
        t.add_row(*[f"{v:,}" if isinstance(v, int) else str(v) for v in r.values()])
    totals = {k: sum(int(v) for r in rows if isinstance(v := r[k], int))
              for k in keys if isinstance(rows[0][k], int) and k != "groups"}
    for col, k in zip(t.columns, keys, strict=True):
        col.footer = f"{totals[k]:,}" if k in totals else ("total" if k == keys[0] else "")
    return t


def comparison_table(comparison: Comparison, *, show_all: bool = False) -> Table:
    """``tileplan compare``: per layer, one row per strategy, then the network totals; ``x best`` is the
    strategy's objective over the best strategy's on that layer. Layers that move no data are left out
    unless ``show_all``."""
    t = Table(title=escape(f"{comparison.network} on {comparison.arch}: strategies compared, objective "
                           f"{comparison.objective}"), header_style="bold")
    for c in ("layer", "strategy", "cycles", "DRAM KB", "bursts", "energy uJ", "x best"):
        t.add_column(c, justify="left" if c in ("layer", "strategy") else "right")
    k = len(comparison.strategies)
    rows = comparison.rows
    for start in range(0, len(rows), k):
        group = rows[start:start + k]
        if not show_all and not group[0].is_total and all(r.dram_bytes == 0 and r.latency_cycles == 0 for r in group):
            continue
        for j, r in enumerate(group):
            best = r.ratio == 1.0
            t.add_row(r.layer if j == 0 else "", r.strategy, si(r.latency_cycles), kb(r.dram_bytes), si(r.bursts),
                      f"{r.energy_pj / 1e6:,.2f}", f"[green]{r.ratio:.3f}[/]" if best else f"{r.ratio:.3f}",
                      end_section=j == k - 1, style="bold" if r.is_total else None)
    return t
