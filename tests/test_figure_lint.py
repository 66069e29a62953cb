"""plots.figure_problems: the readability checks every figure a test writes goes through (conftest)."""

from __future__ import annotations

from tileplan.report import plots


def test_flags_mixed_units_long_titles_and_missing_labels() -> None:
    mixed = plots.grouped_bars(["a", "b"], {"x": [1, 2]}, title="t", ylabel="kB / %")
    assert plots.figure_problems(mixed) == ["axes 0: y label 'kB / %' mixes units on one axis (use two panels)"]
    long = plots.grouped_bars(["a", "b"], {"x": [1, 2]}, title="short", ylabel="DRAM (kB)")
    long.axes[0].set_title("t" * 200)  # plots wrap their titles; one set by hand is not
    assert any("wider than the figure" in p for p in plots.figure_problems(long))
    bare = plots.grouped_bars(["a", "b"], {"x": [1, 2]}, title="ok", ylabel="")
    assert plots.figure_problems(bare) == ["axes 0 has numbers but no y label (say what is plotted, in which unit)"]


def test_panels_keep_one_unit_per_axis() -> None:
    fig = plots.bar_panels(["2", "3"], [("storage (kB)", {"s": [1.0, 2.0]}), ("saving (%)", {"p": [50.0, 60.0]})],
                           title="Fig. 12: least storage", xlabel="layers fused")
    assert plots.figure_problems(fig) == []
    assert [ax.get_ylabel() for ax in fig.axes] == ["storage (kB)", "saving (%)"]


def test_long_titles_are_wrapped_to_fit() -> None:
    fig = plots.grouped_bars(["a"], {"x": [1]}, title="TSO's time over the general exhaustive optimum, per layer "
                             "and per network, with every fixed strategy beside it", ylabel="ratio (x)")
    assert "\n" in fig.axes[0].get_title() and plots.figure_problems(fig) == []
