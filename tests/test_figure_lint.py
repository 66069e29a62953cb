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


def test_a_saved_figure_is_checked_without_drawing_it_again() -> None:
    """``drawn=True`` (conftest's check of every figure a test saves) reads the layout ``save`` left: it
    finds exactly what a fresh render finds, on bad figures and on good ones."""
    def figures():  # type: ignore[no-untyped-def]
        long = plots.grouped_bars(["a", "b"], {"x": [1, 2]}, title="short", ylabel="DRAM (kB)")
        long.axes[0].set_title("t" * 200)
        return [plots.grouped_bars(["a", "b"], {"x": [1, 2]}, title="t", ylabel="kB / %"), long,
                plots.grouped_bars(["a", "b"], {"x": [1, 2]}, title="ok", ylabel=""),
                plots.grouped_bars(["a", "b"], {"x": [1e3, 2e6]}, title="log", ylabel="bytes", log=True),
                plots.bar_panels(["2", "3"], [("storage (kB)", {"s": [1.0, 2.0]}), ("saving (%)", {"p": [5.0, 6.0]})],
                                 title="Fig. 12: least storage", xlabel="layers fused"), covered()]

    def covered():  # type: ignore[no-untyped-def]
        from matplotlib.figure import Figure

        fig = Figure()
        ax = fig.add_subplot()
        ax.bar([0, 1, 2], [10.0, 10.0, 10.0], label="HW3")
        ax.set_ylabel("energy (uJ)")
        ax.set_title("t")
        ax.legend(loc="upper center")
        return fig

    fresh = [plots.figure_problems(fig) for fig in figures()]
    assert [bool(p) for p in fresh] == [True, True, True, False, False, True]
    after_png, after_svg = [], []
    for fig in figures():  # what plots.save renders (conftest checks what it saves: these fail it)
        assert plots.figure_bytes(fig, "png")  # all a ``png_figures`` module's save renders (conftest)
        after_png.append(plots.figure_problems(fig, drawn=True))
        assert plots.figure_bytes(fig, "svg")
        after_svg.append(plots.figure_problems(fig, drawn=True))
    assert after_png == fresh and after_svg == fresh


def test_a_legend_over_a_bar_is_flagged_and_bar_panels_leave_it_room() -> None:
    """Fig. 19's energy panel: bars of equal height up to the top, where ``loc="best"`` put the legend."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.bar([0, 1, 2], [10.0, 10.0, 10.0], label="HW3")
    ax.bar([0.4, 1.4, 2.4], [10.0, 10.0, 10.0], label="HW4")
    ax.set_ylabel("energy (uJ)")
    ax.set_title("t")
    ax.legend(loc="upper center")
    problems = plots.figure_problems(fig)
    assert len(problems) == 1 and problems[0].startswith("axes 0: the legend covers "), problems
    plt.close(fig)
    for log, series in ((False, 5), (True, 2)):  # three rows of legend on a linear axis; one on a log axis
        panels = [("energy (uJ)", {f"HW{j}": [10.0, 10.0, 10.0, 9.9] for j in range(series)}),
                  ("latency (Mcycles)", {f"HW{j}": [37.2, 20.6, 30.0, 5.0] for j in range(series)})]
        fig = plots.bar_panels(["vgg", "resnet", "yolo", "mobile"], panels, title="Fig. 19", log=log)
        assert plots.figure_problems(fig) == [], (log, series)
