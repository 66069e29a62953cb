"""The HTML report's page without a browser: self-contained, unique ids, one row per layer."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from tileplan import api
from tileplan.report.html import build_report, inline_svg, plan_warnings


def test_page_is_self_contained_with_unique_ids() -> None:
    arch = api.load_arch("eyeriss", ["memories.L2.size_bytes=4KiB"])
    network = api.load_network("lenet5")
    plan = api.plan(network, arch, jobs=1)
    page = build_report(plan, arch, network, groups=[("conv1", "pool1")], warnings=["from the importer"],
                        overrides=["memories.L2.size_bytes=4KiB"])
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing to fetch
    assert "<?xml" not in page and page.count("<svg") == 4
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)) and len(ids) > 20
    for ref in re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', page):
        assert (ref[0] or ref[1]) in ids
    assert len(re.findall(r"<tr data-layer=", page)) == len(plan.layers)
    assert "conv1 + pool1" in page and "from the importer" in page and "memories.L2.size_bytes=4KiB" in page
    for warning in plan_warnings(plan):
        assert warning.replace("'", "&#x27;") in page


def test_inline_svg_prefixes_ids_and_drops_the_height() -> None:
    svg = ('<?xml version="1.0"?>\n<svg width="10pt" height="5pt" viewBox="0 0 10 5"><defs><clipPath id="p1">'
           '</clipPath></defs><g clip-path="url(#p1)"><use xlink:href="#p1"/></g></svg>')
    out = inline_svg(svg, "f")
    assert out == ('<svg width="10pt" class="figure" viewBox="0 0 10 5"><defs><clipPath id="f-p1"></clipPath>'
                   '</defs><g clip-path="url(#f-p1)"><use xlink:href="#f-p1"/></g></svg>')


def test_report_cli_errors_before_planning(tmp_path: Path) -> None:
    from tileplan.cli import app

    result = CliRunner().invoke(app, ["report", "lenet5", "-o", str(tmp_path / "no" / "r.html")])
    assert result.exit_code == 2 and "folder" in result.output and "does not exist" in result.output
    result = CliRunner().invoke(app, ["report", "lenet5", "-o", str(tmp_path / "r.html"), "--set", "dram=3"])
    assert result.exit_code == 2 and result.output.startswith("error: --set dram=3")
    assert list(tmp_path.iterdir()) == []


def test_fused_report_lists_groups_with_their_savings(tmp_path: Path) -> None:
    """``report --fuse``: a table row per fused group with its fused and unfused DRAM bytes; the summary's
    DRAM card is the fused plan's total."""
    from tileplan.cli import app

    arch = api.load_arch("eyeriss")
    network = api.load_network("lenet5")
    fused = api.plan_fused(network, arch, jobs=1, max_group=3)
    assert fused.groups
    page = build_report(fused.base, arch, network, fused_plan=fused)
    table = page.split('<table id="groups">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == len(fused.groups) + 1  # heading + one per group
    for g in fused.groups:
        assert g.name in table and f"{g.cost.dram_bytes / 1e3:,.1f}" in table and f"{g.saving:.1%}" in table
    assert f"<b>{fused.dram_bytes / 1e6:,.3f} MB</b><span>DRAM traffic with fusion</span>" in page
    assert len(re.findall(r"<tr data-layer=", page)) == len(fused.base.layers)
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", "lenet5", "--arch", "eyeriss", "--fuse", "--max-group", "3",
                                      "-j", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"{len(fused.groups)} fused groups" in result.output and '<table id="groups">' in out.read_text()
