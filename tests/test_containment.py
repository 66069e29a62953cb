"""The general exhaustive search contains every registered strategy's space: on every layer and preset
a strategy applies to, the exhaustive optimum is never worse than the strategy under the strategy's
own objective (and on the DRAM model it chooses with: TSO-noburst's volume model).

The default run checks a representative subset (fire6_squeeze on ``nmp``, where TSO's hoisted
weights once beat the search, and every strategy at least once); ``-m slow`` checks every distinct
layer of every zoo network on every preset of every strategy (docs/containment.md).
"""

from __future__ import annotations

from functools import cache

import pytest

from tileplan import api
from tileplan.cost.problem import Problem
from tileplan.errors import TileplanError
from tileplan.search import STRATEGIES, Objective, run
from tileplan.search.hoist import NONE
from tileplan.search.objective import recost, volume_problem
from tileplan.workload import zoo
from tileplan.workload.layer import Layer, OpKind

EPLANNER_PRESETS = ("eplanner-a", "eplanner-b", "eplanner-c", "eplanner-d", "cpu-c99")
#: Strategy -> (its objective, the presets of its paper's experiments).
SETUPS: dict[str, tuple[Objective, tuple[str, ...]]] = {
    "random": (Objective.LATENCY, ("nmp", "eyeriss")),
    "tso": (Objective.LATENCY, ("nmp",)),
    "tso-noburst": (Objective.LATENCY, ("nmp",)),
    "eplanner": (Objective.PERF_PER_BYTE, EPLANNER_PRESETS),
    "eplanner-strict": (Objective.PERF_PER_BYTE, EPLANNER_PRESETS),
    "zhang": (Objective.PERF_PER_BYTE, EPLANNER_PRESETS),
    "ma": (Objective.PERF_PER_BYTE, EPLANNER_PRESETS),
    "smartshuttle-rules": (Objective.PERF_PER_BYTE, EPLANNER_PRESETS),
    "ir": (Objective.DRAM, ("ye",)),
    "wr": (Objective.DRAM, ("ye",)),
    "pr": (Objective.DRAM, ("ye",)),
    "smartshuttle": (Objective.DRAM, ("ye",)),
}
#: Strategies that choose on another DRAM model than the preset's own: compared on that model.
VOLUME = frozenset({"tso-noburst"})
RANDOM_BUDGET = 2000


def test_every_strategy_has_a_setup() -> None:
    assert set(SETUPS) == set(STRATEGIES) - {"exhaustive"}


@cache
def _arch(preset: str):  # type: ignore[no-untyped-def]
    return api.load_arch(preset)


@cache
def distinct_layers() -> tuple[Layer, ...]:
    """Every distinct searched layer of the zoo (by signature; copies and shape-only layers need no search)."""
    seen: dict[object, Layer] = {}
    for name in zoo.names():
        for layer in zoo.get(name).layers:
            if layer.moves_data and layer.op is not OpKind.DATA_MOVE:
                seen.setdefault(layer.signature(), layer)
    return tuple(seen.values())


def _problem(preset: str, layer: Layer, volume: bool) -> Problem:
    arch = _arch(preset)
    problem = Problem(layer.with_precision(api._precision(arch, None)), arch)
    return volume_problem(problem) if volume else problem


@cache
def _optimum(preset: str, layer: Layer, objective: Objective, volume: bool) -> float:
    result = run("exhaustive", _problem(preset, layer, volume), objective)
    return float(objective.key(result.cost)[0])


def check(strategy: str, preset: str, layer: Layer) -> str | None:
    """None when the exhaustive optimum is <= the strategy's value (or the strategy does not apply:
    no mapping of its space fits); else a line describing the violation."""
    objective, _ = SETUPS[strategy]
    volume = strategy in VOLUME
    problem = _problem(preset, layer, False)
    try:
        result = run(strategy, problem, objective, budget=RANDOM_BUDGET)
    except TileplanError:
        return None
    value = float(objective.key(recost(_problem(preset, layer, volume), result.mapping))[0])
    best = _optimum(preset, layer, objective, volume)
    if best <= value * (1 + 1e-9):
        return None
    return f"{strategy} on {preset}, {layer.name} ({layer.shape_str()}): exhaustive {best:.6g} > {value:.6g}"


def _layer(network: str, name: str) -> Layer:
    return zoo.get(network)[name]


FAST = [
    ("tso", "nmp", ("squeezenet1_0", "fire6_squeeze")),
    ("tso-noburst", "nmp", ("squeezenet1_0", "fire6_squeeze")),
    ("tso", "nmp", ("mobilenetv2", "block2_dw")),
    ("tso", "nmp", ("lenet5", "conv2")),
    ("random", "nmp", ("squeezenet1_0", "fire6_squeeze")),
    ("eplanner", "eplanner-a", ("lenet5", "conv2")),
    ("eplanner-strict", "eplanner-a", ("lenet5", "conv2")),
    ("zhang", "eplanner-b", ("squeezenet1_0", "fire6_squeeze")),
    ("ma", "eplanner-c", ("lenet5", "conv1")),
    ("smartshuttle-rules", "eplanner-d", ("lenet5", "conv2")),
    ("ir", "ye", ("squeezenet1_0", "fire6_squeeze")),
    ("wr", "ye", ("lenet5", "conv2")),
    ("pr", "ye", ("lenet5", "conv1")),
    ("smartshuttle", "ye", ("squeezenet1_0", "fire6_squeeze")),
]


def test_fast_subset_covers_every_strategy() -> None:
    assert {s for s, _, _ in FAST} == set(SETUPS)


@pytest.mark.parametrize(("strategy", "preset", "where"), FAST, ids=[f"{s}-{p}-{w[1]}" for s, p, w in FAST])
def test_exhaustive_contains_strategy(strategy: str, preset: str, where: tuple[str, str]) -> None:
    assert check(strategy, preset, _layer(*where)) is None


def test_fire6_squeeze_exhaustive_reaches_tso_hoisted_weights() -> None:
    """The layer of issue 24: TSO's weight-stationary mapping (weights span all 256 input channels of
    6 filters per core) took 130,543 cycles; the search without hoisting found 153,711 at best."""
    layer = _layer("squeezenet1_0", "fire6_squeeze")
    problem = _problem("nmp", layer, False)
    tso = run("tso", problem, Objective.LATENCY)
    best = run("exhaustive", problem, Objective.LATENCY)
    assert float(tso.cost.latency_cycles[0]) == pytest.approx(130543.0588, rel=1e-8)
    assert float(best.cost.latency_cycles[0]) <= float(tso.cost.latency_cycles[0])
    plain = run("exhaustive", problem, Objective.LATENCY, hoists=(NONE,))
    assert float(plain.cost.latency_cycles[0]) == pytest.approx(153711.0588, rel=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", sorted(SETUPS))
def test_exhaustive_contains_strategy_everywhere(strategy: str) -> None:
    """Every distinct zoo layer x every preset of the strategy (hours on 2 cores)."""
    _, presets = SETUPS[strategy]
    bad = [line for preset in presets for layer in distinct_layers()
           if (line := check(strategy, preset, layer)) is not None]
    assert not bad, "\n".join(bad)
