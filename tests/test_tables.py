"""Plan tables fit a 120-column terminal, keep one row per layer when piped, and say what bounds a
layer; numbers print in one unit per table, integers as integers."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from tileplan import api
from tileplan.plan import NetworkPlan
from tileplan.report.tables import byte_unit, human, number, plan_summary, plan_table, plural, scaled, short_shape, si

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def resnet50_eyeriss() -> NetworkPlan:
    """`tileplan plan resnet50 --arch eyeriss --json` (stored: the search takes a while)."""
    return NetworkPlan.from_json((FIXTURES / "resnet50_eyeriss_plan.json").read_text())


def render(plan: NetworkPlan, width: int, **options: bool) -> list[str]:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(plan_table(plan, api.load_network(plan.network), **options))
    console.print(plan_summary(plan))
    return console.export_text().splitlines()


def test_resnet50_on_eyeriss_fits_120_columns(resnet50_eyeriss: NetworkPlan) -> None:
    lines = render(resnet50_eyeriss, 120)
    assert max(len(line.rstrip()) for line in lines) <= 120
    text = "\n".join(lines)
    assert "…" not in text  # nothing cut off
    shown = [lp for lp in resnet50_eyeriss.layers if not lp.cached_from]
    rows = [line for line in lines if line.split() and line.split()[0] in {lp.name for lp in shown}]
    assert len(rows) == len(shown)  # one line per layer: nothing had to fold at 120 columns
    total = next(line for line in lines if line.lstrip().startswith("total"))
    mib = 2**20
    for attr in ("dram_input_bytes", "dram_weight_bytes", "dram_output_bytes"):
        assert f" {resnet50_eyeriss.total(attr) / mib:.1f} " in total  # 26.0, 26.7, 18.2 MiB
    assert "72 layers" in total and "1.63M" in total and "26.6M" in total


def test_narrow_terminals_fold_text_never_numbers(resnet50_eyeriss: NetworkPlan) -> None:
    lines = render(resnet50_eyeriss, 90)
    assert max(len(line.rstrip()) for line in lines) <= 90
    total = next(line for line in lines if line.lstrip().startswith("total"))
    assert "26.0" in total and "26.6M" in total and "…" not in "\n".join(lines)


def test_piped_output_keeps_one_row_per_layer(resnet50_eyeriss: NetworkPlan) -> None:
    lines = render(resnet50_eyeriss, 200, show_cached=True)
    names = {lp.name for lp in resnet50_eyeriss.layers}
    rows = [line for line in lines if line.split() and line.split()[0] in names]
    assert len(rows) == len(resnet50_eyeriss.layers) == 72


def test_bound_is_the_largest_of_compute_noc_and_dram(resnet50_eyeriss: NetworkPlan) -> None:
    by_name = {lp.name: lp for lp in resnet50_eyeriss.layers}
    pool1 = by_name["pool1"].cost  # compute 83.6k cycles, but the NoC takes 7x longer
    assert pool1.compute_cycles < pool1.noc_cycles and pool1.bound == "NoC"
    assert by_name["res2a_add"].cost.bound == "DRAM"
    assert by_name["res2a_conv2"].cost.bound == "compute"
    # Eyeriss overlaps transfers with compute: a layer's latency is the time of what bounds it.
    cycles = {"compute": "compute_cycles", "NoC": "noc_cycles", "DRAM": "dram_cycles"}
    for lp in resnet50_eyeriss.layers:
        if lp.mapping is not None:
            assert lp.cost.latency_cycles == pytest.approx(getattr(lp.cost, cycles[lp.cost.bound]))


def test_small_networks_use_kib_and_the_summary_adapts_its_units() -> None:
    plan = api.plan("lenet5", "eyeriss", jobs=1)
    lines = render(plan, 120)
    header = next(line for line in lines if "layer" in line and "bursts" in line)
    assert "in KiB" in header and "MiB" not in header
    summary = "\n".join(lines[-2:])
    assert "0.000" not in summary and " KiB" in summary and ("us" in summary or "ms" in summary)
    assert "7 layers" in summary


def test_number_formats() -> None:
    assert si(41) == "41" and si(34_260) == "34.3k" and si(752_640) == "753k" and si(26_596_859) == "26.6M"
    assert si(999_999) == "1M" and si(1_630_000_000) == "1.63G"
    assert plural(1, "layer") == "1 layer" and plural(72, "layer") == "72 layers"
    assert byte_unit(5 * 2**20) == ("KiB", 1024.0) and byte_unit(70 * 2**20) == ("MiB", 2.0**20)
    assert scaled(0, 1024) == "0" and scaled(9.2 * 1024, 2**20) == "0.009" and scaled(26_581 * 1024, 2**20) == "26.0"
    assert scaled(181.4 * 1024, 1024) == "181" and scaled(21.8 * 1024, 1024) == "21.8"
    assert human(0.132984, "s") == "133 ms" and human(6.759e-3, "J") == "6.76 mJ" and human(0, "J") == "0 J"
    assert number(12544.0) == "12,544" and number(47530.666) == "47,530.67" and number(True) == "true"


def test_short_shapes() -> None:
    net = api.load_network("resnet50")
    assert short_shape(net["conv1"]) == "3x224x224→64x112x112 7x7/2"
    assert short_shape(net["fc"]) == "2048→1000"
    assert short_shape(net["res2a_add"]) == "256x56x56 add"
    assert short_shape(api.load_network("resnext50")["res2a_conv2"]).endswith(" g32")
