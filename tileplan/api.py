"""The Python API, and the one place that hands strategies a compiled problem.

>>> from tileplan import api
>>> conv1 = api.load_network("lenet5")["conv1"]
>>> cost = api.evaluate(conv1, "nmp", api.Mapping.from_dict({"tiles": {"P": 14}}, dims=conv1.dims))
>>> int(cost.dram_weight_bytes)   # all 6 filters of 5x5, 16-bit, loaded once
300
>>> int(cost.dram_output_bytes)   # 6 x 28 x 28 outputs, 16-bit, written once in two row tiles
9408
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tileplan import arch as arch_mod
from tileplan.arch.overrides import apply_overrides
from tileplan.arch.spec import Arch, AxisMode
from tileplan.cost.bounds import compulsory_bytes, io_lower_bound_bytes
from tileplan.cost.levels import evaluate_mappings, level_errors
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, OPERANDS, Dim, Operand
from tileplan.errors import InfeasibleError, MappingError, TileplanError, WorkloadError
from tileplan.interop.tlyaml import timeloop_keys
from tileplan.interop.zigzag import is_hardware, is_workload
from tileplan.mapping import Mapping
from tileplan.parallel import default_jobs, run_parallel
from tileplan.plan import LayerCost, LayerPlan, NetworkPlan
from tileplan.search import LEVEL_STRATEGIES, STRATEGIES
from tileplan.search import run as run_strategy
from tileplan.search.exhaustive import (
    SplitSearch,
    inherit_tables,
    merge_split_searches,
    search_splits,
    with_register_files,
)
from tileplan.search.objective import DramModel, Objective
from tileplan.search.result import SearchResult
from tileplan.search.rf_level import pe_problems as rf_problems
from tileplan.search.rf_level import recost as rf_recost
from tileplan.search.shared import SharedBest, shared_values
from tileplan.search.space import split_options
from tileplan.workload.layer import Layer, OpKind, Precision
from tileplan.workload.network import Network

if TYPE_CHECKING:
    from tileplan.compare import Comparison
    from tileplan.fusion.group import FusedGroup
    from tileplan.fusion.plan import FusionPlan
    from tileplan.fusion.search import GroupResult
    from tileplan.program.correlation import Correlation

__all__ = ["Mapping", "compare", "evaluate", "load_arch", "load_network", "plan", "plan_layer"]

#: Strategies that plan fused groups (``plan --fuse`` only): their single layers use ``exhaustive``.
FUSION_STRATEGIES: tuple[str, ...] = ("hwff",)

#: Names of the objectives a search can minimise (``search.objective.Objective``).
OBJECTIVES: tuple[str, ...] = tuple(o.value for o in Objective)

#: progress(done, total, label) is called as layers are planned.
Progress = Callable[[int, int, str], None]

#: Largest candidate budget of a sampling strategy (each candidate is held in memory at once) and
#: largest batch size (the search enumerates tile sizes of every dimension, batch included).
MAX_BUDGET = 2**21
MAX_BATCH = 1024


def _fused_families() -> dict[str, Any]:
    """``fusion.ye.FUSED_FAMILIES``, imported when a strategy name is not a single-layer one (the
    fusion package is not loaded by commands that do not fuse)."""
    from tileplan.fusion.ye import FUSED_FAMILIES

    return dict(FUSED_FAMILIES)


def check_options(*, strategy: str = "exhaustive", objective: str | Objective = "latency", budget: int = 20_000,
                  seed: int = 0, batch: int = 1, fuse: bool = False) -> Objective:
    """Validate search options before any work; return the objective. Raises ``TileplanError`` naming
    the option and its valid values.

    >>> check_options(objective="energy")
    <Objective.ENERGY: 'energy'>
    >>> check_options(budget=-5)
    Traceback (most recent call last):
    tileplan.errors.TileplanError: --budget must be between 1 and 2097152 candidates, got -5
    """
    if strategy in STRATEGIES or strategy in LEVEL_STRATEGIES:
        pass  # the common case, decided without importing the fusion package
    elif strategy in _fused_families():
        if not fuse:
            raise TileplanError(f"strategy {strategy!r} chooses fused pairs along the network: add --fuse (its "
                                f"single-layer part alone is --strategy {_fused_families()[strategy].single})")
    elif strategy in FUSION_STRATEGIES:
        if not fuse:
            raise TileplanError(f"strategy {strategy!r} plans fused groups: add --fuse")
    else:
        raise TileplanError(f"unknown strategy {strategy!r}; choose one of "
                            f"{', '.join([*STRATEGIES, *LEVEL_STRATEGIES])} (with --fuse also "
                            f"{', '.join([*_fused_families(), *FUSION_STRATEGIES])})")
    if str(objective) not in OBJECTIVES:
        raise TileplanError(f"unknown objective {str(objective)!r}; choose one of {', '.join(OBJECTIVES)}")
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_BUDGET:
        raise TileplanError(f"--budget must be between 1 and {MAX_BUDGET} candidates, got {budget!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise TileplanError(f"--seed must be an integer between 0 and 2**63-1, got {seed!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise TileplanError(f"--batch must be between 1 and {MAX_BATCH}, got {batch!r}")
    return Objective(str(objective))


def load_arch(spec: str | Path | Arch, overrides: Sequence[str] = ()) -> Arch:
    """An accelerator from an ``Arch``, a preset name, a YAML file (tileplan's, a Timeloop v0.4
    architecture or a ZigZag hardware file) or an e-PlaNNer JSON file, with
    ``overrides`` (``"dram.bandwidth_bytes_per_s=8e9"``, see :mod:`tileplan.arch.overrides`) applied."""
    if not isinstance(spec, Arch) and "architecture" in timeloop_keys(spec):
        from tileplan.interop.timeloop_arch import load_timeloop_arch, to_arch

        arch = to_arch(load_timeloop_arch(spec))
    elif not isinstance(spec, Arch) and is_hardware(spec):
        from tileplan.interop.zigzag import load_hardware

        arch = load_hardware(spec)
    else:
        arch = spec if isinstance(spec, Arch) else arch_mod.load(spec)
    return apply_overrides(arch, overrides) if overrides else arch


def load_network(spec: str | Path | Network, *, batch: int = 1, skip_unsupported: bool = False,
                 seq: int | None = None, kv: int | None = None) -> Network:
    """A network from a ``Network``, a zoo name, an ``.onnx`` file, a ZigZag workload YAML, or Timeloop
    v0.4 problem files (one, a comma-separated list, or a folder of them: one layer each); ``seq`` /
    ``kv`` set a transformer's tokens and KV-cache length (``None``: the network's own)."""
    if isinstance(spec, Network):
        return spec
    check_options(batch=batch)
    text = str(spec)
    parts = text.split(",")
    if Path(text).is_dir() or all("problem" in timeloop_keys(p) for p in parts):
        from tileplan.interop.timeloop_problem import load_problems

        network = load_problems(list(parts))
        return network if batch == 1 else Network(network.name, tuple(replace(la, n=la.n * batch) for la in
                                                                       network.layers), network.input_shape)
    if is_workload(text):
        from tileplan.interop.zigzag import load_workload

        return load_workload(text)
    if text.lower().endswith(".onnx") or Path(text).is_file():
        from tileplan.workload.onnx_cache import load_onnx_cached  # (imports onnx only when not cached)

        if kv is not None:
            raise WorkloadError(f"{text}: --kv is for the zoo's decode networks; an ONNX export's KV cache "
                                f"length is its past_key_values shape (give --seq for a dynamic one)")
        return load_onnx_cached(text, batch=batch if batch != 1 else None, skip_unsupported=skip_unsupported,
                                seq=seq)
    from tileplan.workload import zoo

    return zoo.get(text, batch=batch, seq=seq, kv=kv)


def _precision(arch: Arch, precision_bytes: int | None) -> Precision:
    return Precision.uniform(precision_bytes or arch.precision_bytes, arch.psum_bytes)


def validate_mapping(problem: Problem, mapping: Mapping) -> None:
    """Raise ``MappingError`` naming the first constraint ``mapping`` breaks on this layer/arch
    (memory fit is checked by :func:`evaluate`)."""
    arch, layer = problem.arch, problem.layer
    cores = arch.cores
    for label, split, limit in (("clusters", mapping.cluster_split, cores.clusters),
                                ("cores per cluster", mapping.core_split, cores.cores_per_cluster)):
        total = 1
        for d, f in enumerate(split):
            total *= f
            if f > 1 and Dim(d).name not in cores.split_dims:
                raise MappingError(f"{arch.name} cannot split {Dim(d).name} across {label} "
                                   f"(splittable: {', '.join(cores.split_dims)})")
        if total > limit:
            raise MappingError(f"split over {label} uses {total} parts but {arch.name} has {limit}")
    grid = problem.core_grid(mapping.cluster_split, mapping.core_split)
    longest = grid.max_length
    for d in DIMS:
        if mapping.tiles[d] > longest[d]:
            where = " per core" if longest[d] < layer.dims[d] else ""
            raise MappingError(f"tile {d.name}={mapping.tiles[d]} is larger than the layer's {d.name}="
                               f"{longest[d]}{where} (layer {layer.name!r})")
    axes = arch.pe_array.axes
    if len(mapping.spatial) > len(axes):
        raise MappingError(f"mapping unrolls {len(mapping.spatial)} PE-array axes; {arch.name} has {len(axes)}")
    seen: set[Dim] = set()
    for axis, lanes, entry in zip(axes, problem.lanes, mapping.spatial, strict=False):
        if axis.mode is AxisMode.FLATTENED and entry:
            raise MappingError(f"axis {axis.name!r} is a flattened vector over {','.join(axis.dims)}; "
                               f"leave its spatial entry empty")
        if len(entry) > axis.max_dims:
            raise MappingError(f"axis {axis.name!r} unrolls at most {axis.max_dims} dimension(s)")
        used = 1
        for d, f in entry:
            if d.name not in axis.dims:
                raise MappingError(f"axis {axis.name!r} cannot unroll {d.name} (allowed: {', '.join(axis.dims)})")
            if d in seen:
                raise MappingError(f"dimension {d.name} is unrolled on two axes")
            seen.add(d)
            used *= f
        if used > lanes:
            raise MappingError(f"axis {axis.name!r} has {lanes} PEs but the unroll factors multiply to {used}")


def evaluate(layer: Layer, arch: str | Path | Arch, mapping: Mapping, *,
             precision_bytes: int | None = None) -> LayerCost:
    """The full cost breakdown of one given mapping (Timeloop's "model" mode).

    Raises ``MappingError`` saying which constraint fails for an invalid mapping.
    """
    a = load_arch(arch)
    problem = Problem(layer.with_precision(_precision(a, precision_bytes)), a)
    validate_mapping(problem, mapping)
    level_problems = level_errors(problem, mapping)
    if len(mapping.levels) > 1 or (mapping.levels and mapping.spatial):
        raise MappingError(level_problems[0])
    costs = rf_recost(problem, mapping) if mapping.bypass else evaluate_mappings(problem, [mapping])
    if not costs.feasible[0]:
        factor = 2 if a.double_buffering else 1
        level_problems = level_problems + rf_problems(problem, mapping)
        over = []
        for mem, need in zip(a.memories, costs.footprint_bytes[0], strict=True):
            if need * factor > mem.size_bytes:
                dbl = " double-buffered" if factor == 2 else ""
                over.append(f"memory {mem.name!r} holds {mem.size_bytes} B but the{dbl} tiles of "
                            f"{', '.join(mem.operands)} need {need * factor} B")
        over.extend(level_problems)
        raise MappingError(f"mapping does not fit layer {layer.name!r} on {a.name}: " + "; ".join(over))
    return LayerCost.from_batch(costs, 0, a.dram_bytes_per_cycle)


def timeloop_mapping(layer: Layer, arch: str | Path, mapping: str | Path, *, dram_only: bool = False
                     ) -> tuple[Arch, Mapping]:
    """The tileplan accelerator and mapping of a Timeloop mapping file for ``layer`` on the Timeloop
    architecture file ``arch`` (see :func:`tileplan.interop.timeloop.read_mapping`)."""
    from tileplan.interop.timeloop import read_mapping

    return read_mapping(layer, arch, mapping, dram_only=dram_only)


def multi_level_strategy(strategy: str) -> bool:
    """Whether ``strategy`` chooses multi-level mappings (an on-chip level below the DRAM tiles)."""
    return strategy in LEVEL_STRATEGIES


def write_timeloop(plan: NetworkPlan, network: Network, arch: str | Path, folder: str | Path) -> list[Path]:
    """Write every planned layer of ``plan`` as ``LAYER.problem.yaml`` and ``LAYER.map.yaml`` (Timeloop
    v0.4) into ``folder``, for the Timeloop architecture file ``arch``; returns the paths written."""
    from tileplan.interop.timeloop import write_files

    return write_files([(network[lp.name], lp.mapping) for lp in plan.layers if lp.mapping is not None], arch,
                       folder)


def write_zigzag(plan: NetworkPlan, network: Network, arch: Arch, folder: str | Path) -> list[Path]:
    """Write the planned layers of ``plan`` as ZigZag inputs (workload, hardware, mapping YAML)."""
    from tileplan.interop.zigzag_mapping import write_files

    return write_files([(network[lp.name], lp.mapping) for lp in plan.layers if lp.mapping is not None], arch,
                       folder)


def plan_layer(layer: Layer, arch: Arch, *, strategy: str = "exhaustive", objective: str | Objective = "latency",
               budget: int = 20_000, seed: int = 0, dram_model: str = "burst",
               options: dict[str, Any] | None = None) -> LayerPlan:
    """Search one layer (precision must be set, or the accelerator's default is used).

    ``dram_model`` is the DRAM time the search minimises (``burst`` or ``volume``; the plan is always
    costed with the full burst model); ``options`` go to the strategy (e.g. TSO's ``fix_partition``).
    """
    obj = check_options(strategy=strategy, objective=objective, budget=budget, seed=seed)
    layer = layer.with_precision(_precision(arch, None))
    trivial = _trivial_plan(layer, arch, strategy)
    if trivial is not None:
        return trivial
    problem = Problem(layer, arch)
    return _layer_plan(layer, arch, run_strategy(strategy, problem, obj, dram_model=dram_model, budget=budget,
                                                 seed=seed, **(options or {})))


def _trivial_plan(layer: Layer, arch: Arch, strategy: str) -> LayerPlan | None:
    """The plan of a layer that moves no data or only copies it (nothing to search), else None."""
    if not layer.moves_data:
        return LayerPlan(layer.name, layer.op.value, layer.shape_str(), None, LayerCost.zero(), 0, 0, strategy,
                         0, 0.0, 0.0)
    if layer.op in (OpKind.DATA_MOVE, OpKind.EMBEDDING):
        compulsory = compulsory_bytes(layer)
        return LayerPlan(layer.name, layer.op.value, layer.shape_str(), None, streaming_copy(layer, arch),
                         compulsory, compulsory, "stream", 0, 1.0, 0.0)
    return None


def _layer_plan(layer: Layer, arch: Arch, result: SearchResult) -> LayerPlan:
    cost = LayerCost.from_batch(result.cost, 0, arch.dram_bytes_per_cycle)
    return LayerPlan(layer.name, layer.op.value, layer.shape_str(), result.mapping, cost, compulsory_bytes(layer),
                     io_lower_bound_bytes(layer, arch), result.strategy, result.evaluated, result.space_size,
                     result.seconds)


def streaming_copy(layer: Layer, arch: Arch) -> LayerCost:
    """Cost of a pure re-arrangement (reorg, shuffle, resize): it has no loop nest to tile, so it is
    priced as one sequential read of its input and one sequential write of its output through the
    on-chip buffers (each a contiguous stream: ceil(bytes / burst) bursts)."""
    prec = layer.resolved_precision()
    rd = layer.elements(Operand.INPUT) * prec.input
    wr = layer.elements(Operand.OUTPUT) * prec.output
    burst = arch.dram.burst_bytes
    bursts = -(-rd // burst) + -(-wr // burst)
    cycles = (rd + wr) / arch.dram_bytes_per_cycle + bursts * arch.burst_latency_cycles
    e_buf = (arch.memory_of(Operand.INPUT).energy_pj_per_byte * rd
             + arch.memory_of(Operand.OUTPUT).energy_pj_per_byte * wr)
    e_dram = (rd + wr) * arch.dram.energy_pj_per_byte
    return LayerCost(rd, 0, wr, 0, bursts, cycles, 0, 0, cycles, e_buf + e_dram, 0, 0, e_buf, 0, e_dram, 0.0, False,
                     0, (), 0.0, 0.0)


#: A layer with at least this many core splits has its exhaustive search cut into parts that run
#: in parallel (when there is more than one job and few layers), sharing the best value found so far.
SPLIT_PARTS_MIN_SPLITS = 8
#: With at least this many distinct layers per job, layers are searched whole, costliest first: parts
#: of one layer would each repeat its per-layer work (the bounds of every split, tile groups) and prune
#: with less knowledge, and there are enough layers to keep every job busy.
WHOLE_LAYERS_PER_JOB = 4

_Item = tuple[Layer, Arch, str, Objective, int, int, str, dict[str, Any] | None, tuple[int, int] | None,
              SharedBest | None]


def _plan_one(args: _Item) -> LayerPlan | SplitSearch:
    layer, arch, strategy, obj, budget, seed, dram_model, options, part, shared = args
    if part is None:
        return plan_layer(layer, arch, strategy=strategy, objective=obj, budget=budget, seed=seed,
                          dram_model=dram_model, options=options)
    return search_splits(Problem(layer, arch), obj, part=part, shared=shared)


def _parts(layer: Layer, arch: Arch, strategy: str, workers: int, dram_model: str, layers: int = 1) -> int:
    """Into how many parallel parts a layer's search is cut (1: searched whole), ``layers`` being
    searched in all."""
    if workers <= 1 or strategy != "exhaustive" or DramModel.parse(dram_model) is not DramModel.BURST or \
            layers >= WHOLE_LAYERS_PER_JOB * workers or _trivial_plan(layer, arch, strategy) is not None:
        return 1
    return workers if len(split_options(Problem(layer, arch))) >= SPLIT_PARTS_MIN_SPLITS else 1


def _estimate(layer: Layer, strategy: str) -> float:
    """A rough relative cost of a layer's search, to start the costliest ones first: the exhaustive
    search's tile candidates grow with the distinct trip counts of every dimension; 0 for other
    strategies (kept in network order)."""
    if strategy != "exhaustive" or not layer.moves_data:
        return 0.0
    trips = 1.0
    for length in layer.dim_tuple:
        trips *= len({-(-length // t) for t in range(1, length + 1)})
    return trips


def plan(network: str | Path | Network, arch: str | Path | Arch, *, strategy: str = "exhaustive",
         objective: str | Objective = "latency", batch: int = 1, precision_bytes: int | None = None,
         budget: int = 20_000, seed: int = 0, cache: bool = True, jobs: int | None = None,
         progress: Progress | None = None, dram_model: str = "burst",
         options: dict[str, Any] | None = None) -> NetworkPlan:
    """Plan every layer of ``network`` on ``arch``.

    Layers with identical planning parameters are searched once (e-PlaNNer's schedule caching,
    thesis Sec. 4.2); the others reuse the plan and record ``cached_from``. Distinct layers are
    searched in parallel over ``jobs`` processes (default: every CPU), as TSO's Alg. 1 does.
    """
    obj = check_options(strategy=strategy, objective=objective, budget=budget, seed=seed, batch=batch)
    a = load_arch(arch)
    net, precision_source = _network_precision(load_network(network, batch=batch), a, precision_bytes)
    owner: dict[tuple[object, ...], str] = {}
    todo: list[Layer] = []
    for layer in net.layers:
        key = layer.signature() if cache else (layer.name,)
        if key not in owner:
            owner[key] = layer.name
            todo.append(layer)
    workers = jobs or default_jobs()
    results: dict[str, LayerPlan] = {}
    DramModel.parse(dram_model)  # fail before any search
    if progress:
        progress(0, len(todo), todo[0].name)
    try:
        parts = [_parts(layer, a, strategy, workers, dram_model, len(todo)) for layer in todo]
        cost = [_estimate(layer, strategy) if workers > 1 else 0.0 for layer in todo]
        if strategy == "exhaustive" and workers > 1:
            inherit_tables()  # before the workers are forked
        with shared_values(len(todo) if max(parts, default=1) > 1 else 0) as path:
            # Big layers first, each as ``parts`` items: their parts then run side by side; then the
            # costliest first, so that no big layer is left to run alone at the end.
            args: list[_Item] = []
            owner_of: list[int] = []
            for li in sorted(range(len(todo)), key=lambda li: (-parts[li], -cost[li])):
                for k in range(parts[li]):
                    part = (k, parts[li]) if parts[li] > 1 else None
                    shared = SharedBest(path, li) if part else None
                    args.append((todo[li], a, strategy, obj, budget, seed, dram_model, options, part, shared))
                    owner_of.append(li)
            found: dict[int, list[SplitSearch]] = {}
            for i, res in run_parallel(_plan_one, args, jobs=min(workers, len(args))):
                li = owner_of[i]
                if isinstance(res, SplitSearch):
                    found.setdefault(li, []).append(res)
                    if len(found[li]) < parts[li]:
                        continue
                    whole = Problem(todo[li], a)  # the parts' result, then the register-file level as exhaustive
                    res = _layer_plan(todo[li], a, with_register_files(whole, obj, merge_split_searches(
                        whole, found.pop(li))))
                results[todo[li].name] = res
                if progress:
                    progress(len(results), len(todo), todo[li].name)
    except WorkloadError as err:
        raise WorkloadError(f"network {net.name!r}: {err}") from None
    out: list[LayerPlan] = []
    for layer in net.layers:
        ref_name = owner[layer.signature() if cache else (layer.name,)]
        ref = results[ref_name]
        if ref_name == layer.name:
            out.append(ref)
        else:
            out.append(LayerPlan(layer.name, ref.op, ref.shape, ref.mapping, ref.cost, ref.compulsory_bytes,
                                 ref.io_bound_bytes, ref.strategy, 0, ref.space_size, 0.0,
                                 cached_from=ref.name if ref.mapping is not None else None))
    return NetworkPlan(net.name, a.name, obj.value, strategy, a.clock_hz, tuple(out),
                       {"batch": net.batch, "precision_bytes": precision_bytes or a.precision_bytes,
                        "precision_source": precision_source,
                        "psum_bytes": a.psum_bytes or precision_bytes or a.precision_bytes,
                        "dram_model": dram_model, "dram_burst_bytes": a.dram.burst_bytes, **(options or {})})


def _network_precision(net: Network, arch: Arch, precision_bytes: int | None) -> tuple[Network, str]:
    """``net`` with every layer's precision set, and where it came from: ``precision_bytes`` (the
    ``--precision`` option) overrides everything; else a layer keeps the precision its ONNX element
    types gave (fp16 / bf16 / int8 exports) and the others take the accelerator's."""
    if precision_bytes:
        forced = _precision(arch, precision_bytes)
        return replace(net, layers=tuple(replace(x, precision=forced) for x in net.layers)), "--precision"
    typed = any(x.precision is not None for x in net.layers)
    return net.with_precision(_precision(arch, None)), "onnx element types" if typed else "arch"


def strategy_options(*, fix_partition: str | None = None, fix_schedule: str | None = None,
                     pruning: Sequence[str] = (), max_parallel: int | None = None,
                     min_utilization: float | None = None) -> dict[str, Any]:
    """Validated strategy options; raises ``TileplanError`` on a bad name. TSO's fixed baselines
    (``fix_partition``, ``fix_schedule``); MARVEL's pruning switches (``marvel``, ``marvel-joint`` and
    the dataflow baselines): ``pruning`` names the ones to switch off (:data:`MARVEL_PRUNING`),
    ``max_parallel`` (dimensions that fan out) and ``min_utilization`` (PE fraction a step uses)."""
    out: dict[str, Any] = {}
    if fix_partition or fix_schedule:  # TSO's module is loaded only when its options are given
        from tileplan.search.tso import parse_partition, parse_schedule

        if fix_partition:
            out["fix_partition"] = parse_partition(fix_partition).value
        if fix_schedule:
            out["fix_schedule"] = parse_schedule(fix_schedule).value
    for name in pruning:
        if name not in MARVEL_PRUNING:
            raise TileplanError(f"unknown pruning option {name!r}; choose from {', '.join(MARVEL_PRUNING)}")
        key, value = MARVEL_PRUNING[name]
        out[key] = value
    if max_parallel is not None:
        if max_parallel < 1:
            raise TileplanError(f"--max-parallel must be at least 1, got {max_parallel}")
        out["max_parallel"] = max_parallel
    if min_utilization is not None:
        if not 0.0 <= min_utilization <= 1.0:
            raise TileplanError(f"--min-utilization must be between 0 and 1, got {min_utilization}")
        out["min_utilization"] = min_utilization
    return out


#: MARVEL's pruning options that ``--no-prune NAME`` switches off: name -> (strategy option, value).
MARVEL_PRUNING: dict[str, tuple[str, Any]] = {
    "divisors": ("divisors", False),  # on-chip tiles need not divide their parent's (prologues/epilogues)
    "offchip-divisors": ("offchip_divisors", False),  # the same for the level-3 (DRAM) tiles
    "unroll-rs": ("unroll_rs", False),  # R and S may take several on-chip steps
    "symmetry": ("symmetry", False),  # keep orders that mirror P,R <-> Q,S on square tiles
    "layouts": ("every_layout", True),  # every permutation of each tensor, not one per innermost dim
    "utilization": ("min_utilization", 0.0),  # no minimum PE utilisation
    "bound": ("bound", False),  # cost every candidate (no lower-bound pruning; same result)
}


def plan_fused(network: str | Path | Network, arch: str | Path | Arch, *, objective: str | Objective = "latency",
               strategy: str = "exhaustive", batch: int = 1, precision_bytes: int | None = None,
               budget: int = 20_000, seed: int = 0, cache: bool = True, jobs: int | None = None,
               max_group: int = 4, every_start: bool = True, progress: Progress | None = None) -> FusionPlan:
    """Plan ``network`` with layer fusion: the unfused plan of every layer (:func:`plan`), then the
    fused groups that the dynamic programme of ``fusion.planner`` chooses (never worse than the
    unfused plan under ``objective``), each with at most ``max_group`` layers with a compute window
    (convolutions, pools; the adds and concats joining them are not counted, ``block.group_length``)."""
    from tileplan.fusion.planner import GroupSearch, plan_fusion
    from tileplan.fusion.ye import FUSED_FAMILIES, group_searcher

    if max_group < 2:
        raise TileplanError(f"max_group must be at least 2 (a group fuses two or more layers), got {max_group}")
    check_options(strategy=strategy, objective=objective, budget=budget, seed=seed, batch=batch, fuse=True)
    family = FUSED_FAMILIES.get(strategy)
    searcher: GroupSearch | None = None
    if family is not None:  # a paper's fused family: its single-layer strategy, its pairs only
        strategy, max_group, searcher = family.single, family.max_group, group_searcher(family.fused)
    elif strategy == "hwff":  # HW-Flow-Fusion: its restricted group search, single layers exhaustive
        from tileplan.fusion.hwff import search_hwff

        strategy, searcher = "exhaustive", search_hwff
    a = load_arch(arch)
    net = load_network(network, batch=batch).with_precision(_precision(a, precision_bytes))
    base = plan(net, a, strategy=strategy, objective=objective, batch=batch, precision_bytes=precision_bytes,
                budget=budget, seed=seed, cache=cache, jobs=jobs, progress=progress)
    return plan_fusion(net, a, base, objective, max_group=max_group, every_start=every_start,
                       jobs=jobs or default_jobs(), progress=progress, searcher=searcher)


def plan_group(network: str | Path | Network, arch: str | Path | Arch, names: Sequence[str], *,
               objective: str | Objective = "latency", batch: int = 1,
               precision_bytes: int | None = None, strategy: str = "exhaustive", seq: int | None = None,
               kv: int | None = None) -> tuple[FusedGroup, GroupResult]:
    """The best fused mapping of the consecutive layers ``names`` of ``network`` (a legal chain):
    over the whole fused space (``exhaustive``) or, with ``hwff``, under HW-Flow-Fusion's spatial and
    temporal partitions of the PE array (the mapping the ``hwff`` network planner keeps). ``seq`` /
    ``kv``: a transformer's tokens and KV-cache length.

    Raises ``WorkloadError`` for an illegal group and ``InfeasibleError`` when no fused mapping fits.
    """
    from tileplan.fusion.block import group_of
    from tileplan.fusion.hwff import search_hwff
    from tileplan.fusion.search import search_group

    if strategy not in ("exhaustive", "hwff"):
        raise TileplanError(f"a fused group is searched with strategy exhaustive or hwff, not {strategy!r}")
    a = load_arch(arch)
    net = load_network(network, batch=batch, seq=seq, kv=kv).with_precision(_precision(a, precision_bytes))
    group = group_of(net, names)
    if strategy == "hwff" and group.transformer is not None:
        raise TileplanError(f"{group.name} is an attention or MLP block: HW-Flow-Fusion's partitions fuse windowed "
                            f"chains; search it with --strategy exhaustive")
    result = (search_hwff if strategy == "hwff" else search_group)(group, a, Objective(objective))
    if result is None:
        raise InfeasibleError(f"no fused mapping of {group.name} fits on {a.name}'s on-chip memories")
    return group, result


def compare(network: str | Path | Network, arch: str | Path | Arch, strategies: Sequence[str], *,
            objective: str | Objective = "latency", batch: int = 1, budget: int = 20_000, seed: int = 0,
            jobs: int | None = None, progress: Progress | None = None, fuse: bool = False,
            max_group: int = 4, options: dict[str, Any] | None = None) -> Comparison:
    """Plan ``network`` once per strategy (same accelerator, objective, budget and seed) and rank them
    per layer and in total (:class:`tileplan.compare.Comparison`). With ``fuse`` each strategy's plan
    is :func:`plan_fused` (its unfused plan plus the fused groups chosen over it) and rows are blocks
    of layers that every strategy covers with whole segments."""
    from tileplan.compare import Comparison

    if not strategies:
        raise TileplanError("compare needs at least one strategy")
    for s in strategies:
        check_options(strategy=s, objective=objective, budget=budget, seed=seed, batch=batch)
    a = load_arch(arch)
    net = load_network(network, batch=batch)
    names = list(dict.fromkeys(strategies))
    if fuse:
        return Comparison.from_fused_plans(tuple(
            plan_fused(net, a, strategy=s, objective=objective, batch=batch, budget=budget, seed=seed, jobs=jobs,
                       max_group=max_group, progress=progress) for s in names))
    plans = tuple(plan(net, a, strategy=s, objective=objective, batch=batch, budget=budget, seed=seed, jobs=jobs,
                       progress=progress, options=options) for s in names)
    return Comparison.from_plans(plans)


def operand_names() -> list[str]:
    return [op.label for op in OPERANDS]


def _read_plan(path: Path) -> NetworkPlan:
    """The per-layer plan in the JSON file ``path`` (errors name the file and say what it holds)."""
    from tileplan.files import read_json_input

    data = read_json_input(path, "plan file (JSON)", f"{path}:", "a plan file")
    if isinstance(data, dict) and "groups" in data and "base" in data:
        raise TileplanError(f"{path} is a fused plan (`plan --fuse`): fused groups have no per-layer time to "
                            f"correlate; give a plan written by `tileplan plan --json` without --fuse")
    if not isinstance(data, dict):
        raise TileplanError(f"{path}: not a tileplan plan file (expected a JSON object, as `tileplan plan --json` "
                            f"writes)")
    try:
        return NetworkPlan.from_dict(data)
    except TileplanError as err:
        raise TileplanError(f"{path}: {err}") from None


def correlate(plan: NetworkPlan | str | Path, measured: dict[str, float] | str | Path | None = None, *,
              time_c: bool = False, repeats: int = 3, log: Callable[[str], None] | None = None) -> Correlation:
    """Pearson correlation of a plan's modelled per-layer times with measured ones (e-PlaNNer Fig.
    6.3): ``measured`` is ``{layer: seconds}`` or a ``layer,seconds`` CSV; with ``time_c`` the plan's
    generated C programs are compiled and timed on this CPU instead (zoo networks only)."""
    from tileplan.program.correlation import correlate as pair
    from tileplan.program.correlation import read_measured
    from tileplan.program.ctime import time_layers

    if not isinstance(plan, NetworkPlan):
        plan = _read_plan(Path(plan))
    if time_c:
        times = time_layers(load_network(plan.network), load_arch(plan.arch), plan, repeats=repeats, log=log)
    elif measured is None:
        raise TileplanError("give measured times (a layer,seconds CSV) or ask to time the generated C programs")
    else:
        times = measured if isinstance(measured, dict) else read_measured(measured)
    return pair(plan, times)
