"""``tileplan report``: one self-contained HTML page per plan.

The page needs nothing from outside: figures are inline SVG, the table sorts with a few lines of inline
JavaScript, and a Content-Security-Policy forbids every network request. Sections: summary, machine,
per-layer table (click a heading to sort), figures, fusion groups, gap to the lower bounds, warnings.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tileplan.arch.spec import Arch
from tileplan.plan import LayerPlan, NetworkPlan
from tileplan.report import plots
from tileplan.report.plan_plots import plan_figures
from tileplan.report.tables import arch_facts, order_str, split_str, tiles_str
from tileplan.workload.network import Network

if TYPE_CHECKING:
    from tileplan.fusion.plan import FusionPlan

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:0 1.2em 3em;color:#1d2430}
h1{font-size:1.5em;margin:1em 0 .2em}h2{font-size:1.15em;margin:1.8em 0 .5em;border-bottom:1px solid #d8dde6}
.sub{color:#5a6472;margin:0 0 1em}.cards{display:flex;flex-wrap:wrap;gap:.8em}
.card{border:1px solid #d8dde6;border-radius:6px;padding:.5em .9em;min-width:9em}
.card b{display:block;font-size:1.25em}.card span{color:#5a6472;font-size:.85em}
table{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums}
th,td{padding:.22em .55em;border-bottom:1px solid #e6e9ef;text-align:right;white-space:nowrap}
th{background:#f3f5f8;position:sticky;top:0}td.t,th.t{text-align:left}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
tfoot td{font-weight:600;border-top:2px solid #b9c0cc}tr.reused td{color:#6b7480}
.wrap{overflow-x:auto}svg.figure{max-width:100%;height:auto;display:block;margin:.6em 0 1.4em}
ul.warn li{margin:.2em 0}.ok{color:#207a3c}
"""

# Sorting: numbers by data-value, text otherwise; ties keep the previous order (stable).
_JS = """
(function () {
  function sortBy(table, col, th) {
    var asc = th.getAttribute('aria-sort') !== 'ascending';
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
    var numeric = th.getAttribute('data-type') === 'number';
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (r, i) { return [r, i]; });
    function key(r) {
      var c = r.cells[col], v = c.getAttribute('data-value');
      return numeric ? parseFloat(v === null ? c.textContent : v) : c.textContent.toLowerCase();
    }
    rows.sort(function (a, b) {
      var x = key(a[0]), y = key(b[0]);
      var d = x < y ? -1 : (x > y ? 1 : 0);
      return (asc ? d : -d) || a[1] - b[1];
    });
    rows.forEach(function (p) { body.appendChild(p[0]); });
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.tabIndex = 0;
      th.addEventListener('click', function () { sortBy(table, col, th); });
      th.addEventListener('keydown', function (e) {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortBy(table, col, th); }
      });
    });
  });
})();
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


@dataclass(frozen=True)
class Column:
    """A table column: heading, whether it sorts as a number, and the cell (text, sort value)."""

    heading: str
    numeric: bool


COLUMNS = (Column("#", True), Column("layer", False), Column("op", False), Column("shape", False),
           Column("tiles", False), Column("order", False), Column("split", False), Column("in KB", True),
           Column("wt KB", True), Column("out KB", True), Column("bursts", True), Column("cycles", True),
           Column("util", True), Column("bound", False), Column("energy uJ", True), Column("xcomp", True),
           Column("xIO", True))


def _cells(i: int, lp: LayerPlan, network: Network) -> list[tuple[str, float | None]]:
    c, m = lp.cost, lp.mapping
    dims = network[lp.name].dims
    name = lp.name + (f" (= {lp.cached_from})" if lp.cached_from else "")
    return [(str(i + 1), i + 1), (name, None), (lp.op, None), (lp.shape, None),
            (tiles_str(m, dims) if m else "(in place)", None), (order_str(m, dims) if m else "-", None),
            (split_str(m) if m else "-", None),
            (f"{c.dram_input_bytes / 1024:,.1f}", c.dram_input_bytes),
            (f"{c.dram_weight_bytes / 1024:,.1f}", c.dram_weight_bytes),
            (f"{c.dram_output_bytes / 1024:,.1f}", c.dram_output_bytes), (f"{c.bursts:,.0f}", c.bursts),
            (f"{c.latency_cycles:,.0f}", c.latency_cycles), (f"{c.utilization:.0%}", c.utilization),
            (c.bound if m else "-", None), (f"{c.energy_pj / 1e6:,.2f}", c.energy_pj),
            (f"{lp.gap_compulsory:.2f}", lp.gap_compulsory), (f"{lp.gap_io_bound:.2f}", lp.gap_io_bound)]


def layer_table(plan: NetworkPlan, network: Network) -> str:
    """The sortable per-layer table (one body row per layer, in network order) with totals below."""
    e = html.escape
    head = "".join(f'<th class="{"" if col.numeric else "t"}" data-type="{"number" if col.numeric else "text"}">'
                   f"{e(col.heading)}</th>" for col in COLUMNS)
    rows = []
    for i, lp in enumerate(plan.layers):
        tds = "".join(f'<td data-value="{v!r}">{e(t)}</td>' if v is not None else f'<td class="t">{e(t)}</td>'
                      for t, v in _cells(i, lp, network))
        cls = ' class="reused"' if lp.cached_from else ""
        rows.append(f'<tr data-layer="{e(lp.name)}"{cls}>{tds}</tr>')
    comp = sum(lp.compulsory_bytes for lp in plan.layers)
    io = sum(lp.io_bound_bytes for lp in plan.layers)
    foot = ["", "total", f"{len(plan.layers)} layers", "", "", "", "",
            f"{plan.total('dram_input_bytes') / 1024:,.1f}", f"{plan.total('dram_weight_bytes') / 1024:,.1f}",
            f"{plan.total('dram_output_bytes') / 1024:,.1f}", f"{plan.total('bursts'):,.0f}",
            f"{plan.latency_cycles:,.0f}", "", "", f"{plan.energy_pj / 1e6:,.2f}",
            f"{plan.dram_bytes / comp:.2f}" if comp else "", f"{plan.dram_bytes / io:.2f}" if io else ""]
    tfoot = "".join(f"<td>{e(t)}</td>" for t in foot)
    return (f'<div class="wrap"><table class="sortable" id="layers"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody><tfoot><tr>{tfoot}</tr></tfoot></table></div>')


def inline_svg(svg: str, prefix: str) -> str:
    """An SVG document made fit to sit in HTML: no XML prolog, ids prefixed (several figures on one page
    must not share ids), and no wider than the page (it keeps its width in points and its aspect)."""
    start = svg.find("<svg")
    body = svg[start:]
    body = re.sub(r'(\bid="|url\(#|href="#)([^")]+)', lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", body)
    return re.sub(r'<svg([^>]*?)\sheight="[^"]*"', r'<svg\1 class="figure"', body, count=1)


def plan_warnings(plan: NetworkPlan) -> list[str]:
    """What a reader should look at: layers far above the communication lower bound, memory-bound
    layers, and poorly used PE arrays."""
    out = []
    moving = [lp for lp in plan.layers if lp.mapping is not None and lp.cached_from is None]
    far = [lp for lp in moving if lp.gap_io_bound > 2.0]
    if far:
        worst = max(far, key=lambda lp: lp.gap_io_bound)
        out.append(f"{len(far)} searched layer(s) move over twice the communication lower bound "
                   f"(worst: {worst.name}, {worst.gap_io_bound:.2f}x)")
    mem = [lp.name for lp in moving if not lp.cost.compute_bound]
    if mem:
        out.append(f"{len(mem)} searched layer(s) are memory-bound: {', '.join(mem[:8])}"
                   + (" ..." if len(mem) > 8 else ""))
    low = [lp for lp in moving if lp.cost.macs > 0 and lp.cost.utilization < 0.5]
    if low:
        out.append(f"{len(low)} searched layer(s) use under half of the PE array "
                   f"(lowest: {min(low, key=lambda lp: lp.cost.utilization).name}, "
                   f"{min(lp.cost.utilization for lp in low):.0%})")
    return out


def _section(title: str, body: str, ident: str) -> str:
    return f'<section id="{ident}"><h2>{html.escape(title)}</h2>{body}</section>'


def fusion_section(fused: FusionPlan) -> str:
    """The fused groups of a ``plan --fuse`` result: one table row per group with its overlap handling,
    tile, DRAM bytes fused and unfused, saving, latency and reuse-buffer bytes; then the totals."""
    e = html.escape
    base = fused.base
    if not fused.groups:
        return ("<p>Fusion was searched but no group beats its layers planned one by one under the "
                f"{e(base.objective)} objective, so every layer reads its inputs from DRAM.</p>")
    head = "".join(f"<th>{e(h)}</th>" for h in ("group", "overlaps", "tile N x P x Q x K", "DRAM KB fused",
                                                 "DRAM KB unfused", "saving", "cycles fused", "cycles unfused",
                                                 "reuse KB"))
    rows = "".join(
        "<tr>" + f'<td class="t">{e(g.name)}</td><td class="t">{e(g.mapping.overlap.value)}</td>'
        + f'<td class="t">{g.mapping.tile_n} x {g.mapping.tile_p} x {g.mapping.tile_q} x {g.mapping.tile_k}</td>'
        + "".join(f"<td>{v}</td>" for v in (f"{g.cost.dram_bytes / 1e3:,.1f}", f"{g.unfused.dram_bytes / 1e3:,.1f}",
                                           f"{g.saving:.1%}", f"{g.cost.latency_cycles:,.0f}",
                                           f"{g.unfused.latency_cycles:,.0f}", f"{g.reuse_bytes / 1e3:,.1f}"))
        + "</tr>" for g in fused.groups)
    saving = 1 - fused.dram_bytes / base.dram_bytes if base.dram_bytes else 0.0
    total = (f"<p>With fusion: latency {fused.latency_cycles:,.0f} cycles, DRAM {fused.dram_bytes / 1e6:,.3f} MB, "
             f"energy {fused.energy_pj / 1e6:,.2f} uJ. Unfused: latency {base.latency_cycles:,.0f} cycles, DRAM "
             f"{base.dram_bytes / 1e6:,.3f} MB, energy {base.energy_pj / 1e6:,.2f} uJ (DRAM saving {saving:.1%}). "
             "The per-layer table above is the unfused plan.</p>")
    return f'<table id="groups"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{total}'


def render_report(plan: NetworkPlan, arch: Arch, network: Network, *, figures: Mapping[str, str],
                  groups: Sequence[Sequence[str]] = (), warnings: Sequence[str] = (),
                  overrides: Sequence[str] = (), fused_plan: FusionPlan | None = None) -> str:
    """The page as one string. ``figures`` maps a name to an SVG document; ``warnings`` come on top of
    :func:`plan_warnings`; ``overrides`` are the ``--set`` items the machine was changed by;
    ``fused_plan`` (``report --fuse``) adds the fused totals to the summary and a table of its groups."""
    e = html.escape
    comp = sum(lp.compulsory_bytes for lp in plan.layers)
    io = sum(lp.io_bound_bytes for lp in plan.layers)
    cards = [(f"{plan.latency_s * 1e3:,.3f} ms", f"{plan.latency_cycles:,.0f} cycles"),
             (f"{plan.dram_bytes / 1e6:,.3f} MB", "DRAM traffic"), (f"{plan.total('bursts'):,.0f}", "DRAM bursts"),
             (f"{plan.energy_pj / 1e6:,.2f} uJ", "energy"),
             (f"{plan.searched_layers} / {len(plan.layers)}", "layers searched / all"),
             (f"{plan.dram_bytes / io:.2f}x" if io else "-", "DRAM over the lower bound")]
    if fused_plan is not None:
        cards[:2] = [(f"{fused_plan.latency_cycles / plan.clock_hz * 1e3:,.3f} ms",
                      f"{fused_plan.latency_cycles:,.0f} cycles with fusion"),
                     (f"{fused_plan.dram_bytes / 1e6:,.3f} MB", "DRAM traffic with fusion"),
                     (f"{plan.dram_bytes / 1e6:,.3f} MB", "DRAM traffic unfused")]
    summary = '<div class="cards">' + "".join(f"<div class=\"card\"><b>{e(a)}</b><span>{e(b)}</span></div>"
                                              for a, b in cards) + "</div>"
    machine = "".join(f'<tr><td class="t">{e(k)}</td><td class="t">{e(v)}</td></tr>' for k, v in arch_facts(arch))
    if overrides:
        machine += f'<tr><td class="t">changed by --set</td><td class="t">{e(", ".join(overrides))}</td></tr>'
    figs = "".join(f"<figure>{inline_svg(svg, f'fig-{name}')}</figure>" for name, svg in figures.items())
    fused = [g for g in groups if len(g) > 1]
    if fused_plan is not None:
        fusion = fusion_section(fused_plan)
    elif fused:
        fusion = "<ol>" + "".join(f"<li>{e(' + '.join(g))}</li>" for g in fused) + "</ol>"
    else:
        fusion = ("<p>No layers are fused: every layer reads its inputs from DRAM and writes its output back "
                  "(the layer graph above shows each layer as its own group).</p>")
    gaps = sorted((lp for lp in plan.layers if lp.io_bound_bytes), key=lambda lp: -lp.gap_io_bound)[:5]
    bounds = (f"<p>DRAM traffic {plan.dram_bytes / 1e6:,.3f} MB; compulsory traffic (every operand once) "
              f"{comp / 1e6:,.3f} MB ({plan.dram_bytes / comp:.2f}x); communication lower bound for the "
              f"on-chip memory {io / 1e6:,.3f} MB ({plan.dram_bytes / io:.2f}x).</p>" if comp and io else "")
    bounds += "<p>Furthest from the lower bound:</p><ul>" + "".join(
        f"<li>{e(lp.name)}: {lp.gap_io_bound:.2f}x the bound, {lp.gap_compulsory:.2f}x compulsory</li>"
        for lp in gaps) + "</ul>"
    notes = [*warnings, *plan_warnings(plan)]
    warn = ('<ul class="warn">' + "".join(f"<li>{e(w)}</li>" for w in notes) + "</ul>" if notes
            else '<p class="ok">No warnings.</p>')
    title = f"{plan.network} on {plan.arch}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tileplan: {e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<p class="sub">{e(plan.strategy)} search, objective {e(plan.objective)}, batch '
        f'{e(str(plan.meta.get("batch", 1)))}, {e(str(plan.meta.get("precision_bytes", "")))}-byte data</p>',
        _section("Summary", summary, "summary"),
        _section("Machine", f"<table>{machine}</table>", "machine"),
        _section("Layers", layer_table(plan, network), "layers-section"),
        _section("Figures", figs, "figures"),
        _section("Fusion groups", fusion, "fusion"),
        _section("Gap to the lower bounds", bounds, "bounds"),
        _section("Warnings", warn, "warnings"),
        f"<script>{_JS}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


def build_report(plan: NetworkPlan, arch: Arch, network: Network, *, groups: Sequence[Sequence[str]] = (),
                 warnings: Sequence[str] = (), overrides: Sequence[str] = (),
                 fused_plan: FusionPlan | None = None) -> str:
    """Draw the plan's figures (:mod:`tileplan.report.plan_plots`) and render the page. With
    ``fused_plan`` the plan is its unfused base and the groups are drawn over the layer graph."""
    if fused_plan is not None:
        plan = fused_plan.base
        groups = [g.layers for g in fused_plan.groups]
    figures = {name: plots.svg_text(fig) for name, fig in plan_figures(plan, arch, network, groups).items()}
    return render_report(plan, arch, network, figures=figures, groups=groups, warnings=warnings,
                         overrides=overrides, fused_plan=fused_plan)
