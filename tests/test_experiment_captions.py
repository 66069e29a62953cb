"""Every figure of every experiment says which paper figure or table it reproduces ("Fig. 8", "Figs.
16-19", "Table 2") or is marked ours only: each experiment runs in --quick mode and every figure is
drawn (conftest's lint checks titles and units of every figure a test saves; this checks captions).

The sweep over all six --quick runs is ``slow`` (about 8 minutes on 2 cores): in the default run the
captions are checked on every result the experiments' own quick tests write (conftest wraps
``write_result``), on TSO's quick result and on the HW-Flow-Fusion parts built in test_hwff_experiment."""

from __future__ import annotations

import pytest

from tileplan import experiments
from tileplan.experiments.common import OURS_ONLY, caption_problem
from tileplan.report import plots


def test_caption_rule() -> None:
    assert caption_problem("a", ["Fig. 8: throughput on eyeriss"]) is None
    assert caption_problem("a", ["Figs. 16-19: scaling"]) is None
    assert caption_problem("a", ["Modelled speedup (Fig. 8.1)"]) is None
    assert caption_problem("a", ["Table 7: resnet18 CTC per pair"]) is None
    assert caption_problem("a", [f"{OURS_ONLY}: TSO over the exhaustive optimum"]) is None
    assert caption_problem("a", ["", "Fig. 4: volumes"]) is None  # an axes title may carry it
    why = caption_problem("fig8_x", ["resnet18: latency (hwff1)"])
    assert why is not None and "fig8_x" in why and OURS_ONLY in why
    assert caption_problem("a", ["Figure-ish 8 things"]) is not None
    assert caption_problem("a", ["ours only: lower-case mark"]) is not None  # the mark is spelled exactly


@pytest.mark.slow
@pytest.mark.parametrize("name", experiments.names())
def test_every_quick_figure_names_its_paper_figure(name: str) -> None:
    res = experiments.run(name, quick=True, jobs=1)
    assert res.figures, f"experiment {name} draws no figure"
    assert res.caption_problems() == []
    for fig_name, draw in res.figures.items():
        assert plots.figure_problems(draw()) == [], fig_name
