"""Terminal table for plans with fusion groups."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from tileplan.fusion.block import group_of
from tileplan.fusion.plan import FusionPlan, ctc_ratio
from tileplan.report.tables import kb, si
from tileplan.workload.network import Network


def fusion_table(plan: FusionPlan, network: Network) -> Table:
    """One row per fused group and per single layer (network order), with DRAM bytes against the best
    unfused plan of the same layers, and totals."""
    base = plan.base
    table = Table(title=escape(f"{base.network} on {base.arch} with fusion (groups of up to {plan.max_group} "
                               f"conv/pool layers), objective {base.objective}"), show_footer=True, header_style="bold")
    ctc = dict(plan.ctc())
    cols = ["segment", "fused mapping", "in KB", "wt KB", "out KB", "DRAM KB", "unfused KB", "saving", "cycles",
            "space"] + (["CTC"] if ctc else [])
    for c in cols:
        table.add_column(c, justify="left" if c in ("segment", "fused mapping") else "right")
    by_name = {lp.name: lp for lp in base.layers}
    for name, cost in plan.segments():
        group = next((g for g in plan.groups if g.name == name), None)
        if group is None:
            lp = by_name[name]
            table.add_row(name + (" *" if lp.cached_from else ""), "-", kb(cost.dram_input_bytes),
                          kb(cost.dram_weight_bytes), kb(cost.dram_output_bytes), kb(cost.dram_bytes),
                          kb(cost.dram_bytes), "", si(cost.latency_cycles), "",
                          *([f"{ctc[name]:.2f}"] if ctc else []))
            continue
        described = group.mapping.describe(group_of(network, group.layers)) + (
            f", {group.partition['describe']}" if group.partition else "")
        table.add_row(name + (" *" if group.cached_from else ""), described, kb(cost.dram_input_bytes),
                      kb(cost.dram_weight_bytes), kb(cost.dram_output_bytes), kb(cost.dram_bytes),
                      kb(group.unfused.dram_bytes), f"{group.saving:.0%}", si(cost.latency_cycles),
                      si(group.space_size), *([f"{ctc[name]:.2f}"] if ctc else []))
    saving = 1 - plan.dram_bytes / base.dram_bytes if base.dram_bytes else 0.0
    total_ctc = ctc_ratio(sum(c.macs for _, c in plan.segments()), plan.total("bursts"),
                          int(plan.meta.get("dram_burst_bytes", 0)))
    footer = ["total", f"{len(plan.groups)} groups, {len(plan.segments())} segments", "", "", "",
              kb(plan.dram_bytes), kb(base.dram_bytes), f"{saving:.0%}", si(plan.latency_cycles), ""] + (
                  [f"{total_ctc:.2f}"]
                  if ctc else [])
    for col, text in zip(table.columns, footer, strict=True):
        col.footer = text
    return table
